"""ShareGroupHeartbeat, ShareGroupDescribe and DescribeShareGroupOffsets with fake clients."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from coordinator.share.messages import (
    DescribedShareGroup,
    ShareGroupHeartbeatResponse,
    ShareGroupTopics,
    ShareHeartbeatOutcome,
)
from sharestate import messages as m

from cluster.calls import CoordinatorOp as Op
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import share_groups
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo

from tests.unit.gateway.fakes import LOADING, FakeCoordinators, FakePartitions, gateway, request, run

HEARTBEAT = {"group_id": "g", "member_id": "m-1", "member_epoch": 3, "rack_id": None,
             "subscribed_topic_names": None}


def test_a_share_heartbeat_while_loading_answers_the_error_as_kafka_builds_it():
    # handleOperationException builds a fresh response: the error code, no member id, epoch 0, and
    # no message (the runtime throws COORDINATOR_LOAD_IN_PROGRESS with its default text).
    gw = gateway(FakeCoordinators({Op.SHARE_HEARTBEAT: LOADING}))
    response = run(share_groups.share_group_heartbeat, gw, request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, HEARTBEAT))
    assert response.error_code == ErrorCode.coordinator_load_in_progress
    assert (response.member_id, response.member_epoch, response.assignment) == (None, 0, None)
    assert response.error_message is None


def test_a_share_heartbeat_translates_the_assignment():
    topic_id = uuid.uuid4()
    outcome = ShareHeartbeatOutcome(ShareGroupHeartbeatResponse(ErrorCode.none, None, "m-1", 4, 5000, ((topic_id, (0, 2)),)))
    gw = gateway(FakeCoordinators({Op.SHARE_HEARTBEAT: outcome}))
    response = run(share_groups.share_group_heartbeat, gw, request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, HEARTBEAT))
    assert (response.member_id, response.member_epoch) == ("m-1", 4)
    assert [(t.topic_id, t.partitions) for t in response.assignment.topic_partitions] == [(topic_id, (0, 2))]


def test_share_group_describe_while_loading_answers_each_group_the_error():
    gw = gateway(FakeCoordinators({Op.SHARE_DESCRIBE: LOADING}))
    response = run(share_groups.share_group_describe, gw, request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["a", "b"]}))
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("a", ErrorCode.coordinator_load_in_progress), ("b", ErrorCode.coordinator_load_in_progress)]


def test_share_group_describe_passes_the_coordinators_answer():
    gw = gateway(FakeCoordinators({Op.SHARE_DESCRIBE: lambda g, _: DescribedShareGroup(g, ErrorCode.none, None, "Empty", 3)}))
    response = run(share_groups.share_group_describe, gw, request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["a"]}))
    assert (response.groups[0].group_state, response.groups[0].group_epoch) == ("Empty", 3)


class FakePersister:
    async def summary(self, req: m.ReadShareGroupStateSummaryRequest) -> m.ReadShareGroupStateSummaryResponse:
        return m.ReadShareGroupStateSummaryResponse(ErrorCode.none, None, 1, 0, 10, 4)


def test_describe_share_group_offsets_lists_the_groups_partitions_and_their_lag():
    info = TopicInfo("t", uuid.uuid4(), 2, False, {})
    leadership = Leadership(1, "c", [], {"t": info}, {}, {}, {info.topic_id: info})
    coordinators = FakeCoordinators({Op.SHARE_TOPICS: lambda g, _: ShareGroupTopics(g, ErrorCode.none, None, ((info.topic_id, "t", (0, 1)),))})
    gw = gateway(coordinators, partitions=FakePartitions(log_end=30), leadership=leadership)
    gw.persister = FakePersister()
    response = run(share_groups.describe_share_group_offsets, gw,
                   request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "g", "topics": None}]}))
    parts = response.groups[0].topics[0].partitions
    assert [(p.partition_index, p.start_offset, p.lag) for p in parts] == [(0, 10, 16), (1, 10, 16)]
