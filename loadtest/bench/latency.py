"""Unloaded round trips: one connection, one request at a time, each request's time from its last
byte sent to its answer's last byte read (issue 24: latency is a figure, not only throughput).

The client is a blocking socket with every request encoded once and only its correlation id
patched, so what it adds to a round trip is a send and a receive: a few microseconds against the
tens to thousands measured. It forms its own classic group (JoinGroup, SyncGroup) and then times
Heartbeat and OffsetCommit of that member, besides ApiVersions, Metadata and a Produce of one
100-byte record with acks=all (-1), which any broker answers without a group. Works against any
Kafka broker (raygroups, tansu).
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from cluster.gateway.apis import ApiKey, build, request_class, response_class
from cluster.record_batch_writer import write_batch

# The APIs timed, with the versions every peer serves (tansu advertises Heartbeat <= 4 and
# OffsetCommit <= 9, Metadata <= 12).
VERSIONS = {ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 12, ApiKey.JOIN_GROUP: 9, ApiKey.SYNC_GROUP: 5,
            ApiKey.HEARTBEAT: 4, ApiKey.OFFSET_COMMIT: 9, ApiKey.CREATE_TOPICS: 7, ApiKey.PRODUCE: 9}
QUANTILES = {"p50": 0.50, "p99": 0.99, "p999": 0.999}


class Connection:
    """One blocking Kafka connection: encode once, send many."""

    def __init__(self, bootstrap: str, timeout: float = 30) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def encode(self, api_key: int, body: dict[str, Any]) -> bytearray:
        version = VERSIONS[ApiKey(api_key)]
        request = build(request_class(api_key, version), body)
        header_cls = RequestHeaderV2 if type(request).__flexible__ else RequestHeaderV1
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                                  correlation_id=0, client_id="bench"))
        entity_writer(type(request))(buf, request)
        data = buf.getvalue()
        return bytearray(struct.pack(">i", len(data)) + data)

    def send(self, frame: bytearray) -> bytes:
        """One round trip of an encoded request: the answer's payload (header included)."""
        self.correlation_id += 1
        struct.pack_into(">i", frame, 8, self.correlation_id)  # after size, api key and version
        self.sock.sendall(frame)
        size = struct.unpack(">i", self._recv(4))[0]
        return self._recv(size)

    def call(self, api_key: int, body: dict[str, Any]) -> Any:
        payload = self.send(self.encode(api_key, body))
        cls = response_class(api_key, VERSIONS[ApiKey(api_key)])
        header, offset = entity_reader(cls.__header_schema__)(payload, 0)
        assert header.correlation_id == self.correlation_id
        return entity_reader(cls)(payload, offset)[0]

    def _recv(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()


def quantiles(samples_us: list[float], prefix: str) -> dict[str, float]:
    """p50/p99/p999 of round trips, in milliseconds (nearest rank)."""
    ordered = sorted(samples_us)
    return {f"{prefix}_{name}_ms": ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000
            for name, q in QUANTILES.items()}


def timed(conn: Connection, frame: bytearray, samples: int, check: Any = None, gap_s: float = 0.0) -> list[float]:
    """Round trips of one encoded request, in microseconds; `check` sees the first answer. With
    `gap_s`, each request waits that long after the previous answer (every process on the way has
    gone idle by then: the sparse requests of a lightly loaded cluster)."""
    out = []
    for i in range(samples):
        if gap_s:
            time.sleep(gap_s)
        start = time.perf_counter_ns()
        payload = conn.send(frame)
        out.append((time.perf_counter_ns() - start) / 1000)
        if i == 0 and check is not None:
            check(payload)
    return out


def _answered_none(api_key: int, error_of: Any):
    """A check that the answer (decoded) carries no error: `error_of(response)` is its code."""
    cls = response_class(api_key, VERSIONS[ApiKey(api_key)])

    def check(payload: bytes) -> None:
        offset = entity_reader(cls.__header_schema__)(payload, 0)[1]
        code = error_of(entity_reader(cls)(payload, offset)[0])
        if code != ErrorCode.none:
            raise RuntimeError(f"the broker answered {ErrorCode(code).name} to {ApiKey(api_key).name}")
    return check


def join(conn: Connection, group: str, topic: str, timeout_s: float = 120) -> tuple[str, int]:
    """A one-member classic group, Stable: (member id, generation). Joins again while the broker
    answers that the group is still rebalancing (tansu forms a group in tens of seconds)."""
    member_id = ""
    protocol = [{"name": "range", "metadata": _subscription(topic)}]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = conn.call(ApiKey.JOIN_GROUP, {
            "group_id": group, "session_timeout": 30_000, "rebalance_timeout": 60_000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer", "protocols": protocol, "reason": None})
        if r.error_code == ErrorCode.member_id_required:
            member_id = r.member_id
            continue
        if r.error_code != ErrorCode.none:
            time.sleep(0.1)
            continue
        member_id = r.member_id
        s = conn.call(ApiKey.SYNC_GROUP, {
            "group_id": group, "generation_id": r.generation_id, "member_id": member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": r.protocol_name,
            "assignments": [{"member_id": member_id, "assignment": _assignment(topic)}]})
        if s.error_code == ErrorCode.none:
            return member_id, r.generation_id
        time.sleep(0.1)
    raise RuntimeError(f"the group did not become Stable in {timeout_s:g} s")


def _assignment(topic: str) -> bytes:
    """ConsumerProtocolAssignment v0: partition 0 of `topic`, user data null (tansu refuses an empty
    assignment: its SyncGroup answers REBALANCE_IN_PROGRESS to it)."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">iii", 1, 0, -1)


def _subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, [topics], user data (null)."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def unloaded_round_trips(bootstrap: str, samples: int = 2000, warmup: int = 200, gap_s: float = 0.0) -> dict[str, float]:
    """p50/p99/p999 of ApiVersions, Metadata (one topic), Heartbeat, Produce (acks=all) and OffsetCommit, one request
    at a time on one connection (`gap_s` apart), after `warmup` untimed ones of each."""
    stamp = time.monotonic_ns()
    topic, group = f"latency-{stamp}", f"latency-{stamp}"
    conn = Connection(bootstrap)
    try:
        created = conn.call(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 30_000, "validate_only": False})
        if created.topics[0].error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            raise RuntimeError(f"CreateTopics answered {created.topics[0].error_code.name}")
        member_id, generation = join(conn, group, topic)
        frames = {
            "api_versions": conn.encode(ApiKey.API_VERSIONS, {"client_software_name": "bench", "client_software_version": "1"}),
            "metadata": conn.encode(ApiKey.METADATA, {"topics": [{"topic_id": None, "name": topic}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False}),
            "heartbeat": conn.encode(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": generation,
                                                        "member_id": member_id, "group_instance_id": None}),
            "produce": conn.encode(ApiKey.PRODUCE, {
                "transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": write_batch([(0, b"key", b"v" * 100)], int(time.time() * 1000))}]}]}),
            "commit": conn.encode(ApiKey.OFFSET_COMMIT, {
                "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                     "committed_metadata": None}]}]}),
        }
        checks = {"heartbeat": _answered_none(ApiKey.HEARTBEAT, lambda r: r.error_code),
                  "produce": _answered_none(ApiKey.PRODUCE, lambda r: r.responses[0].partition_responses[0].error_code),
                  "commit": _answered_none(ApiKey.OFFSET_COMMIT, lambda r: r.topics[0].partitions[0].error_code)}
        for name, frame in frames.items():
            timed(conn, frame, warmup, checks.get(name))
        taken: dict[str, list[float]] = {name: [] for name in frames}
        if gap_s:
            # Spaced out, the APIs take turns: the member's heartbeat then comes every four gaps,
            # within its session however long the run.
            for _ in range(samples):
                for name, frame in frames.items():
                    taken[name] += timed(conn, frame, 1, gap_s=gap_s)
        else:
            for name, frame in frames.items():
                taken[name] = timed(conn, frame, samples)
        figures: dict[str, float] = {}
        for name, got in taken.items():
            figures.update(quantiles(got, name))
        return figures
    finally:
        conn.close()
