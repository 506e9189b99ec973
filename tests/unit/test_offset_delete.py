"""OffsetDelete on the group coordinator shard (Kafka 4.x OffsetMetadataManager.deleteOffsets and
ClassicGroup.validateOffsetDelete / isSubscribedToTopic), under a manual clock, no Ray."""

from __future__ import annotations

import struct

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import JoinGroupRequest
from coordinator.classic.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse, parse_subscription_topics
from coordinator.classic.records import offset_tombstone
from coordinator.shard import GroupCoordinatorShard
from tests.unit.classic.context import Context
from tests.unit.share.context import ShareContext, topic

NONE = ErrorCode.none


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription: version, topics, user data (null) and, from v1, owned partitions."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        out += struct.pack(">i", 0)
    return out


def stable_group(ctx: Context, *topics: str) -> str:
    """One member in generation 1, Stable, subscribed to `topics` with the range protocol."""
    protocols = (("range", subscription(*topics)),)
    joined = ctx.join_new(protocols=protocols)
    ctx.advance(0)
    member = joined.answer.member_id
    ctx.sync(member, 1, assignments=[(member, b"")])
    ctx.take_written()
    return member


def delete(ctx, group_id: str = "g", **topics: tuple[int, ...]) -> OffsetDeleteResponse:
    return ctx.run(ctx.shard.delete_offsets(OffsetDeleteRequest(group_id, tuple(topics.items()))))


def committed(ctx: Context, group_id: str = "g") -> dict[tuple[str, int], int]:
    return {k: v.offset for k, v in ctx.shard.offsets.get(group_id, {}).items()}


def rebuilt(ctx: Context, written) -> GroupCoordinatorShard:
    shard = GroupCoordinatorShard(("__consumer_offsets", 0), ctx.clock, config=ctx.config)
    for record in written:
        shard.replay(record)
    return shard


def test_an_empty_group_loses_the_offsets_named_and_keeps_the_others():
    ctx = Context()
    member = stable_group(ctx, "foo")
    ctx.commit({("foo", 0): 5, ("foo", 1): 7, ("bar", 0): 3}, member_id=member, generation=1)
    ctx.leave(member)
    log = ctx.take_written()

    response = delete(ctx, foo=(0, 1, 2))
    assert response == OffsetDeleteResponse(NONE, (("foo", ((0, NONE), (1, NONE), (2, NONE))),))
    # Only offsets that exist are tombstoned; partition 2 had none.
    written = ctx.take_written()
    assert written == [offset_tombstone("g", "foo", 0), offset_tombstone("g", "foo", 1)]
    assert committed(ctx) == {("bar", 0): 3}
    fetched = ctx.fetch(topics=(("foo", (0, 1)),))
    assert [o.offset for o in fetched.topics[0][1]] == [-1, -1]
    # The group stays (expiry deletes groups without offsets, OffsetDelete does not).
    assert ctx.group() is not None
    assert rebuilt(ctx, log + written).offsets == ctx.shard.offsets


def test_a_live_consumer_group_refuses_the_topics_it_subscribes_to_and_deletes_the_others():
    ctx = Context()
    member = stable_group(ctx, "foo")
    ctx.commit({("foo", 0): 5, ("bar", 0): 3}, member_id=member, generation=1)
    ctx.take_written()

    response = delete(ctx, foo=(0,), bar=(0,))
    assert response == OffsetDeleteResponse(
        NONE, (("foo", ((0, ErrorCode.group_subscribed_to_topic),)), ("bar", ((0, NONE),)))
    )
    assert ctx.take_written() == [offset_tombstone("g", "bar", 0)]
    assert committed(ctx) == {("foo", 0): 5}


def test_a_subscription_that_does_not_parse_counts_as_subscribed_to_everything():
    ctx = Context()
    joined = ctx.join_new(protocols=(("range", b"\x00"),))
    ctx.advance(0)
    member = joined.answer.member_id
    ctx.sync(member, 1, assignments=[(member, b"")])
    ctx.commit({("bar", 0): 3}, member_id=member, generation=1)
    ctx.take_written()
    assert delete(ctx, bar=(0,)).topics == (("bar", ((0, ErrorCode.group_subscribed_to_topic),)),)
    assert ctx.take_written() == []


def test_a_live_group_of_another_protocol_type_is_not_empty():
    ctx = Context()
    first = ctx.run(ctx.shard.join_group(
        JoinGroupRequest("g", 10_000, 30_000, "", None, "connect", (("default", b"x"),), requires_known_member_id=False), 1
    ))
    ctx.advance(0)
    assert ctx.answers.get(1, first).error_code == NONE
    assert delete(ctx, foo=(0,)) == OffsetDeleteResponse(ErrorCode.non_empty_group)


def test_unknown_groups_and_share_groups_are_not_found():
    ctx = Context()
    assert delete(ctx, "nope", foo=(0,)) == OffsetDeleteResponse(ErrorCode.group_id_not_found)
    share = ShareContext(topic("foo", 1))
    share.join("m1", ["foo"])
    assert delete(share, "g", foo=(0,)) == OffsetDeleteResponse(ErrorCode.group_id_not_found)


def test_a_simple_group_of_committed_offsets_loses_them():
    ctx = Context()
    ctx.commit({("foo", 0): 1}, group_id="simple")
    ctx.take_written()
    assert delete(ctx, "simple", foo=(0,)) == OffsetDeleteResponse(NONE, (("foo", ((0, NONE),)),))
    assert ctx.take_written() == [offset_tombstone("simple", "foo", 0)]
    assert committed(ctx, "simple") == {}


def test_subscriptions_parse_as_version_0_whatever_their_version():
    assert parse_subscription_topics(subscription("a", "b", version=0)) == {"a", "b"}
    assert parse_subscription_topics(subscription("a", version=3)) == {"a"}
    assert parse_subscription_topics(b"\x00\x01\x00\x00\x00\x05") is None
    assert parse_subscription_topics(b"") is None
