"""Produce to __consumer_offsets and __share_group_state is answered per partition with Kafka's
INVALID_TOPIC_EXCEPTION (ReplicaManager.appendRecords: "Cannot append to internal topic"), the
other partitions of the request are served, and nothing reaches a partition leader (issue 10)."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import produce
from cluster.leadership import Leadership
from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TopicInfo
from cluster.partition import ProduceOutcome
from cluster.recordbatch import encode_records
from tests.unit.gateway.fakes import gateway, request, run


class RecordingPartitions:
    def __init__(self) -> None:
        self.produced: list[tuple[str, int]] = []

    async def produce(self, topic: str, partition: int, records: bytes, acks_all: bool = True, timeout_ms: int = 30_000) -> ProduceOutcome:
        self.produced.append((topic, partition))
        return ProduceOutcome(ErrorCode.none, 7, 0)


def _gw():
    topics = {
        CONSUMER_OFFSETS: TopicInfo(CONSUMER_OFFSETS, uuid.uuid4(), 3, True, {}),
        SHARE_GROUP_STATE: TopicInfo(SHARE_GROUP_STATE, uuid.uuid4(), 2, True, {}),
        "user": TopicInfo("user", uuid.uuid4(), 1, False, {}),
    }
    partitions = RecordingPartitions()
    return gateway(partitions=partitions, leadership=Leadership(1, "c", [], topics, {}, {})), partitions


def test_produce_to_internal_topics_is_invalid_topic_per_partition_and_the_rest_is_served():
    gw, partitions = _gw()
    batch = encode_records([(0, b"k", b"v")], 1_700_000_000_000)
    for version in (3, 9, 11):
        topic_data = [
            {"name": CONSUMER_OFFSETS, "partition_data": [{"index": 0, "records": batch}, {"index": 2, "records": batch}]},
            {"name": SHARE_GROUP_STATE, "partition_data": [{"index": 1, "records": batch}]},
            {"name": "user", "partition_data": [{"index": 0, "records": batch}]},
        ]
        response = run(
            produce.produce,
            gw,
            request(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": topic_data}),
        )
        answers = {
            (t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses
        }
        assert answers == {
            (CONSUMER_OFFSETS, 0): ErrorCode.invalid_topic_exception,
            (CONSUMER_OFFSETS, 2): ErrorCode.invalid_topic_exception,
            (SHARE_GROUP_STATE, 1): ErrorCode.invalid_topic_exception,
            ("user", 0): ErrorCode.none,
        }
    assert set(partitions.produced) == {("user", 0)}
