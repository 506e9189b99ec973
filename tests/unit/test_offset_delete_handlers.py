"""The gateway side of OffsetDelete, AlterShareGroupOffsets and DeleteShareGroupOffsets with fake
clients (KafkaApis: unknown topics answered before the coordinator, a whole-request error at the
top level with no topics, the leaders' cached share partitions evicted after a change)."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from coordinator.classic.offset_delete import OffsetDeleteResponse
from coordinator.share.offsets_admin import AlteredPartition, AlteredTopic, AlterShareOffsetsOutcome, DeletedShareTopic, DeleteShareOffsetsOutcome
from cluster.calls import CoordinatorOp as Op
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import group_offsets_admin as h
from cluster.leadership import GatewayAddress, Leadership
from cluster.metadata import TopicInfo
from tests.unit.gateway.fakes import LOADING, FakeCoordinators, gateway, request, run

NONE = ErrorCode.none
UNKNOWN = ErrorCode.unknown_topic_or_partition
FOO = uuid.uuid4()


def leadership() -> Leadership:
    info = TopicInfo("foo", FOO, 2, False, {})
    gateways = [GatewayAddress(0, "h", 1), GatewayAddress(1, "h", 2)]
    return Leadership(version=1, cluster_id="c", gateways=gateways, topics={"foo": info}, leaders={}, handles={},
                      topics_by_id={FOO: info})


class Coordinators(FakeCoordinators):
    def __init__(self, answers=None, alter=None, delete=None) -> None:
        super().__init__(answers)
        self.alter, self.delete = alter, delete
        self.requests: list = []

    async def group(self, op, group_id, req):
        self.requests.append(req)
        return await super().group(op, group_id, req)

    async def alter_share_group_offsets(self, req):
        self.requests.append(req)
        return self.alter

    async def delete_share_group_offsets(self, req):
        self.requests.append(req)
        return self.delete


class Partitions:
    def __init__(self) -> None:
        self.evicted: list = []

    async def share_evict(self, group_id, partitions, gateway):
        self.evicted.append((group_id, sorted(partitions), gateway))


def offset_delete_body(group="g"):
    return {"group_id": group, "topics": [{"name": "foo", "partitions": [{"partition_index": 0}, {"partition_index": 9}]},
                                          {"name": "nope", "partitions": [{"partition_index": 0}]}]}


def test_offset_delete_answers_unknown_partitions_itself_and_merges_the_coordinators_answer():
    coordinators = Coordinators({Op.OFFSET_DELETE: OffsetDeleteResponse(NONE, (("foo", ((0, ErrorCode.group_subscribed_to_topic),)),))})
    gw = gateway(coordinators, leadership=leadership())
    response = run(h.offset_delete, gw, request(ApiKey.OFFSET_DELETE, 0, offset_delete_body()))
    assert response.error_code == NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics] == [
        ("foo", [(0, ErrorCode.group_subscribed_to_topic), (9, UNKNOWN)]),
        ("nope", [(0, UNKNOWN)]),
    ]
    (sent,) = coordinators.requests
    assert sent.topics == (("foo", (0,)),)


def test_offset_delete_errors_of_the_whole_request_are_top_level():
    for outcome, code in ((OffsetDeleteResponse(ErrorCode.group_id_not_found), ErrorCode.group_id_not_found),
                          (LOADING, ErrorCode.coordinator_load_in_progress)):
        gw = gateway(Coordinators({Op.OFFSET_DELETE: outcome}), leadership=leadership())
        response = run(h.offset_delete, gw, request(ApiKey.OFFSET_DELETE, 0, offset_delete_body()))
        assert (response.error_code, response.topics) == (code, ())
    response = run(h.offset_delete, gateway(leadership=leadership()), request(ApiKey.OFFSET_DELETE, 0, offset_delete_body("")))
    assert response.error_code == ErrorCode.invalid_group_id


def test_alter_answers_unknown_topics_sends_the_rest_and_evicts_what_changed_on_every_gateway():
    altered = AlterShareOffsetsOutcome(NONE, None, (AlteredTopic("foo", FOO, (AlteredPartition(0, NONE), AlteredPartition(5, UNKNOWN, "x"))),))
    coordinators = Coordinators(alter=altered)
    partitions = Partitions()
    gw = gateway(coordinators, partitions, leadership=leadership())
    body = {"group_id": "g", "topics": [
        {"topic_name": "nope", "partitions": [{"partition_index": 0, "start_offset": 1}]},
        {"topic_name": "foo", "partitions": [{"partition_index": 0, "start_offset": 3}, {"partition_index": 5, "start_offset": 4}]},
    ]}
    response = run(h.alter_share_group_offsets, gw, request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body))
    assert response.error_code == NONE
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.responses] == [
        ("nope", [(0, UNKNOWN)]), ("foo", [(0, NONE), (5, UNKNOWN)])]
    assert coordinators.requests[0].topics == (("foo", ((0, 3), (5, 4))),)
    assert partitions.evicted == [("g", [("foo", 0)], 0), ("g", [("foo", 0)], 1)]


def test_alter_and_delete_of_a_live_group_answer_non_empty_group_and_evict_nothing():
    partitions = Partitions()
    refused = Coordinators(alter=AlterShareOffsetsOutcome(ErrorCode.non_empty_group, "Group g is not empty."),
                           delete=(DeleteShareOffsetsOutcome(ErrorCode.non_empty_group, "Group g is not empty."), ()))
    gw = gateway(refused, partitions, leadership=leadership())
    body = {"group_id": "g", "topics": [{"topic_name": "foo", "partitions": [{"partition_index": 0, "start_offset": 3}]}]}
    response = run(h.alter_share_group_offsets, gw, request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body))
    assert (response.error_code, response.error_message, response.responses) == (ErrorCode.non_empty_group, "Group g is not empty.", ())
    body = {"group_id": "g", "topics": [{"topic_name": "foo"}]}
    response = run(h.delete_share_group_offsets, gw, request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body))
    assert (response.error_code, response.responses) == (ErrorCode.non_empty_group, ())
    assert partitions.evicted == []


def test_delete_answers_every_topic_and_evicts_the_deleted_ones_partitions():
    answered = (DeletedShareTopic("foo", FOO, NONE), DeletedShareTopic("nope", None, UNKNOWN, "unknown"))
    partitions = Partitions()
    gw = gateway(Coordinators(delete=(DeleteShareOffsetsOutcome(NONE), answered)), partitions, leadership=leadership())
    body = {"group_id": "g", "topics": [{"topic_name": "foo"}, {"topic_name": "nope"}]}
    response = run(h.delete_share_group_offsets, gw, request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body))
    assert [(t.topic_name, t.error_code) for t in response.responses] == [("foo", NONE), ("nope", UNKNOWN)]
    assert partitions.evicted == [("g", [("foo", 0), ("foo", 1)], 0), ("g", [("foo", 0), ("foo", 1)], 1)]
