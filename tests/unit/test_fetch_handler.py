"""The Fetch and ListOffsets handlers with a fake PartitionLeaderClient: what they ask of it and
how its answers come back as Kafka responses (the long polls themselves: test_clients_partition_leader)."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from cluster.calls import FetchPartition, LogEnd
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import fetch
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo
from cluster.partition import FetchOutcome

from tests.unit.gateway.fakes import gateway, request, run

TOPIC = TopicInfo("t", uuid.uuid4(), 2, False, {})


class FakePartitions:
    """Fetch answers each partition from `answers` ((topic, partition) -> outcome)."""

    def __init__(self, answers: dict | None = None) -> None:
        self.answers = answers or {}
        self.fetches: list[tuple] = []
        self.list_offsets_calls: list[tuple] = []

    async def fetch(self, parts, max_wait_ms, min_bytes, max_bytes):
        self.fetches.append((list(parts), max_wait_ms, min_bytes, max_bytes))
        return [self.answers.get((p.topic, p.partition), FetchOutcome(ErrorCode.none, 5, 0, b"")) for p in parts]

    async def list_offsets(self, topic, partition, timestamp=-1, client_epoch=-1):
        self.list_offsets_calls.append((topic, partition, timestamp, client_epoch))
        if partition == 1:
            return LogEnd(ErrorCode.not_leader_or_follower)
        return LogEnd(ErrorCode.none, 42, -1, 3)


def _gateway(partitions: FakePartitions):
    return gateway(partitions=partitions, leadership=Leadership(1, "c", [], {"t": TOPIC}, {}, {}))


def _fetch(version: int, topics: list[dict], min_bytes: int = 1) -> object:
    return request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait": 500, "min_bytes": min_bytes, "max_bytes": 1 << 20, "topics": topics})


def _partition(p: int, offset: int = 0, epoch: int = -1) -> dict:
    return {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1000, "current_leader_epoch": epoch}


def test_fetch_sends_the_known_partitions_in_one_call_and_answers_the_rest_itself():
    partitions = FakePartitions({("t", 1): FetchOutcome(ErrorCode.none, 9, 2, b"records")})
    response = run(fetch.fetch, _gateway(partitions), _fetch(12, [
        {"topic": "t", "partitions": [_partition(1, 7, 4), _partition(5), _partition(0)]},
        {"topic": "unknown", "partitions": [_partition(0)]},
    ], min_bytes=64))
    assert partitions.fetches == [(
        [FetchPartition("t", 1, 7, 1000, 4), FetchPartition("t", 0, 0, 1000, -1)], 500, 64, 1 << 20)]
    by_topic = {r.topic: [(p.partition_index, p.error_code, p.high_watermark, p.records) for p in r.partitions]
                for r in response.responses}
    assert by_topic == {
        "t": [(1, ErrorCode.none, 9, b"records"), (5, ErrorCode.unknown_topic_or_partition, -1, b""),
              (0, ErrorCode.none, 5, b"")],
        "unknown": [(0, ErrorCode.unknown_topic_or_partition, -1, b"")],
    }
    assert response.session_id == 0


def test_fetch_by_topic_id_answers_an_unknown_id_and_passes_a_leaders_retriable_error():
    partitions = FakePartitions({("t", 0): FetchOutcome(ErrorCode.not_leader_or_follower)})
    stranger = uuid.uuid4()
    response = run(fetch.fetch, _gateway(partitions), _fetch(13, [
        {"topic_id": TOPIC.topic_id, "partitions": [_partition(0)]},
        {"topic_id": stranger, "partitions": [_partition(0)]},
    ]))
    codes = {r.topic_id: [p.error_code for p in r.partitions] for r in response.responses}
    assert codes == {TOPIC.topic_id: [ErrorCode.not_leader_or_follower], stranger: [ErrorCode.unknown_topic_id]}


def test_fetch_of_only_unknown_partitions_asks_no_leader():
    partitions = FakePartitions()
    run(fetch.fetch, _gateway(partitions), _fetch(12, [{"topic": "t", "partitions": [_partition(2)]}]))
    assert partitions.fetches == []


def test_list_offsets_asks_each_known_partition_and_translates_the_log_end():
    partitions = FakePartitions()
    response = run(fetch.list_offsets, _gateway(partitions), request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": p, "timestamp": -1, "current_leader_epoch": 3} for p in (0, 1, 2)]}]}))
    assert partitions.list_offsets_calls == [("t", 0, -1, 3), ("t", 1, -1, 3)]
    assert [(p.partition_index, p.error_code, p.offset, p.leader_epoch) for p in response.topics[0].partitions] == [
        (0, ErrorCode.none, 42, 3), (1, ErrorCode.not_leader_or_follower, -1, -1),
        (2, ErrorCode.unknown_topic_or_partition, -1, -1)]
