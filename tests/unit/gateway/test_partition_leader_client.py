"""PartitionLeaderClient and the Produce handler without Ray."""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from cluster.calls import Endpoint, ListOffsetsItem, LogEnd, ProduceItem
from cluster.clients.partition_leader import PartitionLeaderClient
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import produce
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo
from cluster.partition import ProduceOutcome
from cluster.clients.routing import NoLeader

from tests.unit.gateway.fakes import gateway, request, run


class FakeRouter:
    def __init__(self, answer) -> None:
        self.answer = answer
        self.items: list[tuple] = []

    async def call_leader(self, topic, partition, method, make_item, not_leader):
        item = make_item(9)
        self.items.append((method, item))
        return self.answer(method, item)


def test_produce_sends_the_records_with_the_routed_epoch():
    router = FakeRouter(lambda method, item: ProduceOutcome(ErrorCode.none, base_offset=12))
    outcome = asyncio.run(PartitionLeaderClient(router).produce("t", 1, b"batch"))
    assert outcome.base_offset == 12 and router.items == [(Endpoint.PRODUCE, ProduceItem("t", 1, 9, b"batch"))]


def test_no_leader_answers_not_leader_or_follower():
    async def no_leader(*_):
        raise NoLeader("no leader for t-1")

    router = FakeRouter(None)
    router.call_leader = no_leader
    client = PartitionLeaderClient(router)
    assert asyncio.run(client.produce("t", 1, b"")).error_code == ErrorCode.not_leader_or_follower
    assert asyncio.run(client.list_offsets("t", 1)) == LogEnd(ErrorCode.not_leader_or_follower)


def test_list_offsets_answers_a_log_end():
    router = FakeRouter(lambda method, item: LogEnd(ErrorCode.none, 41, -1, 2))
    assert asyncio.run(PartitionLeaderClient(router).list_offsets("t", 0)) == LogEnd(ErrorCode.none, 41, -1, 2)
    assert router.items == [(Endpoint.LIST_OFFSETS, ListOffsetsItem("t", 0, 9, -1, -1))]


class FakePartitions:
    def __init__(self) -> None:
        self.produced: list[tuple] = []

    async def produce(self, topic, partition, records, acks_all=True, timeout_ms=30_000):
        self.produced.append((topic, partition, records))
        return ProduceOutcome(ErrorCode.none, base_offset=len(self.produced))


def _gateway(partitions):
    user = TopicInfo("t", uuid.uuid4(), 2, False, {})
    internal = TopicInfo("__consumer_offsets", uuid.uuid4(), 50, True, {})
    return gateway(partitions=partitions, leadership=Leadership(1, "c", [], {"t": user, internal.name: internal}, {}, {}))


def _produce(acks, topic="t", partitions=(0,)):
    return request(ApiKey.PRODUCE, 11, {"acks": acks, "timeout": 1000, "transactional_id": None, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": None} for p in partitions]}]})


def test_produce_handler_answers_bad_requests_itself_and_sends_the_rest():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    response = run(produce.produce, gw, _produce(1, partitions=(0, 5)))
    parts = response.responses[0].partition_responses
    assert [(p.index, p.error_code) for p in parts] == [(0, ErrorCode.none), (5, ErrorCode.unknown_topic_or_partition)]
    internal = run(produce.produce, gw, _produce(1, topic="__consumer_offsets"))
    assert internal.responses[0].partition_responses[0].error_code == ErrorCode.invalid_topic_exception
    bad_acks = run(produce.produce, gw, _produce(2))
    assert bad_acks.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks
    assert partitions.produced == [("t", 0, b"")]


def test_produce_with_acks_0_gets_no_answer():
    partitions = FakePartitions()
    assert run(produce.produce, _gateway(partitions), _produce(0)) is None and len(partitions.produced) == 1
