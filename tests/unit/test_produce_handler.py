"""The Produce handler's answer, built from per-version templates, is byte for byte what the generic
dict builder makes, at every version, for accepted, rejected and leader-failed partitions."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import encode_response
from cluster.gateway.handlers import produce
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo
from cluster.partition import ProduceOutcome
from cluster.recordbatch import encode_records
from tests.unit.gateway.fakes import gateway, request, run

BATCH = encode_records([(0, b"k", b"v")], 1_700_000_000_000)


class Partitions:
    """Partition 1 of "a" fails at its leader; everything else is appended at 40 + partition."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, int, bytes]] = []
        self.acks: list[tuple[bool, int]] = []

    async def produce(self, topic: str, partition: int, records: bytes, acks_all: bool = True, timeout_ms: int = 30_000) -> ProduceOutcome:
        self.produced.append((topic, partition, records))
        self.acks.append((acks_all, timeout_ms))
        if (topic, partition) == ("a", 1):
            return ProduceOutcome(ErrorCode.kafka_storage_error, message="write failed: disk full")
        return ProduceOutcome(ErrorCode.none, 40 + partition, 3)


def _gw():
    topics = {name: TopicInfo(name, uuid.uuid4(), 2, False, {}) for name in ("a", "b")}
    partitions = Partitions()
    return gateway(partitions=partitions, leadership=Leadership(1, "c", [], topics, {}, {})), partitions


def test_v13_names_topics_by_id_both_ways_and_an_unknown_id_is_answered_here():
    gw, partitions = _gw()
    a, b, unknown = gw.leadership.topics["a"].topic_id, gw.leadership.topics["b"].topic_id, uuid.UUID(int=7)
    body = {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [
        {"topic_id": a, "partition_data": [{"index": 0, "records": BATCH}, {"index": 7, "records": BATCH}]},
        {"topic_id": b, "partition_data": [{"index": 1, "records": BATCH}]},
        {"topic_id": unknown, "partition_data": [{"index": 0, "records": BATCH}]},
    ]}
    response = run(produce.produce, gw, request(ApiKey.PRODUCE, 13, body))
    assert [(t.topic_id, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses]) for t in response.responses] == [
        (a, [(0, ErrorCode.none, 40), (7, ErrorCode.unknown_topic_or_partition, -1)]),
        (b, [(1, ErrorCode.none, 41)]),
        (unknown, [(0, ErrorCode.unknown_topic_id, -1)]),
    ]
    assert [(t, p) for t, p, _ in partitions.produced] == [("a", 0), ("b", 1)]  # by name to the leaders


def _generic(version: int, answers: list[tuple[str, int, ProduceOutcome]]):
    by_topic: dict[str, list[dict]] = {}
    for topic, partition, o in answers:
        by_topic.setdefault(topic, []).append({
            "index": partition, "error_code": o.error_code, "base_offset": o.base_offset,
            "log_start_offset": o.log_start_offset, "error_message": o.message, "record_errors": [],
        })
    return build_response(ApiKey.PRODUCE, version, {
        "responses": [{"name": t, "partition_responses": parts} for t, parts in by_topic.items()]
    })


def _body(acks: int = -1, transactional_id: str | None = None) -> dict:
    return {"transactional_id": transactional_id, "acks": acks, "timeout": 1000, "topic_data": [
        {"name": "a", "partition_data": [{"index": 0, "records": BATCH}, {"index": 1, "records": BATCH},
                                         {"index": 7, "records": BATCH}]},
        {"name": "b", "partition_data": [{"index": 1, "records": BATCH}]},
        {"name": "nope", "partition_data": [{"index": 0, "records": BATCH}]},
    ]}


@pytest.mark.parametrize("version", range(3, 13))  # v13 names topics by id: below
def test_the_answer_is_what_the_generic_builder_makes(version):
    gw, partitions = _gw()
    req = request(ApiKey.PRODUCE, version, _body())
    response = run(produce.produce, gw, req)
    expected = _generic(version, [
        ("a", 0, ProduceOutcome(ErrorCode.none, 40, 3)),
        ("a", 1, ProduceOutcome(ErrorCode.kafka_storage_error)),  # the leader's text is the log's, not the client's
        ("a", 7, ProduceOutcome(ErrorCode.unknown_topic_or_partition, message="unknown partition a-7")),
        ("b", 1, ProduceOutcome(ErrorCode.none, 41, 3)),
        ("nope", 0, ProduceOutcome(ErrorCode.unknown_topic_or_partition, message="unknown partition nope-0")),
    ])
    assert response == expected
    assert encode_response(req, response) == encode_response(req, expected)
    assert [(t, p) for t, p, _ in partitions.produced] == [("a", 0), ("a", 1), ("b", 1)]
    assert all(records == BATCH for _, _, records in partitions.produced)


@pytest.mark.parametrize(("body", "error"), [
    (_body(acks=2), ErrorCode.invalid_required_acks),
    (_body(transactional_id="tx"), ErrorCode.invalid_request),
])
def test_a_request_level_error_answers_every_partition_and_produces_nothing(body, error):
    gw, partitions = _gw()
    response = run(produce.produce, gw, request(ApiKey.PRODUCE, 9, body))
    assert [p.error_code for t in response.responses for p in t.partition_responses] == [error] * 5
    assert partitions.produced == []


def test_acks_0_produces_and_answers_nothing():
    gw, partitions = _gw()
    assert run(produce.produce, gw, request(ApiKey.PRODUCE, 9, _body(acks=0))) is None
    assert len(partitions.produced) == 3


@pytest.mark.parametrize("acks,acks_all", [(-1, True), (1, False), (0, False)])
def test_the_leader_is_told_whether_the_in_sync_replicas_must_hold_the_write_and_for_how_long(acks, acks_all):
    """A replicated partition answers acks=-1 once its in-sync replicas hold the write, within the
    request's timeout (cluster/replicated_partition.py); acks=1 and 0 do not wait for them."""
    gw, partitions = _gw()
    run(produce.produce, gw, request(ApiKey.PRODUCE, 9, _body(acks=acks)))
    assert partitions.acks == [(acks_all, 1000)] * 3
