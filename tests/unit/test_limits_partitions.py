"""Partition bombs (issue 10): a partition count a client chooses is checked against
raygroups.max.partitions.per.topic and raygroups.max.partitions before anything is allocated,
validate_only too, and answered POLICY_VIOLATION per topic (Kafka's answer to an operation too
large for its controller). The domain checks them, and so does the gateway, at once."""

from __future__ import annotations

import time
import uuid

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import meta, topics
from cluster.leadership import Leadership
from cluster.metadata import ClusterMetadata, PartitionLimits, TopicInfo, TopicOutcome, TopicSpec

from tests.unit.gateway.fakes import gateway, request, run

BOMB = 2_147_483_647
LIMITS = PartitionLimits(per_topic=100, cluster=250)


def meta_with(**partitions: int) -> ClusterMetadata:
    meta = ClusterMetadata()
    outcomes = meta.create_topics([TopicSpec(n, p) for n, p in partitions.items()])
    for record in outcomes.records:
        meta.replay(record)
    return meta


def test_a_topic_over_the_per_topic_limit_is_refused_before_any_record_is_made():
    meta = ClusterMetadata()
    started = time.monotonic()
    for validate_only in (False, True):
        result = meta.create_topics([TopicSpec("bomb", BOMB), TopicSpec("fine", 100)], validate_only, limits=LIMITS)
        codes = [(o.name, o.error_code) for o in result.response]
        assert codes == [("bomb", ErrorCode.policy_violation), ("fine", ErrorCode.none)]
        assert "raygroups.max.partitions.per.topic" in result.response[0].message
        assert len(result.records) == (0 if validate_only else 101)
    assert time.monotonic() - started < 1


def test_the_cluster_limit_counts_existing_topics_and_the_earlier_topics_of_the_request():
    meta = meta_with(a=100, b=100)
    result = meta.create_topics([TopicSpec("c", 40), TopicSpec("d", 20), TopicSpec("e", 10)], limits=LIMITS)
    assert [o.error_code for o in result.response] == [ErrorCode.none, ErrorCode.policy_violation, ErrorCode.none]
    assert "raygroups.max.partitions" in result.response[1].message


def test_create_partitions_beyond_either_limit_is_refused():
    meta = meta_with(a=100, b=10)
    for total in (BOMB, 101):
        for validate_only in (False, True):
            result = meta.create_partitions("b", total, validate_only, limits=LIMITS)
            assert result.response.error_code == ErrorCode.policy_violation and result.records == []
    assert meta.create_partitions("b", 100, limits=LIMITS).response.error_code == ErrorCode.none
    meta = meta_with(a=100, b=100, c=40)
    assert meta.create_partitions("c", 51, limits=LIMITS).response.error_code == ErrorCode.policy_violation
    assert meta.create_partitions("c", 50, limits=LIMITS).response.error_code == ErrorCode.none


def test_without_limits_the_controller_path_is_unchanged():
    meta = ClusterMetadata()
    assert meta.create_topics([TopicSpec("t", 20_001)], validate_only=True).response[0].error_code == ErrorCode.none


def test_a_replication_factor_of_zero_or_below_minus_one_is_invalid_as_in_kafka():
    meta = ClusterMetadata()
    for factor in (0, -2, -32768):
        outcome = meta.create_topics([TopicSpec("t", 1, factor)]).response[0]
        assert outcome.error_code == ErrorCode.invalid_replication_factor
    assert meta.create_topics([TopicSpec("t", 1, -1)]).response[0].error_code == ErrorCode.none


# -- the gateway answers bombs itself, at once --------------------------------------------------------


class FakeController:
    def __init__(self) -> None:
        self.created: list[tuple[list[str], bool]] = []
        self.grown: list[tuple[str, int]] = []

    async def create_topics(self, specs, validate_only=False):
        self.created.append(([s.name for s in specs], validate_only))
        return [TopicOutcome(s.name, ErrorCode.none, None, uuid.uuid4(), s.partitions) for s in specs]

    async def delete_topics(self, names):
        return [TopicOutcome(n, ErrorCode.none) for n in names]

    async def create_partitions(self, name, total, validate_only=False):
        self.grown.append((name, total))
        return TopicOutcome(name, ErrorCode.none, None, None, total)


def _gateway(controller: FakeController, **existing: int):
    known = {n: TopicInfo(n, uuid.uuid4(), p, False, {}) for n, p in existing.items()}
    gw = gateway(leadership=Leadership(1, "c", [], known, {}, {}), **{
        "num.partitions": 1, "raygroups.max.partitions.per.topic": 100, "raygroups.max.partitions": 250})
    gw.controller = controller
    return gw


def _create(topics_: list[tuple[str, int]], validate_only: bool = False):
    return request(ApiKey.CREATE_TOPICS, 7, {
        "timeout_ms": 1000, "validate_only": validate_only,
        "topics": [{"name": n, "num_partitions": p, "replication_factor": -1, "assignments": [], "configs": []}
                   for n, p in topics_]})


def test_create_topics_bombs_are_answered_by_the_gateway_without_asking_the_controller():
    for validate_only in (False, True):
        controller = FakeController()
        response = run(topics.create_topics, _gateway(controller, a=200),
                       _create([("bomb", BOMB), ("fine", 10), ("late", 45)], validate_only))
        assert [(t.name, t.error_code) for t in response.topics] == [
            ("bomb", ErrorCode.policy_violation), ("fine", ErrorCode.none), ("late", ErrorCode.policy_violation)]
        assert controller.created == [(["fine"], validate_only)]


def test_create_topics_all_refused_never_reaches_the_controller():
    controller = FakeController()
    response = run(topics.create_topics, _gateway(controller), _create([("bomb", BOMB)]))
    assert [t.error_code for t in response.topics] == [ErrorCode.policy_violation]
    assert controller.created == []


def test_create_partitions_bombs_are_answered_by_the_gateway():
    controller = FakeController()
    body = {"timeout_ms": 1000, "validate_only": False, "topics": [
        {"name": "a", "count": BOMB, "assignments": None},
        {"name": "b", "count": 60, "assignments": None},
        {"name": "a", "count": 100, "assignments": None},
    ]}
    response = run(topics.create_partitions, _gateway(controller, a=10, b=10, x=150), request(ApiKey.CREATE_PARTITIONS, 3, body))
    assert [(r.name, r.error_code) for r in response.results] == [
        ("a", ErrorCode.policy_violation), ("b", ErrorCode.none), ("a", ErrorCode.policy_violation)]
    assert controller.grown == [("b", 60)]


def test_metadata_auto_creates_only_the_topics_within_the_cluster_limit():
    controller = FakeController()
    gw = _gateway(controller, a=248)
    body = {"topics": [{"name": f"new-{i}"} for i in range(5)], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False}
    gw.config["auto.create.topics.enable"] = True
    response = run(meta.metadata, gw, request(ApiKey.METADATA, 12, body))
    assert controller.created == [(["new-0", "new-1"], False)]
    assert [t.error_code for t in response.topics] == [ErrorCode.unknown_topic_or_partition] * 5
