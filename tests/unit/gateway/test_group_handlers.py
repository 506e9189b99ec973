"""Classic group handlers with fake clients: Kafka requests to calls and outcomes to responses,
and the answers Kafka 4.x's GroupCoordinatorService gives before or instead of the coordinator."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from coordinator.classic.messages import (
    DeletedGroup,
    DescribedGroup,
    FetchedOffset,
    HeartbeatResponse,
    LeaveGroupResponse,
    ListedGroup,
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed, Listing
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import groups
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo

from tests.unit.gateway.fakes import LOADING, FakeCoordinators, gateway, request, run

JOIN = {"group_id": "", "session_timeout": 10_000, "rebalance_timeout": 30_000, "member_id": "m-1",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
SYNC = {"group_id": "", "generation_id": 1, "member_id": "m-1", "assignments": []}
HEARTBEAT = {"group_id": "", "generation_id": 1, "member_id": "m-1"}


# -- an empty group id (GroupCoordinatorService.isGroupIdNotEmpty) ----------------------------------


@pytest.mark.parametrize(
    "handler, api, version, body",
    [
        (groups.join_group, ApiKey.JOIN_GROUP, 9, JOIN),
        (groups.sync_group, ApiKey.SYNC_GROUP, 5, SYNC),
        (groups.heartbeat, ApiKey.HEARTBEAT, 4, HEARTBEAT),
        (groups.leave_group, ApiKey.LEAVE_GROUP, 5, {"group_id": "", "members": [{"member_id": "m-1"}]}),
        (groups.leave_group, ApiKey.LEAVE_GROUP, 0, {"group_id": "", "member_id": "m-1"}),
    ],
)
def test_an_empty_group_id_answers_invalid_group_id_without_asking_a_coordinator(handler, api, version, body):
    coordinators = FakeCoordinators()
    response = run(handler, gateway(coordinators), request(api, version, body))
    assert response.error_code == ErrorCode.invalid_group_id
    assert coordinators.calls == []
    if api == ApiKey.JOIN_GROUP:
        assert response.member_id == "m-1"  # Kafka echoes the member id here


def test_the_apis_kafka_keeps_open_to_the_empty_group_id_still_reach_the_coordinator():
    # "For backwards compatibility, we support ... for the empty group id": OffsetCommit, OffsetFetch,
    # DescribeGroups and DeleteGroups (only a null id is INVALID_GROUP_ID, which the wire cannot carry).
    coordinators = FakeCoordinators({
        Op.FETCH_OFFSETS: OffsetFetchResponse("", ErrorCode.none, ()),
        Op.DESCRIBE: lambda g, _: DescribedGroup(g, ErrorCode.none, "Dead", "", ""),
        Op.DELETE: lambda g, _: DeletedGroup(g, ErrorCode.group_id_not_found),
    })
    gw = gateway(coordinators)
    run(groups.offset_fetch, gw, request(ApiKey.OFFSET_FETCH, 7, {"group_id": "", "topics": None}))
    run(groups.describe_groups, gw, request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [""]}))
    run(groups.delete_groups, gw, request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [""]}))
    assert [op for op, _ in coordinators.calls] == [Op.FETCH_OFFSETS, Op.DESCRIBE, Op.DELETE]


# -- while the group's partition loads ------------------------------------------------------------


def test_a_heartbeat_while_its_partition_loads_is_answered_none():
    # Kafka: "The group is still loading, so blindly respond". aiokafka's heartbeat task dies on
    # COORDINATOR_LOAD_IN_PROGRESS.
    gw = gateway(FakeCoordinators({Op.HEARTBEAT: LOADING}))
    response = run(groups.heartbeat, gw, request(ApiKey.HEARTBEAT, 4, {**HEARTBEAT, "group_id": "g"}))
    assert response.error_code == ErrorCode.none


def test_other_heartbeat_errors_pass_through():
    for error in (ErrorCode.not_coordinator, ErrorCode.rebalance_in_progress):
        gw = gateway(FakeCoordinators({Op.HEARTBEAT: HeartbeatResponse(error)}))
        assert run(groups.heartbeat, gw, request(ApiKey.HEARTBEAT, 4, {**HEARTBEAT, "group_id": "g"})).error_code == error
    gw = gateway(FakeCoordinators({Op.HEARTBEAT: Failed(ErrorCode.not_coordinator)}))
    response = run(groups.heartbeat, gw, request(ApiKey.HEARTBEAT, 4, {**HEARTBEAT, "group_id": "g"}))
    assert response.error_code == ErrorCode.not_coordinator


def test_join_and_sync_while_loading_answer_load_in_progress_with_no_member_id():
    gw = gateway(FakeCoordinators({Op.JOIN: LOADING, Op.SYNC: LOADING}))
    join = run(groups.join_group, gw, request(ApiKey.JOIN_GROUP, 9, {**JOIN, "group_id": "g"}))
    # Kafka's error path builds a fresh JoinGroupResponseData: member id "".
    assert (join.error_code, join.member_id, join.generation_id) == (ErrorCode.coordinator_load_in_progress, "", -1)
    sync = run(groups.sync_group, gw, request(ApiKey.SYNC_GROUP, 5, {**SYNC, "group_id": "g"}))
    assert sync.error_code == ErrorCode.coordinator_load_in_progress


def test_leave_commit_describe_delete_while_loading_answer_load_in_progress():
    gw = gateway(
        FakeCoordinators({Op.LEAVE: LOADING, Op.COMMIT: LOADING, Op.DESCRIBE: LOADING, Op.DELETE: LOADING}),
        leadership=_with_topic("t", 2),
    )
    leave = run(groups.leave_group, gw, request(ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "m"}]}))
    assert leave.error_code == ErrorCode.coordinator_load_in_progress and leave.members == ()
    commit = run(groups.offset_commit, gw, request(ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
    }))
    assert commit.topics[0].partitions[0].error_code == ErrorCode.coordinator_load_in_progress
    described = run(groups.describe_groups, gw, request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g", "h"]}))
    assert [(d.group_id, d.error_code) for d in described.groups] == [
        ("g", ErrorCode.coordinator_load_in_progress), ("h", ErrorCode.coordinator_load_in_progress)]
    deleted = run(groups.delete_groups, gw, request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]}))
    assert deleted.results[0].error_code == ErrorCode.coordinator_load_in_progress


def test_offset_fetch_while_loading_is_a_group_error_and_lists_partitions_only_below_v2():
    gw = gateway(FakeCoordinators({Op.FETCH_OFFSETS: LOADING}))
    topics = [{"name": "t", "partition_indexes": [0, 1]}]
    v1 = run(groups.offset_fetch, gw, request(ApiKey.OFFSET_FETCH, 1, {"group_id": "g", "topics": topics}))
    assert [p.error_code for p in v1.topics[0].partitions] == [ErrorCode.coordinator_load_in_progress] * 2
    v7 = run(groups.offset_fetch, gw, request(ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": topics}))
    assert v7.error_code == ErrorCode.coordinator_load_in_progress and v7.topics == ()
    v9 = run(groups.offset_fetch, gw, request(ApiKey.OFFSET_FETCH, 9, {"groups": [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}]}))
    assert v9.groups[0].error_code == ErrorCode.coordinator_load_in_progress and v9.groups[0].topics == ()


def test_list_groups_with_an_error_anywhere_answers_the_error_and_no_groups():
    gw = gateway(FakeCoordinators(listing=Listing(ErrorCode.coordinator_load_in_progress)))
    response = run(groups.list_groups, gw, request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}))
    assert response.error_code == ErrorCode.coordinator_load_in_progress and response.groups == ()


# -- translation ------------------------------------------------------------------------------------


def _with_topic(name: str, partitions: int) -> Leadership:
    import uuid

    info = TopicInfo(name, uuid.uuid4(), partitions, False, {})
    return Leadership(version=1, cluster_id="c", gateways=[], topics={name: info}, leaders={}, handles={},
                      topics_by_id={info.topic_id: info})


def test_offset_commit_answers_unknown_partitions_itself_and_sends_the_rest():
    seen = []

    def commit(group_id, req):
        seen.append(req)
        return OffsetCommitResponse(tuple((t, tuple((p.partition, ErrorCode.none) for p in parts)) for t, parts in req.topics))

    gw = gateway(FakeCoordinators({Op.COMMIT: commit}), leadership=_with_topic("t", 1))
    response = run(groups.offset_commit, gw, request(ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5},
                                                 {"partition_index": 3, "committed_offset": 5}]}],
    }))
    assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == [
        (0, ErrorCode.none), (3, ErrorCode.unknown_topic_or_partition)]
    assert [p.partition for _, parts in seen[0].topics for p in parts] == [0]


def test_leave_group_below_v3_answers_its_one_members_error():
    from coordinator.classic.messages import LeftMember

    gw = gateway(FakeCoordinators({Op.LEAVE: LeaveGroupResponse(ErrorCode.none, (LeftMember("m", None, ErrorCode.unknown_member_id),))}))
    response = run(groups.leave_group, gw, request(ApiKey.LEAVE_GROUP, 2, {"group_id": "g", "member_id": "m"}))
    assert response.error_code == ErrorCode.unknown_member_id


def test_list_groups_translates_every_listed_group():
    listing = Listing(ErrorCode.none, (ListedGroup("a", "consumer", "Stable", "classic"), ListedGroup("b", "share", "Empty", "share")))
    gw = gateway(FakeCoordinators(listing=listing))
    response = run(groups.list_groups, gw, request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}))
    assert [(g.group_id, g.group_state, g.group_type) for g in response.groups] == [
        ("a", "Stable", "classic"), ("b", "Empty", "share")]


def test_offset_fetch_v8_asks_each_group():
    def fetch(group_id, req):
        return OffsetFetchResponse(group_id, ErrorCode.none, (("t", (FetchedOffset(0, 7, -1, "", ErrorCode.none),)),))

    gw = gateway(FakeCoordinators({Op.FETCH_OFFSETS: fetch}))
    response = run(groups.offset_fetch, gw, request(ApiKey.OFFSET_FETCH, 8, {"groups": [
        {"group_id": "a", "topics": None}, {"group_id": "b", "topics": None}]}))
    assert [(g.group_id, g.topics[0].partitions[0].committed_offset) for g in response.groups] == [("a", 7), ("b", 7)]


@pytest.mark.parametrize("version", range(5))
def test_a_heartbeats_answer_is_the_entity_built_for_its_version_and_outcome(version):
    from cluster.gateway.answers import build_response

    for error in (ErrorCode.none, ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id):
        gw = gateway(FakeCoordinators({Op.HEARTBEAT: HeartbeatResponse(error)}))
        response = run(groups.heartbeat, gw, request(ApiKey.HEARTBEAT, version, {**HEARTBEAT, "group_id": "g"}))
        assert response == build_response(ApiKey.HEARTBEAT, version, {"error_code": error})


def test_offset_commit_v10_names_topics_by_id_and_answers_an_unknown_id_itself():
    seen = []

    def commit(group_id, req):
        seen.append(req)
        return OffsetCommitResponse(tuple((t, tuple((p.partition, ErrorCode.none) for p in parts)) for t, parts in req.topics))

    leadership = _with_topic("t", 2)
    known, unknown = leadership.topics["t"].topic_id, uuid.UUID(int=99)
    gw = gateway(FakeCoordinators({Op.COMMIT: commit}), leadership=leadership)
    response = run(groups.offset_commit, gw, request(ApiKey.OFFSET_COMMIT, 10, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
        "topics": [{"topic_id": known, "partitions": [{"partition_index": 1, "committed_offset": 5},
                                                       {"partition_index": 4, "committed_offset": 5}]},
                   {"topic_id": unknown, "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
    }))
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics] == [
        (known, [(1, ErrorCode.none), (4, ErrorCode.unknown_topic_or_partition)]),
        (unknown, [(0, ErrorCode.unknown_topic_id)]),
    ]
    # The coordinator stores by name, as Kafka's does: only the known partition went, under "t".
    assert [(t, [p.partition for p in parts]) for t, parts in seen[0].topics] == [("t", [1])]


def test_offset_fetch_v10_names_topics_by_id_both_ways():
    asked = []

    def fetch(group_id, req):
        asked.append(req.topics)
        committed = (("t", (FetchedOffset(0, 7, -1, "", ErrorCode.none),)), ("gone", (FetchedOffset(0, 3, -1, "", ErrorCode.none),)))
        return OffsetFetchResponse(group_id, ErrorCode.none, committed if req.topics is None else committed[:1])

    leadership = _with_topic("t", 1)
    known, unknown = leadership.topics["t"].topic_id, uuid.UUID(int=99)
    gw = gateway(FakeCoordinators({Op.FETCH_OFFSETS: fetch}), leadership=leadership)
    response = run(groups.offset_fetch, gw, request(ApiKey.OFFSET_FETCH, 10, {"groups": [
        {"group_id": "a", "topics": [{"topic_id": known, "partition_indexes": [0]},
                                     {"topic_id": unknown, "partition_indexes": [2]}]},
        {"group_id": "b", "topics": None}]}))
    a, b = response.groups
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions]) for t in a.topics] == [
        (known, [(0, 7, ErrorCode.none)]), (unknown, [(2, -1, ErrorCode.unknown_topic_id)])]
    assert asked[0] == (("t", (0,)),)  # by name to the coordinator, only what is known
    # Every committed offset: a topic without an id any more ("gone", deleted) is left out.
    assert [t.topic_id for t in b.topics] == [known]


@pytest.mark.parametrize("version", [0, 5, 6])
def test_describe_groups_answers_an_unknown_group_as_dead_and_from_v6_as_not_found(version):
    missing = DescribedGroup("nope", ErrorCode.group_id_not_found, "Dead", "", "", error_message="Group nope not found.")
    gw = gateway(FakeCoordinators({Op.DESCRIBE: lambda g, _: missing}))
    (group,) = run(groups.describe_groups, gw, request(ApiKey.DESCRIBE_GROUPS, version, {"groups": ["nope"]})).groups
    assert group.group_state == "Dead"
    if version >= 6:
        assert (group.error_code, group.error_message) == (ErrorCode.group_id_not_found, "Group nope not found.")
    else:
        assert group.error_code == ErrorCode.none
