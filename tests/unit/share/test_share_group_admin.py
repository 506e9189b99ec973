"""Share groups next to classic groups: id conflicts both ways, ListGroups / DescribeGroups / DeleteGroups,
topic deletion (update_topics), and rebuilding share groups by replay after a failover."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import (
    CommitPartition,
    DeletedGroup,
    FetchedOffset,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    ListedGroup,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
)
from coordinator.records import (
    share_group_epoch_tombstone,
    share_state_partition_metadata_record,
    share_state_partition_metadata_tombstone,
    share_target_assignment_epoch_tombstone,
)
from coordinator.share.group import InitMapValue, ShareGroupState
from coordinator.share.heartbeat import session_key
from coordinator.share.messages import ShareStateDelete
from kernel.timer import ManualTimer
from tests.unit.share.context import BAR, FOO, ShareContext, classic_group, topic

NONE = ErrorCode.none


def stable_share_group(ctx: ShareContext, group_id: str = "g", members=("m1",), topics=("foo",)) -> None:
    for mid in members:
        ctx.join(mid, topics, group_id=group_id)
    ctx.initialize()
    for mid in members:
        ctx.heartbeat(mid, ctx.member(mid, group_id).member_epoch, group_id=group_id)


# -- group ids shared between the group types ----------------------------------------------------------


def test_a_classic_group_id_is_not_found_by_share_heartbeats():
    ctx = ShareContext(topic("foo", 1))
    classic_group(ctx, "g")
    ctx.take_written()
    for outcome in (ctx.join("m1", ["foo"]), ctx.heartbeat("m1", 3), ctx.leave("m1")):
        assert outcome.response.error_code == ErrorCode.group_id_not_found
        assert outcome.response.error_message == "Group g is not a share group."
    assert ctx.take_written() == []


def test_classic_apis_on_a_share_group_id():
    ctx = ShareContext(topic("foo", 1))
    stable_share_group(ctx)
    ctx.take_written()
    shard = ctx.shard
    join = JoinGroupRequest("g", 10_000, 30_000, "", None, "consumer", (("range", b"m"),))
    assert shard.join_group(join, 1).response.error_code == ErrorCode.inconsistent_group_protocol
    assert shard.heartbeat(HeartbeatRequest("g", 1, "m1")).response.error_code == ErrorCode.unknown_member_id
    left = shard.leave_group(LeaveGroupRequest("g", (LeavingMember("m1"),))).response
    assert left.error_code == ErrorCode.unknown_member_id
    sync = SyncGroupRequest("g", 1, "m1", None, "consumer", "range", ())
    assert shard.sync_group(sync, 2).response.error_code == ErrorCode.unknown_member_id
    commit = OffsetCommitRequest("g", -1, "", None, (("foo", (CommitPartition(0, 5),)),))
    assert shard.commit_offsets(commit).response.topics[0][1][0][1] == ErrorCode.group_id_not_found
    # Kafka's fetchOffsets / fetchAllOffsets: the share group's validateOffsetFetch throws
    # GROUP_ID_NOT_FOUND ("is not a consumer group"), which answers as a group without offsets.
    fetched = shard.fetch_offsets(OffsetFetchRequest("g", (("foo", (0, 1)),))).response
    assert fetched == OffsetFetchResponse("g", ErrorCode.none, (("foo", (FetchedOffset(0, -1, -1, ""),
                                                                         FetchedOffset(1, -1, -1, ""))),))
    assert shard.fetch_offsets(OffsetFetchRequest("g", None)).response == OffsetFetchResponse("g", ErrorCode.none, ())
    # None of those touched the share group.
    assert ctx.run(shard.join_group(join, 3)).error_code == ErrorCode.inconsistent_group_protocol
    assert ctx.take_written() == [] and ctx.group().state is ShareGroupState.STABLE


# -- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------------------------


def test_list_groups_lists_share_groups_with_type_and_state_filters():
    ctx = ShareContext(topic("foo", 1))
    classic_group(ctx, "c")
    stable_share_group(ctx, "s-stable")
    stable_share_group(ctx, "s-empty")
    ctx.leave("m1", group_id="s-empty")
    listed = ctx.run(ctx.shard.list_groups())
    assert listed == [
        ListedGroup("c", "consumer", "Stable", "classic"),
        ListedGroup("s-empty", "share", "Empty", "share"),
        ListedGroup("s-stable", "share", "Stable", "share"),
    ]
    assert [g.group_id for g in ctx.run(ctx.shard.list_groups(types=("Share",)))] == ["s-empty", "s-stable"]
    assert [g.group_id for g in ctx.run(ctx.shard.list_groups(types=("classic",)))] == ["c"]
    assert [g.group_id for g in ctx.run(ctx.shard.list_groups(states=("stable",)))] == ["c", "s-stable"]
    assert [g.group_id for g in ctx.run(ctx.shard.list_groups(states=("Empty",), types=("share",)))] == ["s-empty"]
    assert ctx.run(ctx.shard.list_groups(types=("consumer",))) == []
    assert ctx.run(ctx.shard.list_groups(states=("PreparingRebalance",), types=("share",))) == []


def test_describe_groups_describes_a_share_group_as_not_found_like_kafka():
    """Kafka's describeGroups looks up a classic group: a share group is its GroupIdNotFoundException,
    Dead with GROUP_ID_NOT_FOUND and the message from v6, Dead alone below (the gateway's part)."""
    ctx = ShareContext(topic("foo", 1))
    stable_share_group(ctx)
    (described,) = ctx.run(ctx.shard.describe_groups(("g",)))
    assert (described.error_code, described.state, described.protocol_type, described.members) == (
        ErrorCode.group_id_not_found, "Dead", "", ())
    assert described.error_message == "Group g is not a classic group."


def test_delete_groups_deletes_an_empty_share_group_and_its_share_state():
    ctx = ShareContext(topic("foo", 2), topic("bar", 1))
    stable_share_group(ctx, topics=("foo",))
    ctx.heartbeat("m1", ctx.member("m1").member_epoch, ["foo", "bar"])  # bar: asked for, never answered
    ctx.pending_inits.clear()
    ctx.take_written()
    (busy,) = ctx.run(ctx.shard.delete_groups(("g",)))
    assert busy == DeletedGroup("g", ErrorCode.non_empty_group)
    ctx.leave("m1")
    ctx.take_written()
    deleted, unknown = ctx.run(ctx.shard.delete_groups(("g", "nope")))
    assert unknown == DeletedGroup("nope", ErrorCode.group_id_not_found)
    assert deleted.error_code == NONE
    # Initialized (foo) and initializing (bar: the share coordinator may have done it) partitions.
    assert deleted.share_state_deletes == (
        ShareStateDelete("g", BAR, 0),
        ShareStateDelete("g", FOO, 0),
        ShareStateDelete("g", FOO, 1),
    )
    assert ctx.take_written() == [
        share_target_assignment_epoch_tombstone("g"),
        share_state_partition_metadata_tombstone("g"),
        share_group_epoch_tombstone("g"),
    ]
    assert ctx.group() is None
    assert ctx.replayed().durable_view() == ctx.shard.durable_view()
    # The id is free again, for either group type.
    assert ctx.join("m9", ["foo"]).response.member_epoch == 1


# -- topic deletion ---------------------------------------------------------------------------------------


def test_update_topics_drops_a_deleted_topic_from_share_state_and_the_assignment():
    ctx = ShareContext(topic("foo", 2), topic("bar", 2))
    stable_share_group(ctx, "g", ("m1",), ("foo", "bar"))
    stable_share_group(ctx, "h", ("m1",), ("foo",))
    assert ctx.member("m1").assigned_partitions == {FOO: frozenset({0, 1}), BAR: frozenset({0, 1})}
    ctx.take_written()
    ts = ctx.group("g").share_state.initialized[BAR].timestamp
    deletes = ctx.set_topics(topic("bar", 2))
    assert deletes == tuple(ShareStateDelete(g, FOO, p) for g in ("g", "h") for p in (0, 1))
    assert ctx.take_written() == [
        share_state_partition_metadata_record("g", {}, {BAR: InitMapValue("bar", frozenset({0, 1}), ts)}, {}),
        share_state_partition_metadata_record("h", {}, {}, {}),
    ]
    # The subscription to the vanished topic changes the metadata hash: the next heartbeat rebalances.
    hb = ctx.heartbeat("m1", ctx.member("m1").member_epoch)
    assert hb.response.assignment == ((BAR, (0, 1)),)
    assert hb.initialize == ()
    hb = ctx.heartbeat("m1", ctx.member("m1", "h").member_epoch, group_id="h")
    assert hb.response.assignment == () and hb.initialize == ()
    # A topic re-created under the same name has a new id: its partitions are initialized afresh.
    from uuid import UUID

    new_foo = UUID(int=0xF01)
    ctx.set_topics(topic("bar", 2), topic("foo", 1, new_foo))
    assert ctx.heartbeat("m1", ctx.member("m1", "h").member_epoch, group_id="h").initialize[0].topic_id == new_foo


def test_the_first_topic_image_deletes_nothing():
    ctx = ShareContext(topic("foo", 1))
    stable_share_group(ctx)
    fresh = ctx.replayed(load=False)
    # replayed() gave the fresh shard the current image first; an empty one now is a real deletion.
    assert fresh.update_topics(()).response == (ShareStateDelete("g", FOO, 0),)
    other = ctx.new_shard()
    for record in ctx.log:
        other.replay(record)
    first = other.update_topics(())
    assert first.response == () and first.records == []


# -- failover: replay rebuilds share groups -----------------------------------------------------------------


def test_replaying_the_log_rebuilds_equal_share_groups_and_on_loaded_restarts_sessions():
    ctx = ShareContext(topic("foo", 3), topic("bar", 2), share_session_timeout_ms=45_000)
    stable_share_group(ctx, "g", ("m1", "m2", "m3"), ("foo", "bar"))
    ctx.join("m4", ["bar"])  # bar initialized already; m4 in, others not yet reconciled
    ctx.leave("m2")
    ctx.set_topics(topic("foo", 4), topic("bar", 2))
    ctx.heartbeat("m1", ctx.member("m1").member_epoch)  # foo-3 initializing, never answered
    classic_group(ctx, "c")
    view = ctx.shard.durable_view()
    assert view["groups"]["g"][0] == "share"

    timer = ManualTimer(ctx.clock)
    fresh = ctx.replayed(load=True, timer=timer)
    assert fresh.durable_view()["groups"]["g"] == view["groups"]["g"]
    assert {k for k in timer.keys if k[0] == "share-session"} == {session_key("g", m) for m in ("m1", "m3", "m4")}
    assert timer.deadline(session_key("g", "m1")) == ctx.clock.now + 45_000

    # The rebuilt shard carries on exactly like the original one.
    original = ctx.shard
    outcomes, records = [], []
    for shard in (original, fresh):
        ctx.shard = shard
        ctx.take_written()
        outcomes.append(ctx.heartbeat("m3", shard.groups["g"].members["m3"].member_epoch))
        records.append(ctx.take_written())
    assert outcomes[0] == outcomes[1] and outcomes[0].response.error_code == NONE
    assert records[0] == records[1] and records[0]
    assert fresh.durable_view()["groups"]["g"] == original.durable_view()["groups"]["g"]
