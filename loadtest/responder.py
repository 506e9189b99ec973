"""A do-nothing Kafka-protocol responder: the baseline every benchmark divides by.

It speaks the same protocol through the same sans-I/O connection and kio types as a gateway,
in its own process, but stores nothing and calls nobody: Produce is acknowledged and dropped,
Fetch hands back one canned batch re-stamped at the requested offset until the consumer has
seen as many records as were produced. What a client achieves against it is the limit of the
client, the protocol code and this machine; the ratio raygroups/responder is what our actors,
Ray calls and logs cost.

Classic groups: by default every member leads a group of its own (it assigns, and commits, every
partition); with --group-size N each follows and is handed its place's range share, as in a real
group of N, so that a load client does the same work against it as against raygroups.

    python -m loadtest.responder --port 0 [--group-size 10]     # prints READY host:port
"""

from __future__ import annotations

import argparse
import asyncio
import re
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import SUPPORTED, ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request, unsupported_api_versions_response
from cluster.gateway.server import serve
from cluster.recordbatch import assign_offset, encode_records, parse_header
from coordinator.consumer.protocol import decode_subscription, encode_assignment

CANNED_RECORDS = 100
ABSENT_LEADER = "responder-leader"  # the leader of every group of --group-size: no member is it


class Responder:
    def __init__(self, host: str, port: int, partitions: int, group_size: int = 0) -> None:
        self.host = host
        self.port = port
        self.partitions = partitions
        # 0: every classic member leads a group of its own (it assigns, and so commits, every
        # partition). N: every member follows a leader that never comes, and SyncGroup hands it
        # what a range assignment over a group of N gives its place in the group: a client then
        # does a group member's work, as against a real coordinator (locust-capacity).
        self.group_size = group_size
        self._joined: dict[str, int] = {}  # group -> members joined so far (their places: mod group_size)
        self._members: dict[str, tuple[int, tuple[str, ...], int]] = {}  # member id -> place, topics, version
        self.topics: dict[str, uuid.UUID] = {}
        self.end_offsets: dict[tuple[str, int], int] = {}
        self.next_producer_id = 0
        self.canned = encode_records([(i, b"key-%06d" % i, b"v" * 100) for i in range(CANNED_RECORDS)], 1_700_000_000_000)
        self.handlers = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: lambda r: build_response(ApiKey.HEARTBEAT, r.api_version, {"error_code": ErrorCode.none}),
            ApiKey.LEAVE_GROUP: lambda r: build_response(ApiKey.LEAVE_GROUP, r.api_version, {"error_code": ErrorCode.none}),
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.consumer_group_heartbeat,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
        }

    def topic_id(self, name: str) -> uuid.UUID:
        return self.topics.setdefault(name, uuid.uuid4())

    def dispatch(self, request: Request) -> Any:
        if request.unsupported_api_versions:
            return unsupported_api_versions_response({k: SUPPORTED[k] for k in self.handlers})
        handler = self.handlers.get(request.api_key)
        if handler is None:
            raise RuntimeError(f"the responder does not answer api {request.api_key}")
        return handler(request)

    def api_versions(self, request: Request) -> Any:
        """Only the APIs it answers, at the gateway's versions: a client (or the latency bench) that
        asks what it serves is not told of share groups it would then refuse."""
        return build_response(ApiKey.API_VERSIONS, request.api_version, {"error_code": ErrorCode.none, "api_keys": [
            {"api_key": int(k), "min_version": SUPPORTED[k][0], "max_version": SUPPORTED[k][1]}
            for k in sorted(self.handlers)]})

    def _topic(self, name: str) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "name": name,
            "topic_id": self.topic_id(name),
            "partitions": [
                {"error_code": ErrorCode.none, "partition_index": p, "leader_id": 0, "leader_epoch": 0,
                 "replica_nodes": [0], "isr_nodes": [0]}
                for p in range(self.partitions)
            ],
        }

    def metadata(self, request: Request) -> Any:
        by_id = {v: k for k, v in self.topics.items()}
        names = sorted(self.topics) if request.body.topics is None else \
            [t.name if t.name else by_id.get(getattr(t, "topic_id", None)) for t in request.body.topics]
        return build_response(
            ApiKey.METADATA,
            request.api_version,
            {
                "brokers": [{"node_id": 0, "host": self.host, "port": self.port}],
                "cluster_id": "responder",
                "controller_id": 0,
                "topics": [self._topic(n) for n in names if n],
            },
        )

    def find_coordinator(self, request: Request) -> Any:
        me = {"node_id": 0, "host": self.host, "port": self.port, "error_code": ErrorCode.none, "error_message": None}
        if request.api_version >= 4:
            return build_response(ApiKey.FIND_COORDINATOR, request.api_version,
                                  {"coordinators": [{"key": k, **me} for k in request.body.coordinator_keys]})
        return build_response(ApiKey.FIND_COORDINATOR, request.api_version, me)

    # Group APIs: every member is answered at once as the sole member and leader of generation 1,
    # the cheapest answer a client can act on; nothing is stored.

    def join_group(self, request: Request) -> Any:
        b = request.body
        member_id = b.member_id or f"{request.client_id}-{id(b)}"
        protocol = b.protocols[0]
        if self.group_size > 0:
            if member_id not in self._members:
                place = self._joined.get(b.group_id, 0)
                self._joined[b.group_id] = place + 1
                sub = decode_subscription(protocol.metadata)
                self._members[member_id] = (place % self.group_size, tuple(sub.topics), sub.version)
            return build_response(ApiKey.JOIN_GROUP, request.api_version, {
                "error_code": ErrorCode.none, "generation_id": 1, "protocol_type": b.protocol_type,
                "protocol_name": protocol.name, "leader": ABSENT_LEADER, "member_id": member_id, "members": [],
            })
        return build_response(ApiKey.JOIN_GROUP, request.api_version, {
            "error_code": ErrorCode.none, "generation_id": 1, "protocol_type": b.protocol_type,
            "protocol_name": protocol.name, "leader": member_id, "member_id": member_id,
            "members": [{"member_id": member_id, "metadata": protocol.metadata}],
        })

    def sync_group(self, request: Request) -> Any:
        b = request.body
        if self.group_size > 0 and b.member_id in self._members:
            place, topics, version = self._members[b.member_id]
            mine = encode_assignment({t: [p for p in range(self.partitions) if p * self.group_size // self.partitions == place]
                                      for t in topics}, version)
        else:
            mine = next((a.assignment for a in b.assignments if a.member_id == b.member_id), b"")
        return build_response(ApiKey.SYNC_GROUP, request.api_version, {
            "error_code": ErrorCode.none, "protocol_type": b.protocol_type, "protocol_name": b.protocol_name,
            "assignment": mine,
        })

    def consumer_group_heartbeat(self, request: Request) -> Any:
        """KIP-848 the same way: a join (epoch 0) makes the member the sole member at epoch 1, owning
        every partition of the topics it names or its regex matches; later heartbeats keep it there
        (no assignment: nothing changed); a leave (-1, -2) is answered with its epoch."""
        b = request.body
        if b.member_epoch < 0:
            return build_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, request.api_version, {
                "error_code": ErrorCode.none, "member_id": b.member_id, "member_epoch": b.member_epoch,
                "heartbeat_interval": 5_000})
        assignment = None
        if b.member_epoch == 0:
            regex = getattr(b, "subscribed_topic_regex", None)
            names = [t for t in self.topics if regex and re.fullmatch(regex, t)] if regex else b.subscribed_topic_names or ()
            assignment = {"topic_partitions": [{"topic_id": self.topic_id(t), "partitions": list(range(self.partitions))}
                                               for t in sorted(names)]}
        return build_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, request.api_version, {
            "error_code": ErrorCode.none, "member_id": b.member_id, "member_epoch": 1, "heartbeat_interval": 5_000,
            "assignment": assignment})

    def init_producer_id(self, request: Request) -> Any:
        self.next_producer_id += 1
        return build_response(ApiKey.INIT_PRODUCER_ID, request.api_version,
                              {"error_code": ErrorCode.none, "producer_id": self.next_producer_id, "producer_epoch": 0})

    def offset_commit(self, request: Request) -> Any:
        return build_response(ApiKey.OFFSET_COMMIT, request.api_version, {"topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": ErrorCode.none}
                                            for p in t.partitions]} for t in request.body.topics
        ]})

    def offset_fetch(self, request: Request) -> Any:
        """Nothing is ever committed here: every partition asked about has no committed offset."""
        def topics(requested: Any) -> list[dict[str, Any]]:
            return [{"name": t.name, "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "",
                                                     "error_code": ErrorCode.none} for p in t.partition_indexes]}
                    for t in requested or ()]

        if request.api_version >= 8:
            return build_response(ApiKey.OFFSET_FETCH, request.api_version, {"groups": [
                {"group_id": g.group_id, "topics": topics(g.topics), "error_code": ErrorCode.none}
                for g in request.body.groups]})
        return build_response(ApiKey.OFFSET_FETCH, request.api_version,
                              {"topics": topics(request.body.topics), "error_code": ErrorCode.none})

    def create_topics(self, request: Request) -> Any:
        for t in request.body.topics:
            self.topic_id(t.name)
        return build_response(
            ApiKey.CREATE_TOPICS,
            request.api_version,
            {"topics": [{"name": t.name, "topic_id": self.topic_id(t.name), "error_code": ErrorCode.none,
                         "num_partitions": self.partitions, "replication_factor": 1} for t in request.body.topics]},
        )

    def produce(self, request: Request) -> Any:
        responses = []
        for t in request.body.topic_data:
            parts = []
            for p in t.partition_data:
                header = parse_header(p.records or b"")
                key = (t.name, p.index)
                base = self.end_offsets.get(key, 0)
                self.end_offsets[key] = base + header.last_offset_delta + 1
                parts.append({"index": p.index, "error_code": ErrorCode.none, "base_offset": base, "record_errors": []})
            responses.append({"name": t.name, "partition_responses": parts})
        if request.body.acks == 0:
            return None
        return build_response(ApiKey.PRODUCE, request.api_version, {"responses": responses})

    def fetch(self, request: Request) -> Any:
        by_id = {v: k for k, v in self.topics.items()}
        responses = []
        for t in request.body.topics:
            name = by_id.get(t.topic_id) if request.api_version >= 13 else t.topic
            parts = []
            for p in t.partitions:
                end = self.end_offsets.get((name, p.partition), 0)
                records = b""
                if p.fetch_offset + CANNED_RECORDS <= end:
                    batch = bytearray(self.canned)
                    assign_offset(batch, p.fetch_offset, 0)
                    records = bytes(batch)
                parts.append({"partition_index": p.partition, "error_code": ErrorCode.none, "high_watermark": end,
                              "last_stable_offset": end, "log_start_offset": 0, "aborted_transactions": None,
                              "preferred_read_replica": -1, "records": records})
            responses.append({"topic": t.topic_id if request.api_version >= 13 else t.topic, "topic_id": t.topic_id
                              if request.api_version >= 13 else None, "partitions": parts})
        return build_response(ApiKey.FETCH, request.api_version, {"error_code": ErrorCode.none, "session_id": 0,
                                                                 "responses": responses})

    def list_offsets(self, request: Request) -> Any:
        topics = []
        for t in request.body.topics:
            parts = []
            for p in t.partitions:
                end = self.end_offsets.get((t.name, p.partition_index), 0)
                offset = 0 if p.timestamp == -2 else end
                parts.append({"partition_index": p.partition_index, "error_code": ErrorCode.none, "offset": offset,
                              "timestamp": -1, "leader_epoch": 0})
            topics.append({"name": t.name, "partitions": parts})
        return build_response(ApiKey.LIST_OFFSETS, request.api_version, {"topics": topics})


async def main(host: str, port: int, partitions: int, group_size: int) -> None:
    responder = Responder(host, port, partitions, group_size)
    server, _ = await serve(responder.dispatch, host, port, 104_857_600)
    responder.port = server.sockets[0].getsockname()[1]
    print(f"READY {host}:{responder.port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--group-size", type=int, default=0,
                        help="classic members follow a leader that never comes and get a range share of a group this size "
                             "(0: each leads a group of its own)")
    args = parser.parse_args()
    import uvloop

    uvloop.run(main(args.host, args.port, args.partitions, args.group_size))
