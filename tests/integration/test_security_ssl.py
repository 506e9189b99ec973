"""TLS without SASL on a live cluster (issue 10): an SSL listener from a PEM keystore; confluent-kafka,
kafka-python and aiokafka each produce and consume through it; a plaintext client is not served."""

from __future__ import annotations

import socket
import struct

import pytest

from tests.certs import write_keystore_and_ca
from tests.clients import aiokafka_round_trip, confluent_round_trip, kafka_python_round_trip
from tests.cluster_process import ClusterProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    keystore, ca_file = write_keystore_and_ca(data.parent)
    config = ["listeners=SSL://127.0.0.1:0", f"ssl.keystore.location={keystore}"]
    proc = ClusterProcess(data, *[arg for pair in config for arg in ("--config", pair)], gateways=1).start()
    proc.ca_file = str(ca_file)
    yield proc
    proc.stop()


def conf(cluster) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SSL", "ssl.ca.location": cluster.ca_file}


def test_confluent_produces_and_consumes(tls):
    assert confluent_round_trip(conf(tls), "c-tls") == [f"v{i}".encode() for i in range(10)]


def test_kafka_python_produces_and_consumes(tls):
    settings = dict(bootstrap_servers=tls.bootstrap, security_protocol="SSL", ssl_cafile=tls.ca_file)
    assert kafka_python_round_trip(settings, "kp-tls", "kp-tls") == [f"k{i}".encode() for i in range(5)]


def test_aiokafka_produces_and_consumes(tls):
    from aiokafka.helpers import create_ssl_context

    settings = dict(bootstrap_servers=tls.bootstrap, security_protocol="SSL",
                    ssl_context=create_ssl_context(cafile=tls.ca_file))
    assert aiokafka_round_trip(settings, "aio-tls") == [f"a{i}".encode() for i in range(5)]


def test_a_plaintext_client_is_not_served(tls):
    host, _, port = tls.bootstrap.split(",")[0].rpartition(":")
    api_versions_v0 = struct.pack(">hhih", 18, 0, 1, -1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(api_versions_v0)) + api_versions_v0)
        answer = sock.recv(64)
    # The TLS server reads the bytes as a broken handshake: a TLS alert record (type 21) or a close.
    assert answer == b"" or answer[:1] == b"\x15"
