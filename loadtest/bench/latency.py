"""Unloaded round trips: one connection, one request at a time, each request's time from its last
byte sent to its answer's last byte read (issue 24: latency is a figure, not only throughput).

The client is a blocking socket with every request encoded once and only its correlation id
patched, so what it adds to a round trip is a send and a receive: a few microseconds against the
tens to thousands measured. It forms its own classic group (JoinGroup, SyncGroup) and then times
Heartbeat and OffsetCommit of that member, besides ApiVersions, Metadata and a Produce of one
100-byte record with acks=all (-1), which any broker answers without a group. Works against any
Kafka broker (raygroups, tansu).

Two figures take more than one fixed request:
- JoinGroup-to-Stable: the member joins its one-member group again (JoinGroup with its id, then
  SyncGroup), which rebalances it (Kafka rebalances a Stable group when its leader joins) into the
  next generation: both round trips are one sample.
- ShareFetch with acknowledgements: a share member on a connection of its own fetches one record
  at a time (max_records 1) from what the Produce samples wrote, each fetch accepting what the
  previous one acquired, as a ShareConsumer's steady state does. A broker that does not serve share
  groups (tansu 0.6, the responder) gets NaN, shown as failed.
"""

from __future__ import annotations

import base64
import io
import math
import socket
import struct
import time
import uuid
from collections.abc import Callable
from functools import partial
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
            ApiKey.HEARTBEAT: 4, ApiKey.OFFSET_COMMIT: 9, ApiKey.CREATE_TOPICS: 7, ApiKey.PRODUCE: 9,
            ApiKey.SHARE_GROUP_HEARTBEAT: 1, ApiKey.SHARE_FETCH: 1, ApiKey.FIND_COORDINATOR: 3}
SHARE_APIS = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_FETCH)
ACCEPT = 1  # AcknowledgeType.ACCEPT
QUANTILES = {"p50": 0.50, "p99": 0.99, "p999": 0.999}


def encode_request(api_key: int, version: int, body: dict[str, Any], client_id: str = "bench") -> bytearray:
    """A size-prefixed request with correlation id 0 (a sender patches it at byte 8)."""
    request = build(request_class(api_key, version), body)
    header_cls = RequestHeaderV2 if type(request).__flexible__ else RequestHeaderV1
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                              correlation_id=0, client_id=client_id))
    entity_writer(type(request))(buf, request)
    data = buf.getvalue()
    return bytearray(struct.pack(">i", len(data)) + data)


class Connection:
    """One blocking Kafka connection: encode once, send many."""

    def __init__(self, bootstrap: str, timeout: float = 30) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def encode(self, api_key: int, body: dict[str, Any]) -> bytearray:
        return encode_request(api_key, VERSIONS[ApiKey(api_key)], body)

    def send(self, frame: bytearray) -> bytes:
        """One round trip of an encoded request: the answer's payload (header included)."""
        self.correlation_id += 1
        struct.pack_into(">i", frame, 8, self.correlation_id)  # after size, api key and version
        self.sock.sendall(frame)
        size = struct.unpack(">i", self._recv(4))[0]
        return self._recv(size)

    def call(self, api_key: int, body: dict[str, Any]) -> Any:
        return self.decode(api_key, self.send(self.encode(api_key, body)))

    def decode(self, api_key: int, payload: bytes) -> Any:
        """The answer to the last request sent, `api_key`'s response."""
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


def round_trip(conn: Connection, frame: bytearray) -> float:
    """One encoded request's round trip, in microseconds."""
    start = time.perf_counter_ns()
    conn.send(frame)
    return (time.perf_counter_ns() - start) / 1000


def _answered_none(api_key: int, error_of: Any):
    """A check that the answer (decoded) carries no error: `error_of(response)` is its code."""
    cls = response_class(api_key, VERSIONS[ApiKey(api_key)])

    def check(payload: bytes) -> None:
        offset = entity_reader(cls.__header_schema__)(payload, 0)[1]
        code = error_of(entity_reader(cls)(payload, offset)[0])
        if code != ErrorCode.none:
            raise RuntimeError(f"the broker answered {ErrorCode(code).name} to {ApiKey(api_key).name}")
    return check


class GroupMember:
    """The one member of a classic group: its Heartbeat and OffsetCommit encoded once per generation,
    and JoinGroup-to-Stable as one timed sample."""

    def __init__(self, conn: Connection, group: str, topic: str) -> None:
        self.conn, self.group, self.topic = conn, group, topic
        self.member_id, self.generation = "", -1
        self._frames: dict[str, bytearray] = {}
        self._beat = time.monotonic()

    def join(self, timeout_s: float = 120) -> None:
        """Stable, as the only member. Joins again while the broker answers that the group is still
        rebalancing (tansu forms a group in tens of seconds)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            r = self.conn.call(ApiKey.JOIN_GROUP, self._join_body())
            if r.error_code == ErrorCode.member_id_required:
                self.member_id = r.member_id
                continue
            if r.error_code != ErrorCode.none:
                time.sleep(0.1)
                continue
            self.member_id = r.member_id
            if self.conn.call(ApiKey.SYNC_GROUP, self._sync_body(r)).error_code == ErrorCode.none:
                self._stable(r.generation_id)
                return
            time.sleep(0.1)
        raise RuntimeError(f"the group did not become Stable in {timeout_s:g} s")

    def rejoin(self) -> float:
        """One JoinGroup-to-Stable sample, in microseconds: JoinGroup with the member's id, SyncGroup
        with its assignment. The bodies are encoded before the clock starts; each answer is decoded
        after it stops (SyncGroup needs the generation JoinGroup answers)."""
        join = self.conn.encode(ApiKey.JOIN_GROUP, self._join_body())
        start = time.perf_counter_ns()
        payload = self.conn.send(join)
        joined_ns = time.perf_counter_ns() - start
        r = self.conn.decode(ApiKey.JOIN_GROUP, payload)
        if r.error_code != ErrorCode.none:
            raise RuntimeError(f"the broker answered {ErrorCode(r.error_code).name} to a Stable member's JoinGroup")
        sync = self.conn.encode(ApiKey.SYNC_GROUP, self._sync_body(r))
        start = time.perf_counter_ns()
        payload = self.conn.send(sync)
        synced_ns = time.perf_counter_ns() - start
        if (code := self.conn.decode(ApiKey.SYNC_GROUP, payload).error_code) != ErrorCode.none:
            raise RuntimeError(f"the broker answered {ErrorCode(code).name} to SyncGroup")
        self._stable(r.generation_id)
        return (joined_ns + synced_ns) / 1000

    def keep_alive(self) -> None:
        """An untimed Heartbeat when 3 s passed since the last: long runs of other APIs' samples
        must not outlast the member's session (30 s), or its commits would be answered errors."""
        if time.monotonic() - self._beat >= 3:
            _answered_none(ApiKey.HEARTBEAT, lambda r: r.error_code)(self.conn.send(self.frame("heartbeat")))
            self._beat = time.monotonic()

    def frame(self, name: str) -> bytearray:
        """The member's Heartbeat or OffsetCommit of offset 0, for its current generation."""
        return self._frames[name]

    def _stable(self, generation: int) -> None:
        if generation == self.generation:
            return
        self.generation = generation
        self._frames = {
            "heartbeat": self.conn.encode(ApiKey.HEARTBEAT, {"group_id": self.group, "generation_id": generation,
                                                             "member_id": self.member_id, "group_instance_id": None}),
            "commit": self.conn.encode(ApiKey.OFFSET_COMMIT, {
                "group_id": self.group, "generation_id_or_member_epoch": generation, "member_id": self.member_id,
                "group_instance_id": None, "topics": [{"name": self.topic, "partitions": [
                    {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                     "committed_metadata": None}]}]}),
        }

    def _join_body(self) -> dict[str, Any]:
        return {"group_id": self.group, "session_timeout": 30_000, "rebalance_timeout": 60_000,
                "member_id": self.member_id, "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": _subscription(self.topic)}], "reason": None}

    def _sync_body(self, joined: Any) -> dict[str, Any]:
        return {"group_id": self.group, "generation_id": joined.generation_id, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "consumer", "protocol_name": joined.protocol_name,
                "assignments": [{"member_id": self.member_id, "assignment": _assignment(self.topic)}]}


class ShareFetcher:
    """One share member fetching partition 0 of a topic a record at a time, each ShareFetch
    accepting what the previous one acquired (a ShareConsumer's steady state), on a connection of
    its own. Its heartbeat is sent untimed, between samples, when its interval is due."""

    def __init__(self, bootstrap: str, group: str, topic: str, topic_id: Any, fetch_from: str | None = None) -> None:
        """Heartbeats to `bootstrap` (the share group's coordinator), fetches from `fetch_from`
        (the partition's leader; the same broker when not given)."""
        self.conn = Connection(bootstrap)
        self.fetch_conn = Connection(fetch_from) if fetch_from is not None else self.conn
        self.group, self.topic, self.topic_id = group, topic, topic_id
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.member_epoch, self.interval_s, self.next_heartbeat = 0, 5.0, 0.0
        self.session_epoch = 0
        self.acquired: list[tuple[int, int]] = []  # (first, last) offsets the last fetch acquired

    def join(self, timeout_s: float = 60) -> None:
        """A member whose assignment holds the topic, then a share session opened on partition 0
        (which also initializes the share partition where the log ends: nothing produced yet)."""
        deadline = time.monotonic() + timeout_s
        while not self.heartbeat(subscribe=self.member_epoch == 0):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the share member got no assignment in {timeout_s:g} s")
            time.sleep(0.05)
        self._fetch(max_wait_ms=0)

    def heartbeat(self, subscribe: bool = False) -> bool:
        """ShareGroupHeartbeat; whether the member's assignment (as last answered) holds the topic."""
        r = self.conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, {
            "group_id": self.group, "member_id": self.member_id, "member_epoch": self.member_epoch, "rack_id": None,
            "subscribed_topic_names": [self.topic] if subscribe else None})
        if r.error_code != ErrorCode.none:
            raise RuntimeError(f"the broker answered {ErrorCode(r.error_code).name} to ShareGroupHeartbeat")
        self.member_epoch = r.member_epoch
        self.interval_s = r.heartbeat_interval.total_seconds() or 5.0
        self.next_heartbeat = time.monotonic() + self.interval_s
        return r.assignment is not None and any(tp.topic_id == self.topic_id for tp in r.assignment.topic_partitions)

    def keep_alive(self) -> None:
        """The member's heartbeat, untimed, when its interval is due."""
        if time.monotonic() >= self.next_heartbeat:
            self.heartbeat()

    def once(self) -> float:
        """One ShareFetch with the previous fetch's acknowledgements, in microseconds; it must
        acquire a record (the Produce samples wrote one for each)."""
        self.keep_alive()
        took = self._fetch(max_wait_ms=500)
        if not self.acquired:
            raise RuntimeError("a ShareFetch acquired no record: fewer records than samples")
        return took

    def _fetch(self, max_wait_ms: int) -> float:
        acks = [{"first_offset": first, "last_offset": last, "acknowledge_types": [ACCEPT]} for first, last in self.acquired]
        frame = self.fetch_conn.encode(ApiKey.SHARE_FETCH, {
            "group_id": self.group, "member_id": self.member_id, "share_session_epoch": self.session_epoch,
            "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 1, "batch_size": 1,
            "topics": [{"topic_id": self.topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}],
            "forgotten_topics_data": []})
        start = time.perf_counter_ns()
        payload = self.fetch_conn.send(frame)
        took = (time.perf_counter_ns() - start) / 1000
        r = self.fetch_conn.decode(ApiKey.SHARE_FETCH, payload)
        if r.error_code != ErrorCode.none:
            raise RuntimeError(f"the broker answered {ErrorCode(r.error_code).name} to ShareFetch")
        self.session_epoch += 1
        self.acquired = []
        for topic in r.responses:
            for p in topic.partitions:
                if p.error_code != ErrorCode.none or p.acknowledge_error_code != ErrorCode.none:
                    raise RuntimeError(f"ShareFetch partition {p.partition_index}: {ErrorCode(p.error_code).name}, "
                                       f"acknowledgement {ErrorCode(p.acknowledge_error_code).name}")
                self.acquired += [(a.first_offset, a.last_offset) for a in p.acquired_records]
        return took

    def close(self) -> None:
        self.conn.close()
        if self.fetch_conn is not self.conn:
            self.fetch_conn.close()


def _assignment(topic: str) -> bytes:
    """ConsumerProtocolAssignment v0: partition 0 of `topic`, user data null (tansu refuses an empty
    assignment: its SyncGroup answers REBALANCE_IN_PROGRESS to it)."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">iii", 1, 0, -1)


def _subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, [topics], user data (null)."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def coordinator_of(conn: Connection, group: str, timeout_s: float = 60) -> str:
    """The address of `group`'s coordinator, as FindCoordinator names it: requests are sent where a
    Kafka client sends them, so that a cluster of several nodes is timed as its clients see it (a
    request to another node's gateway crosses nodes once more inside the cluster)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = conn.call(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0})
        if r.error_code == ErrorCode.none:
            return f"{r.host}:{r.port}"
        if time.monotonic() > deadline:
            raise RuntimeError(f"FindCoordinator for {group} answered {ErrorCode(r.error_code).name}")
        time.sleep(0.1)


def leader_of(conn: Connection, topic: str, partition: int = 0, timeout_s: float = 60) -> str:
    """The address of the broker that leads `topic`-`partition`, as Metadata names it (as a Kafka
    producer and fetcher send to it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = conn.call(ApiKey.METADATA, {"topics": [{"topic_id": None, "name": topic}], "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in r.brokers}
        leaders = [p.leader_id for t in r.topics for p in t.partitions if p.partition_index == partition]
        if leaders and leaders[0] in brokers:
            return brokers[leaders[0]]
        if time.monotonic() > deadline:
            raise RuntimeError(f"no leader of {topic}-{partition} in Metadata within {timeout_s:g} s")
        time.sleep(0.1)


def serves_share_groups(conn: Connection) -> bool:
    """Whether ApiVersions lists ShareGroupHeartbeat and ShareFetch at the versions timed."""
    r = conn.call(ApiKey.API_VERSIONS, {"client_software_name": "bench", "client_software_version": "1"})
    served = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    return all(api in served and served[api][0] <= VERSIONS[api] <= served[api][1] for api in SHARE_APIS)


def unloaded_round_trips(bootstrap: str, samples: int = 2000, warmup: int = 200, gap_s: float = 0.0,
                         replication_factor: int = 1) -> dict[str, float]:
    """p50/p99/p999 of ApiVersions, Metadata (one topic), Heartbeat, Produce (acks=all), OffsetCommit,
    ShareFetch with acknowledgements and JoinGroup-to-Stable, one request (or sample) at a time on one
    connection (`gap_s` apart), after `warmup` untimed ones of each. JoinGroup-to-Stable comes last and
    takes a tenth of the samples (at least 20): a broker may take far longer to rebalance. The topic
    Produce and ShareFetch use is made with `replication_factor` (-1: the broker's default)."""
    stamp = time.monotonic_ns()
    topic, group = f"latency-{stamp}", f"latency-{stamp}"
    conn = Connection(bootstrap)
    fetcher: ShareFetcher | None = None
    group_conn = leader_conn = None
    try:
        created = conn.call(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": topic, "num_partitions": 1, "replication_factor": replication_factor, "assignments": [],
                        "configs": []}],
            "timeout": 30_000, "validate_only": False})
        if created.topics[0].error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            raise RuntimeError(f"CreateTopics answered {created.topics[0].error_code.name}")
        # Each request goes where a Kafka client sends it: group requests to the coordinator,
        # Produce and ShareFetch to the partition's leader, the share heartbeat to the share
        # group's coordinator (one broker, or one node's gateway, is all the same).
        group_conn = Connection(coordinator_of(conn, group))
        leader = leader_of(conn, topic)
        leader_conn = Connection(leader)
        member = GroupMember(group_conn, group, topic)
        member.join()
        metadata = conn.encode(ApiKey.METADATA, {"topics": [{"topic_id": None, "name": topic}],
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        if serves_share_groups(conn):
            topic_id = conn.decode(ApiKey.METADATA, conn.send(metadata)).topics[0].topic_id
            share_group = f"share-{group}"
            fetcher = ShareFetcher(coordinator_of(conn, share_group), share_group, topic, topic_id, fetch_from=leader)
            fetcher.join()
        produce = conn.encode(ApiKey.PRODUCE, {
            "transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": write_batch([(0, b"key", b"v" * 100)], int(time.time() * 1000))}]}]})
        probes: dict[str, Callable[[], float]] = {
            "api_versions": partial(round_trip, conn, conn.encode(ApiKey.API_VERSIONS, {
                "client_software_name": "bench", "client_software_version": "1"})),
            "metadata": partial(round_trip, conn, metadata),
            "heartbeat": lambda: round_trip(group_conn, member.frame("heartbeat")),
            "produce": partial(round_trip, leader_conn, produce),
            "commit": lambda: round_trip(group_conn, member.frame("commit")),
            **({"share_fetch": fetcher.once} if fetcher else {}),  # after produce: it fetches what that wrote
        }
        # The answers of requests timed without decoding are checked once, before any sample. The
        # check's Produce is one record more than the samples: ShareFetch's warm-up takes it.
        _answered_none(ApiKey.HEARTBEAT, lambda r: r.error_code)(group_conn.send(member.frame("heartbeat")))
        _answered_none(ApiKey.OFFSET_COMMIT, lambda r: r.topics[0].partitions[0].error_code)(
            group_conn.send(member.frame("commit")))
        _answered_none(ApiKey.PRODUCE, lambda r: r.responses[0].partition_responses[0].error_code)(leader_conn.send(produce))
        taken: dict[str, list[float]] = {name: [] for name in probes}

        def sample(probe: Callable[[], float]) -> float:
            took = probe()
            member.keep_alive()  # untimed, between samples: sessions outlive any run
            if fetcher is not None:
                fetcher.keep_alive()
            return took

        if gap_s:
            for name, probe in probes.items():
                for _ in range(warmup):
                    sample(probe)
            # Spaced out, the APIs take turns.
            for _ in range(samples):
                for name, probe in probes.items():
                    time.sleep(gap_s)
                    taken[name].append(sample(probe))
        else:
            # Each API's warm-up right before its samples: the record the last ShareFetch warm-up
            # acquired is accepted by the first sample, well within its acquisition lock (30 s).
            for name, probe in probes.items():
                for _ in range(warmup):
                    sample(probe)
                taken[name] = [sample(probe) for _ in range(samples)]
        figures: dict[str, float] = {}
        for name, got in taken.items():
            figures.update(quantiles(got, name))
        if fetcher is None:
            figures.update({f"share_fetch_{q}_ms": math.nan for q in QUANTILES})
        figures.update(join_to_stable(bootstrap, f"join-{group}", topic, max(20, samples // 10), max(2, warmup // 10), gap_s))
        return figures
    finally:
        if fetcher is not None:
            fetcher.close()
        for c in (conn, group_conn, leader_conn):
            if c is not None:
                c.close()


def join_to_stable(bootstrap: str, group: str, topic: str, samples: int, warmup: int, gap_s: float,
                   timeout_s: float = 10) -> dict[str, float]:
    """JoinGroup-to-Stable of a one-member group's member joining again, on a connection and in a
    group of its own, after every other figure. A broker that does not answer within `timeout_s`
    (tansu 0.6 holds a Stable leader's JoinGroup for over a minute) gets NaN, shown as failed."""
    first = Connection(bootstrap)
    try:
        conn = Connection(coordinator_of(first, group))
    finally:
        first.close()
    try:
        member = GroupMember(conn, group, topic)
        member.join()
        conn.sock.settimeout(timeout_s)
        try:
            for _ in range(warmup):
                member.rejoin()
            taken = []
            for _ in range(samples):
                time.sleep(gap_s)
                taken.append(member.rejoin())
        except TimeoutError:
            return {f"join_{q}_ms": math.nan for q in QUANTILES}
        return quantiles(taken, "join")
    finally:
        conn.close()
