"""Offsets (commit, fetch, retention), DescribeGroups/ListGroups/DeleteGroups, and load after failover."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.state import ClassicGroupState as S
from kernel.codec import Record
from coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
)
from coordinator.shard import GroupCoordinatorShard
from tests.unit.classic.context import Context
from tests.unit.classic.test_rebalance_scenarios import stable_group_of

NONE = ErrorCode.none
DAY = 24 * 3600 * 1000


def errors(response) -> dict[tuple[str, int], ErrorCode]:
    return {(t, p): e for t, parts in response.topics for p, e in parts}


def test_members_commit_within_their_generation():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    ok = ctx.commit({("t", 0): 10, ("t", 1): 20}, member_id=m1, generation=1, metadata="m")
    assert set(errors(ok).values()) == {NONE}
    now = ctx.clock.now
    assert ctx.take_written() == [
        Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, -1, "m", now)),
        Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(20, -1, "m", now)),
    ]
    assert set(errors(ctx.commit({("t", 0): 11}, member_id=m1, generation=0)).values()) == {ErrorCode.illegal_generation}
    assert set(errors(ctx.commit({("t", 0): 11}, member_id="ghost", generation=1)).values()) == {ErrorCode.unknown_member_id}
    # A client outside group management cannot commit into a live group.
    assert set(errors(ctx.commit({("t", 0): 11})).values()) == {ErrorCode.unknown_member_id}
    assert ctx.take_written() == []
    fetched = ctx.fetch(topics=(("t", (0, 1, 2)),))
    assert [(o.partition, o.offset, o.metadata) for o in fetched.topics[0][1]] == [(0, 10, "m"), (1, 20, "m"), (2, -1, "")]
    everything = ctx.fetch(topics=None)
    assert [(t, [o.offset for o in parts]) for t, parts in everything.topics] == [("t", [10, 20])]


def test_commit_during_completing_rebalance_is_refused_with_rebalance_in_progress():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    ctx.join_new()
    ctx.join(member_id=m1)
    ctx.join(member_id=m2)
    assert ctx.group().state is S.COMPLETING_REBALANCE
    assert set(errors(ctx.commit({("t", 0): 1}, member_id=m1, generation=2)).values()) == {ErrorCode.rebalance_in_progress}


def test_simple_consumer_commits_create_an_empty_group_and_unknown_groups_are_versioned():
    ctx = Context()
    assert set(errors(ctx.commit({("t", 0): 5}, group_id="simple")).values()) == {NONE}
    group = ctx.group("simple")
    assert group.state is S.EMPTY and group.protocol_type is None
    assert ctx.fetch("simple", (("t", (0,)),)).topics[0][1][0].offset == 5
    assert set(errors(ctx.commit({("t", 0): 5}, member_id="m", generation=3, group_id="nope")).values()) == {
        ErrorCode.group_id_not_found
    }
    old = ctx.commit({("t", 0): 5}, member_id="m", generation=3, group_id="nope", api_version=8)
    assert set(errors(old).values()) == {ErrorCode.illegal_generation}
    unknown = ctx.fetch("never", (("t", (0,)),))
    assert unknown.error_code == NONE and unknown.topics[0][1][0].offset == -1


def test_offset_metadata_too_large():
    ctx = Context(offset_metadata_max_bytes=4)
    response = ctx.commit({("t", 0): 1}, metadata="12345", group_id="s")
    assert errors(response) == {("t", 0): ErrorCode.offset_metadata_too_large}


def test_offsets_of_an_empty_group_expire_after_retention_and_then_the_group_goes():
    ctx = Context(offsets_retention_ms=7 * DAY, offsets_retention_check_interval_ms=DAY)
    ctx.run(ctx.shard.on_loaded())  # arms the periodic cleanup, as the runtime does on load
    (m1,) = stable_group_of(ctx, 1)
    ctx.commit({("t", 0): 42}, member_id=m1, generation=1)
    for _ in range(3):  # a live group keeps its offsets however old they are
        ctx.clock.advance(2_000)
        ctx.heartbeat(m1, 1)
    ctx.leave(m1)
    assert ctx.group().state is S.EMPTY
    became_empty = ctx.clock.now
    ctx.take_written()
    ctx.advance(7 * DAY - 1)
    assert ctx.fetch(topics=(("t", (0,)),)).topics[0][1][0].offset == 42
    assert ctx.clock.now - became_empty < 7 * DAY
    ctx.advance(DAY)  # the next cleanup after 7 days of emptiness
    assert ctx.fetch(topics=(("t", (0,)),)).topics[0][1][0].offset == -1
    assert ctx.group() is None
    assert ctx.take_written() == [Record(OffsetCommitKey("g", "t", 0), None), Record(GroupMetadataKey("g"), None)]


def test_simple_group_offsets_expire_from_their_commit_and_old_clients_retention():
    ctx = Context(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    ctx.run(ctx.shard.on_loaded())
    ctx.commit({("t", 0): 1}, group_id="simple")
    ctx.commit({("t", 1): 1}, group_id="short", retention=3_000)  # OffsetCommit v2-v4 retention
    ctx.advance(3_000)
    assert ctx.group("short") is None and ctx.group("simple") is not None
    ctx.advance(7_000)
    assert ctx.group("simple") is None


def test_describe_list_and_delete_groups():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    ctx.commit({("t", 0): 1}, group_id="idle")
    (described, missing) = ctx.run(ctx.shard.describe_groups(("g", "missing")))
    assert (described.state, described.protocol_type, described.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.assignment) for m in described.members] == [(m1, f"a-{m1}".encode()), (m2, f"a-{m2}".encode())]
    assert described.members[0].metadata == b"range-meta"
    # Kafka's GroupIdNotFoundException: Dead, with the error and message DescribeGroups v6 answers
    # (the gateway drops them below v6).
    assert (missing.state, missing.error_code, missing.error_message) == ("Dead", ErrorCode.group_id_not_found, "Group missing not found.")
    listed = ctx.run(ctx.shard.list_groups())
    assert [(g.group_id, g.state, g.protocol_type, g.group_type) for g in listed] == [
        ("g", "Stable", "consumer", "classic"),
        ("idle", "Empty", "", "classic"),
    ]
    assert [g.group_id for g in ctx.run(ctx.shard.list_groups(states=("empty",)))] == ["idle"]
    assert ctx.run(ctx.shard.list_groups(types=("share",))) == []
    ctx.take_written()
    deleted = ctx.run(ctx.shard.delete_groups(("g", "idle", "missing")))
    assert [(d.group_id, d.error_code) for d in deleted] == [
        ("g", ErrorCode.non_empty_group),
        ("idle", NONE),
        ("missing", ErrorCode.group_id_not_found),
    ]
    assert ctx.take_written() == [Record(OffsetCommitKey("idle", "t", 0), None), Record(GroupMetadataKey("idle"), None)]
    assert ctx.group("idle") is None and ctx.fetch("idle", (("t", (0,)),)).topics[0][1][0].offset == -1


def test_load_rebuilds_groups_and_offsets_and_restarts_sessions_from_load_time():
    """Failover (SPEC §1): a new leader replays the log; healthy members keep their generation."""
    live = Context()
    log = _everything_written(live)
    before = live.shard.durable_view()

    # A fresh shard replays the log: the group is Stable with the same generation and assignment.
    ctx3 = Context()
    for record in log:
        ctx3.shard.replay(record)
    ctx3.run(ctx3.shard.on_loaded())
    assert ctx3.shard.durable_view() == before
    group = ctx3.group()
    members = list(group.members)
    assert group.state is S.STABLE and group.generation_id == 1
    # Sessions restart from load time: heartbeating members stay, with no rebalance.
    for _ in range(5):
        ctx3.advance(5_000)
        assert all(ctx3.heartbeat(m, 1).error_code == NONE for m in members)
    assert ctx3.group().generation_id == 1 and ctx3.group().state is S.STABLE
    # A member that never heartbeats again after the failover is removed one session after load.
    ctx3.advance(5_000)
    ctx3.heartbeat(members[0], 1)
    ctx3.advance(5_000)
    assert ctx3.group().state is S.PREPARING_REBALANCE and members[1] not in ctx3.group().members


def _everything_written(ctx: Context) -> list[Record]:
    joins = [ctx.join_new() for _ in range(2)]
    ctx.advance(0)
    m1, m2 = (j.answer.member_id for j in joins)
    ctx.sync(m2, 1)
    ctx.sync(m1, 1, assignments=[(m1, b"a"), (m2, b"b")])
    ctx.commit({("t", 0): 7}, member_id=m1, generation=1)
    ctx.commit({("t", 3): 9}, group_id="simple")
    return ctx.take_written()


def test_the_shard_needs_nothing_but_its_injected_clock():
    ctx = Context()
    shard = GroupCoordinatorShard(("__consumer_offsets", 1), ctx.clock, config=ctx.config, new_member_id=str)
    assert shard.groups == {} and shard.offsets == {}
