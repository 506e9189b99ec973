"""The rebalance scenarios of seeds 000/002/004, walked with a manual clock.

Each test asserts the group's state at each step, what each member is answered, and the exact
durable records written (Kafka's assertRecordsEquals).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.state import ClassicGroupState as S
from kernel.codec import Record
from coordinator.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from tests.unit.classic.context import Context

NONE = ErrorCode.none


def metadata_record(generation: int, leader: str | None, members: list[tuple[str, bytes]], ts: int,
                    protocol: str | None = "range", instances: dict[str, str] | None = None) -> Record:
    instances = instances or {}
    return Record(
        GroupMetadataKey("g"),
        GroupMetadataValue(
            protocol_type="consumer",
            generation=generation,
            protocol=protocol,
            leader=leader,
            current_state_timestamp=ts,
            members=tuple(
                MemberMetadata(m, instances.get(m), "client", "/127.0.0.1", 30_000, 10_000, b"range-meta", a)
                for m, a in members
            ),
        ),
    )


def stable_group_of(ctx: Context, n: int) -> list[str]:
    """n members in generation 1, Stable, the first one leading; records cleared."""
    joins = [ctx.join_new() for _ in range(n)]
    ctx.advance(0)  # the initial delayed join (delay 0 here) completes
    members = [j.answer.member_id for j in joins]
    leader = joins[0].answer.leader
    assert leader == members[0]
    follower_syncs = [ctx.sync(m, 1) for m in members if m != leader]
    ctx.sync(leader, 1, assignments=[(m, f"a-{m}".encode()) for m in members])
    assert all(s.answer.error_code == NONE for s in follower_syncs)
    assert ctx.group().state is S.STABLE
    ctx.take_written()
    return members


def test_two_members_join_one_after_the_other():
    """Seed 004 example one: Stable -> PreparingRebalance -> CompletingRebalance -> Stable, twice."""
    ctx = Context()
    t0 = ctx.clock.now
    first = ctx.join()
    assert first.response.error_code == ErrorCode.member_id_required
    m1 = first.response.member_id
    # Creating the group commits an empty GroupMetadata record (Kafka does the same).
    assert ctx.take_written() == [
        Record(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, t0, ()))
    ]
    j1 = ctx.join(member_id=m1)
    assert j1.parked and ctx.group().state is S.PREPARING_REBALANCE
    ctx.advance(0)  # InitialDelayedJoin expires
    assert ctx.group().state is S.COMPLETING_REBALANCE and ctx.group().generation_id == 1
    answer = j1.answer
    assert (answer.error_code, answer.generation_id, answer.leader, answer.protocol_name) == (NONE, 1, m1, "range")
    assert [m.member_id for m in answer.members] == [m1]
    s1 = ctx.sync(m1, 1, assignments=[(m1, b"p0,p1")])
    assert ctx.group().state is S.STABLE
    assert s1.answer.assignment == b"p0,p1"
    assert ctx.take_written() == [metadata_record(1, m1, [(m1, b"p0,p1")], ctx.clock.now)]

    # The second member: Stable -> PreparingRebalance; the DelayedJoin waits for the first to rejoin.
    j2 = ctx.join_new()
    m2 = j2.ctx.group().members and list(ctx.group().members)[1]
    assert j2.parked and ctx.group().state is S.PREPARING_REBALANCE
    assert ctx.heartbeat(m1, 1).error_code == ErrorCode.rebalance_in_progress
    rejoin = ctx.join(member_id=m1)
    assert ctx.group().state is S.COMPLETING_REBALANCE and ctx.group().generation_id == 2
    assert [m.member_id for m in rejoin.answer.members] == [m1, m2]  # the leader sees everyone
    assert j2.answer.members == () and j2.answer.leader == m1 and j2.answer.generation_id == 2
    follower = ctx.sync(m2, 2)
    assert follower.parked
    ctx.sync(m1, 2, assignments=[(m1, b"p0"), (m2, b"p1")])
    assert ctx.group().state is S.STABLE
    assert follower.answer.assignment == b"p1"
    assert ctx.take_written() == [metadata_record(2, m1, [(m1, b"p0"), (m2, b"p1")], ctx.clock.now)]


def test_a_member_joining_during_completing_rebalance_sends_parked_syncs_back_to_join():
    """Seed 004 example two / SPEC §2: the old SyncGroup gets REBALANCE_IN_PROGRESS."""
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    ctx.join(member_id=m2, protocols=(("roundrobin", b"rr-meta"),))  # m2 changes its metadata
    rejoin = ctx.join(member_id=m1)
    assert ctx.group().state is S.COMPLETING_REBALANCE and ctx.group().generation_id == 2
    parked_sync = ctx.sync(m2, 2)
    assert parked_sync.parked
    newcomer = ctx.join_new()
    # The newcomer turned the group back to PreparingRebalance and every parked SyncGroup is answered.
    assert ctx.group().state is S.PREPARING_REBALANCE
    assert parked_sync.answer.error_code == ErrorCode.rebalance_in_progress
    assert ctx.sync(m1, 2, assignments=[(m1, b"x")]).answer.error_code == ErrorCode.rebalance_in_progress
    assert ctx.take_written() == []  # nothing durable happened: generation 2 was never stored
    assert rejoin.answer.generation_id == 2 and newcomer.parked


def test_a_follower_that_missed_its_join_response_gets_it_again():
    """Seed 004 figure 5-20/5-21: the same generation, no rebalance, in CompletingRebalance and Stable."""
    ctx = Context()
    joins = [ctx.join_new() for _ in range(3)]
    ctx.advance(0)
    m1, m2, m3 = (j.answer.member_id for j in joins)
    again = ctx.join(member_id=m3)  # it never saw its answer and asks again
    assert again.answer.generation_id == 1 and again.answer.members == ()
    assert ctx.group().state is S.COMPLETING_REBALANCE
    ctx.sync(m2, 1)
    ctx.sync(m1, 1, assignments=[(m1, b"a"), (m2, b"b"), (m3, b"c")])
    ctx.take_written()
    # Stable now; m3 still missed everything: its rejoin returns the generation at once, then its sync.
    assert ctx.group().state is S.STABLE
    again = ctx.join(member_id=m3)
    assert (again.answer.error_code, again.answer.generation_id, again.answer.leader) == (NONE, 1, m1)
    assert ctx.sync(m3, 1).answer.assignment == b"c"
    assert ctx.group().state is S.STABLE and ctx.take_written() == []


def test_a_leader_that_missed_its_join_response_keeps_the_group_completing_until_it_rejoins():
    """Seed 004 last figure: followers wait in SyncGroup; the leader rejoins, assigns, all are answered."""
    ctx = Context()
    joins = [ctx.join_new() for _ in range(3)]
    ctx.advance(0)
    m1, m2, m3 = (j.answer.member_id for j in joins)
    ctx.take_written()
    parked = [ctx.sync(m2, 1), ctx.sync(m3, 1)]
    assert all(p.parked for p in parked)
    ctx.advance(5_000)  # time passes; nobody's session is lost while parked
    assert ctx.group().state is S.COMPLETING_REBALANCE
    again = ctx.join(member_id=m1)
    assert again.answer.generation_id == 1 and [m.member_id for m in again.answer.members] == [m1, m2, m3]
    ctx.sync(m1, 1, assignments=[(m1, b"a"), (m2, b"b")])  # m3 left out: an empty assignment
    assert [p.answer.assignment for p in parked] == [b"b", b""]
    assert ctx.group().state is S.STABLE
    assert ctx.take_written() == [metadata_record(1, m1, [(m1, b"a"), (m2, b"b"), (m3, b"")], ctx.clock.now)]


def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    for _ in range(3):  # m1 heartbeats every 3 s, m2 is silent
        ctx.advance(3_000)
        assert ctx.heartbeat(m1, 1).error_code == NONE
    ctx.advance(999)
    assert ctx.group().has_member(m2)  # 9 999 ms since its last sign of life
    ctx.advance(1)
    assert not ctx.group().has_member(m2) and ctx.group().state is S.PREPARING_REBALANCE
    assert ctx.heartbeat(m1, 1).error_code == ErrorCode.rebalance_in_progress
    rejoin = ctx.join(member_id=m1)
    assert rejoin.answer.generation_id == 2 and [m.member_id for m in rejoin.answer.members] == [m1]
    ctx.sync(m1, 2, assignments=[(m1, b"all")])
    assert ctx.take_written() == [metadata_record(2, m1, [(m1, b"all")], ctx.clock.now)]


def test_the_rebalance_timeout_removes_members_that_did_not_rejoin():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    newcomer = ctx.join_new()
    m3 = list(ctx.group().members)[2]
    ctx.join(member_id=m1)
    assert ctx.group().state is S.PREPARING_REBALANCE  # m2 has not rejoined
    for _ in range(9):  # m2 keeps heartbeating but never rejoins
        ctx.advance(3_000)
        assert ctx.heartbeat(m2, 1).error_code == ErrorCode.rebalance_in_progress
    ctx.advance(3_000)  # 30 s: the rebalance timeout
    group = ctx.group()
    assert group.state is S.COMPLETING_REBALANCE and group.generation_id == 2
    assert list(group.members) == [m1, m3]
    assert newcomer.answer.generation_id == 2
    assert ctx.heartbeat(m2, 1).error_code == ErrorCode.unknown_member_id


def test_initial_delayed_join_waits_and_extends_while_members_arrive():
    ctx = Context(initial_rebalance_delay_ms=3_000)
    a = ctx.join_new()
    ctx.advance(2_000)
    b = ctx.join_new()  # arrives during the delay: the delay is extended once more
    ctx.advance(1_000)
    assert a.parked and b.parked and ctx.group().state is S.PREPARING_REBALANCE
    ctx.advance(2_999)
    assert a.parked  # everyone joined, but an initial delayed join completes only on its timer
    ctx.advance(1)
    assert a.answer.generation_id == b.answer.generation_id == 1
    assert len(a.answer.members) == 2 and b.answer.members == ()


def test_initial_delay_is_bounded_by_the_rebalance_timeout():
    ctx = Context(initial_rebalance_delay_ms=3_000)
    first = ctx.join_new(rebalance=7_000)
    for _ in range(5):  # a member every 2 s would extend forever; the rebalance timeout caps it
        ctx.advance(2_000)
        if first.parked:
            ctx.join_new(rebalance=7_000)
    assert not first.parked
    assert first.answer.generation_id == 1


def test_members_that_never_send_sync_group_are_removed():
    ctx = Context()
    joins = [ctx.join_new() for _ in range(2)]
    ctx.advance(0)
    m1, m2 = (j.answer.member_id for j in joins)
    ctx.sync(m1, 1, assignments=[(m1, b"a"), (m2, b"b")])
    assert ctx.group().state is S.STABLE
    for _ in range(9):  # both stay alive; m2 never sends its SyncGroup
        ctx.advance(3_000)
        assert ctx.heartbeat(m1, 1).error_code == ctx.heartbeat(m2, 1).error_code == NONE
    ctx.advance(2_999)
    assert ctx.group().has_member(m2)
    ctx.advance(1)  # the rebalance timeout since the join completed
    assert not ctx.group().has_member(m2) and ctx.group().state is S.PREPARING_REBALANCE
