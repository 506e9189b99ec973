"""Nothing a stranger sends stalls the gateway (issue 21), on live clusters.

A PLAINTEXT cluster (connections.max.idle.ms short, queued.max.request.bytes 8 MiB): three
connections holding 100 MB size prefixes, and one holding the whole request memory with real
bytes, while an existing and a fresh connection get answers and a producer delivers; the prefix
holders are closed once idle for connections.max.idle.ms, as is a connection that never sent a byte.
A SASL_PLAINTEXT cluster: the same with unauthenticated strangers (100 MB prefixes are closed at once,
prefixes under sasl.server.max.receive.size are held); a 600 KiB frame before authentication closes
that connection; a failed login is answered after connection.failed.authentication.delay.ms, its
connection closed, and it is counted in raygroups_failed_authentications_total.

Each cluster is class-scoped (one class uses it), so that only one runs at a time.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import time
import urllib.request

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client.parser import text_string_to_metric_families

from cluster.gateway.apis import ApiKey
from tests.clients import confluent_produce, records
from tests.cluster_process import RAYGROUPS, ClusterProcess
from tests.kio_client import KioClient

pytestmark = pytest.mark.slow

IDLE_MS = 15_000
FAILED_AUTHENTICATION_DELAY_MS = 500
POOL = 8 * 1024 * 1024
PREFIX_100_MB = b"\x05\xf5\xe1\x00"  # 100,000,000
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(data, *config: str) -> ClusterProcess:
    port = _free_port()
    args = [arg for pair in (*config, f"raygroups.metrics.port={port}") for arg in ("--config", pair)]
    proc = ClusterProcess(data, *args, gateways=1).start()
    proc.metrics_url = f"http://127.0.0.1:{port}/metrics"
    return proc


def counter(cluster, name: str, **labels: str) -> float:
    with urllib.request.urlopen(cluster.metrics_url, timeout=30) as answer:
        text = answer.read().decode()
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def connect(cluster) -> socket.socket:
    host, _, port = cluster.bootstrap.split(",")[0].rpartition(":")
    return socket.create_connection((host, int(port)), timeout=30)


def still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""  # bytes: open (nothing is sent to these, though)
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.setblocking(True)


def wait_closed(sock: socket.socket, timeout: float) -> float:
    """Wait for the gateway to close sock; when it did (time.monotonic())."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(1)
    except ConnectionResetError:
        data = b""
    assert data == b"", data
    return time.monotonic()


def served(client: KioClient) -> bool:
    return client.call(ApiKey.METADATA, 12, METADATA).brokers is not None


@pytest.fixture(scope="class")
def plaintext(tmp_path_factory):
    proc = start(tmp_path_factory.mktemp("limits"), f"connections.max.idle.ms={IDLE_MS}", f"queued.max.request.bytes={POOL}")
    yield proc
    proc.stop()


class TestPlaintext:
    def test_prefix_only_connections_stall_nobody_and_are_closed_once_idle(self, plaintext):
        cluster = plaintext
        existing = KioClient(cluster.bootstrap, timeout=15)
        assert served(existing)
        silent = connect(cluster)  # never sends a byte
        attackers = [connect(cluster) for _ in range(3)]
        for attacker in attackers:
            attacker.sendall(PREFIX_100_MB)
        last_byte = time.monotonic()
        try:
            assert served(existing)
            with KioClient(cluster.bootstrap, timeout=15) as fresh:
                assert served(fresh)
            sent = confluent_produce(cluster.bootstrap, "after-prefixes", records(10, 1, "p"), **{"message.timeout.ms": 20_000})
            assert len(sent) == 10
            assert all(still_open(a) for a in attackers)  # served while they hold their prefixes
            # Then connections.max.idle.ms closes them, half a frame sent or nothing at all.
            closed = [wait_closed(a, IDLE_MS / 1000 + 30) for a in attackers]
            assert min(closed) - last_byte >= IDLE_MS / 1000 - 0.05
            wait_closed(silent, 30)
            assert counter(cluster, "raygroups_connections_closed_total", reason="connections.max.idle.ms") >= 4
        finally:
            existing.close()
            silent.close()
            for attacker in attackers:
                attacker.close()

    def test_a_connection_holding_all_request_memory_stalls_only_itself(self, plaintext):
        cluster = plaintext
        existing = KioClient(cluster.bootstrap, timeout=15)
        assert served(existing)
        waits = counter(cluster, "raygroups_request_memory_waits_total")
        hog = connect(cluster)
        hog.sendall(PREFIX_100_MB + b"x" * (POOL + 100_000))  # real bytes, past the whole bound
        try:
            assert served(existing)
            with KioClient(cluster.bootstrap, timeout=15) as fresh:
                assert served(fresh)
            sent = confluent_produce(cluster.bootstrap, "beside-a-hog", records(10, 1, "h"), **{"message.timeout.ms": 20_000})
            assert len(sent) == 10 and still_open(hog)
            assert counter(cluster, "raygroups_request_memory_waits_total") == waits + 1
        finally:
            existing.close()
            hog.close()


def authenticated(cluster, password: str = "alice-pw") -> KioClient:
    client = KioClient(cluster.bootstrap, timeout=15)
    assert client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
    answer = client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + password.encode()})
    assert answer.error_code == ErrorCode.none, answer
    return client


SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
        "sasl.password": "alice-pw", "message.timeout.ms": 20_000}


@pytest.fixture(scope="class")
def sasl(tmp_path_factory):
    data = tmp_path_factory.mktemp("sasl-limits")
    subprocess.run([RAYGROUPS, "user", "add", "alice", "--data-dir", str(data), "--password", "alice-pw"], check=True)
    proc = start(data, "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                 f"connection.failed.authentication.delay.ms={FAILED_AUTHENTICATION_DELAY_MS}")
    yield proc
    proc.stop()


class TestSasl:
    def test_unauthenticated_strangers_stall_nobody(self, sasl):
        cluster = sasl
        existing = authenticated(cluster)
        large = [connect(cluster) for _ in range(3)]
        small = [connect(cluster) for _ in range(3)]
        for attacker in large:
            attacker.sendall(PREFIX_100_MB)  # above sasl.server.max.receive.size: closed
        for attacker in small:
            attacker.sendall(struct.pack(">i", 500_000))  # below it: held, reading on
        try:
            for attacker in large:
                wait_closed(attacker, 30)
            assert served(existing)
            with authenticated(cluster) as fresh:
                assert served(fresh)
            assert len(confluent_produce(cluster.bootstrap, "sasl-after-prefixes", records(10, 1, "s"), **SASL)) == 10
            assert all(still_open(a) for a in small)
        finally:
            existing.close()
            for attacker in large + small:
                attacker.close()

    def test_a_600_kib_frame_before_authentication_closes_the_connection(self, sasl):
        cluster = sasl
        with connect(cluster) as sock:
            sock.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
            wait_closed(sock, 30)
        with authenticated(cluster) as client:  # after authentication socket.request.max.bytes is the bound
            client.sock.sendall(struct.pack(">i", 600 * 1024))
            assert still_open(client.sock)

    def test_a_failed_login_is_delayed_closed_and_counted(self, sasl):
        cluster = sasl
        failed = counter(cluster, "raygroups_failed_authentications_total")
        with KioClient(cluster.bootstrap, timeout=15) as client:
            assert client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
            started = time.monotonic()
            answer = client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0wrong"})
            assert time.monotonic() - started >= FAILED_AUTHENTICATION_DELAY_MS / 1000 - 0.01
            assert answer.error_code == ErrorCode.sasl_authentication_failed
            wait_closed(client.sock, 30)
        assert counter(cluster, "raygroups_failed_authentications_total") == failed + 1
