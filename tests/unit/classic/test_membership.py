"""Membership rules: the two-phase join, static members, limits, LeaveGroup, Heartbeat by state."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import LeavingMember
from coordinator.classic.state import ClassicGroupState as S
from kernel.codec import Record
from coordinator.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from tests.unit.classic.context import Context
from tests.unit.classic.test_rebalance_scenarios import stable_group_of

NONE = ErrorCode.none


def test_member_id_required_then_pending_member_expires_without_touching_the_group():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    first = ctx.join()
    assert first.response.error_code == ErrorCode.member_id_required
    pending = first.response.member_id
    assert ctx.group().is_pending_member(pending) and ctx.group().state is S.STABLE
    for _ in range(4):
        ctx.advance(3_000)
        ctx.heartbeat(m1, 1)
        ctx.heartbeat(m2, 1)
    # Its session (10 s) passed without the second JoinGroup: forgotten, no rebalance.
    assert not ctx.group().is_pending_member(pending) and ctx.group().state is S.STABLE
    assert ctx.join(member_id=pending).response.error_code == ErrorCode.unknown_member_id


def test_join_group_v3_adds_a_new_member_directly():
    ctx = Context()
    j = ctx.join(v4=False)
    assert j.parked and ctx.group().num_members == 1
    ctx.advance(0)
    assert j.answer.error_code == NONE and j.answer.member_id.startswith("client-")


def test_session_timeout_bounds():
    ctx = Context()
    for session in (5_999, 1_800_001):
        assert ctx.join(session=session).response.error_code == ErrorCode.invalid_session_timeout
    assert ctx.group() is None


def test_group_max_size():
    ctx = Context(max_size=2)
    stable_group_of(ctx, 2)
    assert ctx.join().response.error_code == ErrorCode.group_max_size_reached


def test_unknown_member_and_unknown_group():
    ctx = Context()
    stable_group_of(ctx, 1)
    assert ctx.join(member_id="nobody").response.error_code == ErrorCode.unknown_member_id
    assert ctx.join("other", member_id="nobody").response.error_code == ErrorCode.unknown_member_id
    assert ctx.heartbeat("nobody", 1).error_code == ErrorCode.unknown_member_id
    assert ctx.heartbeat("x", 1, group_id="missing").error_code == ErrorCode.unknown_member_id
    assert ctx.sync("x", 1, group_id="missing").answer.error_code == ErrorCode.unknown_member_id


def test_inconsistent_protocols_are_refused():
    ctx = Context()
    stable_group_of(ctx, 1)
    other = ctx.join(protocols=(("sticky", b"s"),))
    assert other.response.error_code == ErrorCode.inconsistent_group_protocol
    assert ctx.join(protocols=()).response.error_code == ErrorCode.inconsistent_group_protocol


def test_heartbeat_answer_by_state():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    assert ctx.heartbeat(m1, 1).error_code == NONE
    assert ctx.heartbeat(m1, 0).error_code == ErrorCode.illegal_generation
    ctx.join_new()  # PreparingRebalance
    assert ctx.heartbeat(m1, 1).error_code == ErrorCode.rebalance_in_progress
    ctx.join(member_id=m1)
    ctx.join(member_id=m2)  # CompletingRebalance, generation 2
    assert ctx.group().state is S.COMPLETING_REBALANCE
    assert ctx.heartbeat(m1, 2).error_code == ErrorCode.rebalance_in_progress  # SPEC §2
    # Empty: the last member left; a stale heartbeat is told to rejoin from scratch.
    ctx2 = Context()
    (only,) = stable_group_of(ctx2, 1)
    ctx2.leave(only)
    assert ctx2.group().state is S.EMPTY
    assert ctx2.heartbeat(only, 2).error_code == ErrorCode.unknown_member_id


def test_a_heartbeat_during_completing_rebalance_keeps_the_member_alive():
    """Kafka's classicGroupHeartbeat reschedules the member's heartbeat in CompletingRebalance too: a
    leader whose assignor runs longer than its session timeout (10 s) stays while it heartbeats.
    The answer stays REBALANCE_IN_PROGRESS (SPEC §2)."""
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    ctx.join_new(rebalance=60_000)  # PreparingRebalance; the sync deadline is the rebalance timeout
    ctx.join(member_id=m1, rebalance=60_000)
    ctx.join(member_id=m2, rebalance=60_000)
    m3 = next(m for m in ctx.group().members if m not in (m1, m2))
    assert ctx.group().state is S.COMPLETING_REBALANCE and ctx.group().is_leader(m1)
    follower_syncs = [ctx.sync(m2, 2), ctx.sync(m3, 2)]  # parked: their sessions wait for the leader
    for _ in range(8):  # 24 s in which the leader only heartbeats
        ctx.advance(3_000)
        assert ctx.heartbeat(m1, 2).error_code == ErrorCode.rebalance_in_progress
    assert ctx.group().state is S.COMPLETING_REBALANCE and ctx.group().has_member(m1)
    ctx.sync(m1, 2, assignments=[(m, b"") for m in (m1, m2, m3)])
    assert ctx.group().state is S.STABLE and ctx.group().generation_id == 2
    assert all(s.answer.error_code == NONE for s in follower_syncs)


def test_leave_group_batch_and_by_instance_id_and_the_last_member_empties_the_group():
    ctx = Context()
    a = ctx.join_new(instance="i-a")
    b = ctx.join_new()
    ctx.advance(0)
    ma, mb = a.answer.member_id, b.answer.member_id
    ctx.sync(mb, 1)
    ctx.sync(ma, 1, assignments=[(ma, b"x"), (mb, b"y")])
    ctx.take_written()
    response = ctx.leave(LeavingMember("", "i-a"), LeavingMember("ghost"), group_id="g")
    assert [(m.member_id, m.error_code) for m in response.members] == [
        ("", NONE),
        ("ghost", ErrorCode.unknown_member_id),
    ]
    assert ctx.group().state is S.PREPARING_REBALANCE and list(ctx.group().members) == [mb]
    rejoin = ctx.join(member_id=mb)
    assert rejoin.answer.generation_id == 2
    ctx.sync(mb, 2, assignments=[(mb, b"xy")])
    ctx.take_written()
    assert ctx.leave(mb).members[0].error_code == NONE
    # Stable -> PreparingRebalance -> (nobody left) Empty, generation 3, stored as an empty group.
    group = ctx.group()
    assert group.state is S.EMPTY and group.generation_id == 3
    assert ctx.take_written() == [
        Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 3, None, None, ctx.clock.now, ()))
    ]
    assert ctx.leave("x", group_id="missing").error_code == ErrorCode.unknown_member_id


def test_a_static_member_restart_replaces_its_old_id_without_a_rebalance():
    ctx = Context()
    a = ctx.join_new(instance="i-a")
    b = ctx.join_new(instance="i-b")
    ctx.advance(0)
    old_a, mb = a.answer.member_id, b.answer.member_id
    ctx.sync(mb, 1)
    ctx.sync(old_a, 1, assignments=[(old_a, b"pa"), (mb, b"pb")])
    ctx.take_written()
    # i-a restarts: it comes back with no member id but the same instance id and protocols.
    back = ctx.join(instance="i-a")
    new_a = back.answer.member_id
    assert back.answer.error_code == NONE and new_a != old_a
    assert back.answer.generation_id == 1 and back.answer.skip_assignment  # it was the leader
    group = ctx.group()
    assert group.state is S.STABLE and group.leader_id == new_a and group.static_member_id("i-a") == new_a
    assert ctx.take_written() == [
        Record(
            GroupMetadataKey("g"),
            GroupMetadataValue(
                "consumer", 1, "range", new_a, group.state_timestamp,
                (
                    MemberMetadata(mb, "i-b", "client", "/127.0.0.1", 30_000, 10_000, b"range-meta", b"pb"),
                    MemberMetadata(new_a, "i-a", "client", "/127.0.0.1", 30_000, 10_000, b"range-meta", b"pa"),
                ),
            ),
        )
    ]
    # The old incarnation is fenced wherever it shows up.
    assert ctx.heartbeat(old_a, 1, instance="i-a").error_code == ErrorCode.fenced_instance_id
    assert ctx.sync(old_a, 1, instance="i-a").answer.error_code == ErrorCode.fenced_instance_id
    assert ctx.sync(new_a, 1, instance="i-a").answer.assignment == b"pa"


def test_static_member_parked_old_incarnation_is_fenced_when_replaced_mid_rebalance():
    ctx = Context()
    a = ctx.join_new()
    b = ctx.join_new(instance="i-b")
    ctx.advance(0)
    ma, old_b = a.answer.member_id, b.answer.member_id
    assert ctx.group().leader_id == ma
    parked_sync = ctx.sync(old_b, 1, instance="i-b")  # a follower waits for the leader's assignment
    assert parked_sync.parked
    # The follower's process restarts while its old SyncGroup is still parked (CompletingRebalance).
    back = ctx.join(instance="i-b")
    assert parked_sync.answer.error_code == ErrorCode.fenced_instance_id
    # The leader may already be assigning to the old id: the group rebalances.
    assert ctx.group().state is S.PREPARING_REBALANCE and back.parked
    ctx.join(member_id=ma)
    assert back.answer.generation_id == 2 and back.answer.member_id != old_b


def test_static_members_survive_a_missed_rebalance_dynamic_ones_do_not():
    ctx = Context()
    s = ctx.join_new(instance="i-s")
    d = ctx.join_new()
    ctx.advance(0)
    ms, md = s.answer.member_id, d.answer.member_id
    ctx.sync(md, 1)
    ctx.sync(ms, 1, assignments=[(ms, b"1"), (md, b"2")])
    newcomer = ctx.join_new()
    for _ in range(10):
        ctx.advance(3_000)  # nobody rejoins, but the static member keeps heartbeating
        ctx.heartbeat(ms, 1, instance="i-s")
    group = ctx.group()
    assert ms in group.members and md not in group.members
    assert newcomer.answer.generation_id == 2 and group.leader_id == newcomer.answer.member_id


def test_share_group_id_cannot_be_joined_as_classic():
    ctx = Context()
    ctx.shard.groups["shared"] = object()  # any non-classic group, as a share group will be
    assert ctx.join("shared").response.error_code == ErrorCode.inconsistent_group_protocol
