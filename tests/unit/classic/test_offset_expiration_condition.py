"""Offsets of topics a Stable consumer group no longer subscribes to expire (KIP-496; Kafka 4.x
ClassicGroup.offsetExpirationCondition's third branch, isSubscribedToTopic, computeSubscribedTopics,
and OffsetMetadataManager.cleanupExpiredOffsets)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import JoinGroupRequest
from coordinator.classic.records import group_tombstone, offset_tombstone
from coordinator.classic.state import ClassicGroupState as S
from coordinator.shard import GroupCoordinatorShard
from tests.unit.classic.context import Context
from tests.unit.test_offset_delete import stable_group, subscription

RETENTION = 60_000


def cleanup(ctx: Context) -> list:
    ctx.run(ctx.shard.cleanup_offsets())
    return ctx.take_written()


def live_for(ctx: Context, ms: int, member: str, generation: int = 1, step: int = 5_000) -> None:
    """Let time pass with the member heartbeating (session timeout 10 s)."""
    for _ in range(ms // step):
        ctx.advance(step)
        assert ctx.heartbeat(member, generation).error_code == ErrorCode.none


def subscribed_to_foo(committed: dict[tuple[str, int], int]) -> tuple[Context, str, list]:
    """A Stable group subscribed to "foo" that committed `committed` (the records written) and has
    lived a retention period since."""
    ctx = Context(offsets_retention_ms=RETENTION)
    member = stable_group(ctx, "foo")
    ctx.commit(committed, member_id=member, generation=1)
    written = ctx.take_written()
    live_for(ctx, RETENTION, member)
    return ctx, member, written


def offsets(ctx: Context, group_id: str = "g") -> dict[tuple[str, int], int]:
    return {k: v.offset for k, v in ctx.shard.offsets.get(group_id, {}).items()}


def test_a_stable_groups_offsets_of_topics_it_no_longer_subscribes_to_expire_from_their_commit():
    ctx = Context(offsets_retention_ms=RETENTION)
    member = stable_group(ctx, "foo")
    ctx.commit({("foo", 0): 5, ("bar", 0): 3, ("bar", 1): 4}, member_id=member, generation=1)
    ctx.take_written()
    live_for(ctx, RETENTION - 5_000, member)
    assert cleanup(ctx) == []  # not yet: retention counts from the commit
    ctx.commit({("foo", 0): 6}, member_id=member, generation=1)  # the subscribed topic is committed again
    ctx.take_written()
    live_for(ctx, 5_000, member)
    assert cleanup(ctx) == [offset_tombstone("g", "bar", 0), offset_tombstone("g", "bar", 1)]
    assert offsets(ctx) == {("foo", 0): 6}
    assert ctx.group().is_in(S.STABLE)  # the group has members: it stays
    fetched = ctx.fetch(topics=(("bar", (0, 1)),))
    assert [p.offset for p in fetched.topics[0][1]] == [-1, -1]  # a re-subscription starts afresh
    # A subscribed topic's offset never expires while the group is Stable.
    live_for(ctx, 3 * RETENTION, member)
    assert cleanup(ctx) == [] and offsets(ctx) == {("foo", 0): 6}


def test_the_subscriptions_are_the_union_of_every_members_of_the_chosen_protocol():
    ctx = Context(offsets_retention_ms=RETENTION)
    protocols = lambda *topics: (("range", subscription(*topics)), ("roundrobin", subscription("baz")))  # noqa: E731
    first, second = ctx.join_new(protocols=protocols("foo")), ctx.join_new(protocols=protocols("bar"))
    ctx.advance(0)
    m1, m2 = first.answer.member_id, second.answer.member_id
    ctx.sync(m2, 1)
    ctx.sync(m1, 1, assignments=[(m1, b""), (m2, b"")])
    assert ctx.group().protocol_name == "range"
    ctx.commit({("foo", 0): 1, ("bar", 0): 2, ("baz", 0): 3}, member_id=m1, generation=1)
    ctx.take_written()
    for _ in range(RETENTION // 5_000):
        ctx.advance(5_000)
        ctx.heartbeat(m1, 1), ctx.heartbeat(m2, 1)
    assert cleanup(ctx) == [offset_tombstone("g", "baz", 0)]


def test_explicit_retention_of_an_unsubscribed_topic_counts_from_the_commit_request():
    """OffsetCommit v2-v4: the offset's own expire timestamp decides, as for Empty groups."""
    ctx = Context(offsets_retention_ms=RETENTION)
    member = stable_group(ctx, "foo")
    ctx.commit({("bar", 0): 3}, member_id=member, generation=1, retention=10_000, api_version=2)
    ctx.commit({("foo", 0): 3}, member_id=member, generation=1, retention=10_000, api_version=2)
    ctx.take_written()
    live_for(ctx, 10_000, member)
    assert cleanup(ctx) == [offset_tombstone("g", "bar", 0)]


def test_a_group_whose_subscriptions_cannot_be_known_keeps_its_offsets():
    """Metadata that does not parse, or another protocol type than "consumer": no expiration condition."""
    ctx = Context(offsets_retention_ms=RETENTION)
    joined = ctx.join_new(protocols=(("range", b"\x00"),))
    ctx.advance(0)
    member = joined.answer.member_id
    ctx.sync(member, 1, assignments=[(member, b"")])
    ctx.commit({("bar", 0): 3}, member_id=member, generation=1)
    ctx.run(ctx.shard.join_group(
        JoinGroupRequest("c", 10_000, 30_000, "", None, "connect", (("default", subscription("foo")),),
                         requires_known_member_id=False), 99
    ))
    ctx.advance(0)
    connect = ctx.answers[99].member_id
    ctx.sync(connect, 1, group_id="c", protocol_type="connect", assignments=[(connect, b"")])
    assert ctx.group("c").is_in(S.STABLE)
    ctx.commit({("bar", 0): 3}, member_id=connect, generation=1, group_id="c")
    ctx.take_written()
    for _ in range(2 * RETENTION // 5_000):
        ctx.advance(5_000)
        ctx.heartbeat(member, 1), ctx.heartbeat(connect, 1, group_id="c")
    assert cleanup(ctx) == []
    assert offsets(ctx) == {("bar", 0): 3} and offsets(ctx, "c") == {("bar", 0): 3}


def test_a_rebalancing_group_keeps_every_offset():
    ctx, member, _ = subscribed_to_foo({("bar", 0): 3})
    joining = ctx.join_new(protocols=(("range", subscription("foo")),))  # PreparingRebalance
    assert ctx.group().is_in(S.PREPARING_REBALANCE)
    assert cleanup(ctx) == []
    ctx.join(member_id=member, protocols=(("range", subscription("foo")),))
    assert ctx.group().is_in(S.COMPLETING_REBALANCE) and not joining.parked
    assert cleanup(ctx) == []
    assert offsets(ctx) == {("bar", 0): 3}


def test_subscriptions_are_known_again_after_the_partition_loads():
    """Kafka's replay of GroupMetadata computes the subscribed topics of the loaded group."""
    ctx = Context(offsets_retention_ms=RETENTION)
    log: list = []
    run = ctx.run
    ctx.run = lambda result: (log.extend(result.records), run(result))[1]  # keep every record
    member = stable_group(ctx, "foo")
    ctx.commit({("foo", 0): 5, ("bar", 0): 3}, member_id=member, generation=1)
    loaded = Context(offsets_retention_ms=RETENTION)
    loaded.clock.advance(ctx.clock.now - loaded.clock.now + RETENTION)
    for record in log:
        if not type(record.key).__name__.endswith("StateKey"):  # only what the log holds
            loaded.shard.replay(record)
    assert loaded.group().is_in(S.STABLE)
    assert cleanup(loaded) == [offset_tombstone("g", "bar", 0)]


def test_an_empty_group_left_without_offsets_is_deleted_and_a_stable_one_is_not():
    ctx, member, _ = subscribed_to_foo({("bar", 0): 3})
    assert cleanup(ctx) == [offset_tombstone("g", "bar", 0)]
    assert ctx.group() is not None
    ctx.leave(member)
    ctx.take_written()
    assert cleanup(ctx) == [group_tombstone("g")]
    assert ctx.group() is None


def test_the_cleanup_replays_to_the_same_state():
    ctx, _, written = subscribed_to_foo({("foo", 0): 5, ("bar", 0): 3})
    written += cleanup(ctx)
    shard = GroupCoordinatorShard(("__consumer_offsets", 0), ctx.clock, config=ctx.config)
    for record in written:
        shard.replay(record)
    assert shard.offsets == ctx.shard.offsets == {"g": {("foo", 0): ctx.shard.offsets["g"][("foo", 0)]}}
