"""Online migration between classic and consumer groups (KIP-848; Kafka 4.2's
GroupMetadataManagerTest upgrade/downgrade tests): a classic group upgrades when a consumer-protocol
member joins it, its classic members keep working inside the consumer group (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit), and the group goes back to classic when the last
consumer-protocol member leaves."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from coordinator.classic.state import ClassicGroupState
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.protocol import decode_assignment
from loadtest.members.consumer_protocol import encode_assignment, encode_subscription
from tests.unit.consumer.context import FOO, ConsumerContext, topic

NONE = ErrorCode.none


def classic_join(ctx: ConsumerContext, member_id: str = "", owned=None, token: int = 1):
    req = JoinGroupRequest(
        "g", 10_000, 30_000, member_id, None, "consumer",
        (("range", encode_subscription(["foo"], owned or {})),), client_id="c", requires_known_member_id=False,
    )
    return ctx.run(ctx.shard.join_group(req, token))


def classic_group_of_two(ctx: ConsumerContext) -> list[str]:
    """A Stable classic group of two members: foo-0,1,2 to the first, foo-3,4,5 to the second."""
    classic_join(ctx, token=1)
    classic_join(ctx, token=2)
    ctx.advance(0)  # the initial delayed join completes
    group = ctx.group()
    ids = list(group.members)
    leader = group.leader_id
    assignment = ((ids[0], encode_assignment({"foo": [0, 1, 2]})), (ids[1], encode_assignment({"foo": [3, 4, 5]})))
    ctx.run(ctx.shard.sync_group(SyncGroupRequest("g", 1, leader, None, "consumer", "range", assignment), 3))
    assert ctx.group().is_in(ClassicGroupState.STABLE)
    return ids


def owned_once(ctx: ConsumerContext) -> None:
    seen: dict = {}
    for m in ctx.group().members.values():
        for parts in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} owned by {seen[(t, p)]} and {m.member_id}"
                    seen[(t, p)] = m.member_id


def test_a_consumer_member_upgrades_a_classic_group_and_the_classic_members_catch_up():
    ctx = ConsumerContext(topic("foo", 6))
    a, b = classic_group_of_two(ctx)
    r = ctx.join("c1", ["foo"])
    assert r.error_code == NONE
    group = ctx.group()
    assert isinstance(group, ConsumerGroup) and set(group.members) == {a, b, "c1"}
    # The classic members keep their generation as their epoch and their partitions.
    assert group.members[a].member_epoch == 1 and group.members[a].assigned_partitions == {FOO: {0, 1, 2}}
    assert group.members[a].use_classic_protocol and not group.members["c1"].use_classic_protocol
    assert group.group_epoch == 2 and r.member_epoch == 2 and r.assignment == ()
    owned_once(ctx)
    # A classic heartbeat learns of the rebalance; the member joins again, with what it owns.
    hb = ctx.run(ctx.shard.heartbeat(HeartbeatRequest("g", 1, a)))
    assert hb.error_code == ErrorCode.rebalance_in_progress
    joined = classic_join(ctx, a, owned={"foo": [0, 1, 2]})
    assert joined.error_code == NONE and joined.generation_id == 1 and joined.leader == ""
    synced = ctx.run(ctx.shard.sync_group(SyncGroupRequest("g", joined.generation_id, a, None, "consumer", "range", ()), 9))
    kept = decode_assignment(synced.assignment).get("foo", ())
    assert synced.error_code == NONE and set(kept) < {0, 1, 2}  # it must give one up to c1
    # It revokes (an eager client owns nothing when it joins again): the next join moves it on.
    joined = classic_join(ctx, a, owned={"foo": list(kept)})
    assert joined.generation_id == 2
    for member_id in (b,):
        classic_join(ctx, member_id, owned={"foo": [3, 4, 5]})
        classic_join(ctx, member_id, owned={"foo": list(ctx.member(member_id).assigned_partitions.get(FOO, ()))})
    owned_once(ctx)
    r = ctx.heartbeat("c1", 2)
    assert r.error_code == NONE and r.assignment is not None and len(dict(r.assignment)[FOO]) == 2
    owned_once(ctx)
    # A classic member commits at its epoch as generation; an old generation is refused as Kafka does.
    commit = OffsetCommitRequest("g", ctx.member(a).member_epoch, a, None, (("foo", (CommitPartition(0, 1, -1, ""),)),), api_version=8)
    assert ctx.run(ctx.shard.commit_offsets(commit)).topics[0][1][0][1] == NONE
    stale = OffsetCommitRequest("g", 0, a, None, (("foo", (CommitPartition(0, 1, -1, ""),)),), api_version=8)
    assert ctx.run(ctx.shard.commit_offsets(stale)).topics[0][1][0][1] == ErrorCode.illegal_generation
    # The log rebuilds the same group.
    assert ctx.replayed().durable_view() == ctx.shard.durable_view()


def test_classic_members_leave_and_the_consumer_group_stays():
    ctx = ConsumerContext(topic("foo", 6))
    a, b = classic_group_of_two(ctx)
    ctx.join("c1", ["foo"])
    left = ctx.run(ctx.shard.leave_group(LeaveGroupRequest("g", (LeavingMember(a), LeavingMember(b), LeavingMember("zz")))))
    assert [m.error_code for m in left.members] == [NONE, NONE, ErrorCode.unknown_member_id]
    group = ctx.group()
    assert isinstance(group, ConsumerGroup) and set(group.members) == {"c1"}
    r = ctx.heartbeat("c1", 2)
    assert r.member_epoch == 3 and dict(r.assignment)[FOO] == (0, 1, 2, 3, 4, 5)
    assert ctx.replayed().durable_view() == ctx.shard.durable_view()


def test_the_last_consumer_member_leaving_downgrades_the_group():
    ctx = ConsumerContext(topic("foo", 6))
    a, b = classic_group_of_two(ctx)
    ctx.join("c1", ["foo"])
    ctx.leave("c1")
    group = ctx.group()
    assert isinstance(group, ClassicGroup) and set(group.members) == {a, b}
    assert group.is_in(ClassicGroupState.PREPARING_REBALANCE) and group.generation_id == 2  # the group epoch
    # Back on the classic protocol: heartbeats say rejoin, and the group rebalances as classic.
    assert ctx.run(ctx.shard.heartbeat(HeartbeatRequest("g", 2, a))).error_code == ErrorCode.rebalance_in_progress
    assert ctx.replayed().durable_view()["groups"]["g"][1] == 2  # the GroupMetadata record holds the generation


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced():
    ctx = ConsumerContext(topic("foo", 2), consumer_session_timeout_ms=60_000)
    classic_join(ctx, token=1)
    ctx.advance(0)
    [a] = list(ctx.group().members)
    ctx.run(ctx.shard.sync_group(SyncGroupRequest("g", 1, a, None, "consumer", "range", ((a, encode_assignment({"foo": [0, 1]})),)), 2))
    ctx.join("c1", ["foo"])
    assert ctx.run(ctx.shard.heartbeat(HeartbeatRequest("g", 1, a))).error_code == ErrorCode.rebalance_in_progress
    for _ in range(3):  # heartbeats keep its 10 s session, but do not push its 30 s join deadline back
        ctx.advance(9_000)
        assert ctx.run(ctx.shard.heartbeat(HeartbeatRequest("g", 1, a))).error_code == ErrorCode.rebalance_in_progress
    assert a in ctx.group().members
    ctx.advance(3_000)
    assert a not in ctx.group().members
