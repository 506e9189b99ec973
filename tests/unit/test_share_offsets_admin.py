"""AlterShareGroupOffsets and DeleteShareGroupOffsets on the group coordinator shard (Kafka 4.x
GroupCoordinatorShard.alterShareGroupOffsets, initiate/completeDeleteShareGroupOffsets), under a
manual clock, no Ray: the records each step writes and the share state it asks the cluster for."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.records import share_state_partition_metadata_record
from coordinator.share.messages import ShareStateDelete, ShareStateInit, ShareStateInitResult
from coordinator.share.offsets_admin import (
    NO_OFFSET_INFORMATION,
    AlteredPartition,
    AlteredTopic,
    AlterShareOffsetsRequest,
    CompleteShareOffsetsDelete,
    DeletedShareTopic,
    DeleteShareOffsetsRequest,
    ShareOffsetsInitialized,
)
from coordinator.share.partition_metadata import InitMapValue
from tests.unit.share.context import BAR, FOO, ShareContext, topic

NONE = ErrorCode.none
UNKNOWN = ErrorCode.unknown_topic_or_partition


def empty_group_with_state(ctx: ShareContext, topics=("foo",)) -> None:
    ctx.join("m1", list(topics))
    ctx.initialize()
    ctx.heartbeat("m1", ctx.member("m1").member_epoch)
    ctx.leave("m1")
    ctx.take_written()


def alter(ctx: ShareContext, group_id: str = "g", **topics: dict[int, int]):
    req = AlterShareOffsetsRequest(group_id, tuple((t, tuple(ps.items())) for t, ps in topics.items()))
    return ctx.run(ctx.shard.alter_share_group_offsets(req))


def initiate(ctx: ShareContext, *topics: str, group_id: str = "g"):
    return ctx.run(ctx.shard.share_offsets_delete_initiate(DeleteShareOffsetsRequest(group_id, topics)))


def test_alter_on_an_empty_group_initializes_the_partitions_again_with_the_new_start_offsets():
    ctx = ShareContext(topic("foo", 3))
    empty_group_with_state(ctx)
    epoch = ctx.group().group_epoch
    initialized_before = ctx.group().share_state.initialized

    outcome = alter(ctx, foo={0: 10, 2: 30, 5: 50})
    assert outcome.error_code == NONE
    assert outcome.topics == (
        AlteredTopic("foo", FOO, (AlteredPartition(0, NONE), AlteredPartition(2, NONE),
                                  AlteredPartition(5, UNKNOWN, outcome.topics[0].partitions[2].error_message))),
    )
    # The group epoch is the state epoch: every member that left bumped it past the epoch the
    # partitions were initialized with, so the share coordinator takes the new state.
    assert epoch > 1
    assert outcome.initialize == (ShareStateInit("g", FOO, 0, epoch, 10), ShareStateInit("g", FOO, 2, epoch, 30))
    now = ctx.clock.now
    assert ctx.take_written() == [
        share_state_partition_metadata_record(
            "g", {FOO: InitMapValue("foo", frozenset({0, 2}), now)}, initialized_before, {}
        )
    ]

    results = tuple(ShareStateInitResult(i.topic_id, i.partition, NONE) for i in outcome.initialize)
    ctx.run(ctx.shard.share_offsets_initialized(ShareOffsetsInitialized("g", results)))
    assert ctx.group().share_state.initializing == {}
    assert ctx.group().share_state.initialized[FOO].partitions == frozenset({0, 1, 2})
    assert ctx.replayed().durable_view() == ctx.shard.durable_view()


def test_alter_answers_unknown_topics_and_refuses_live_and_missing_groups():
    ctx = ShareContext(topic("foo", 1))
    empty_group_with_state(ctx)
    outcome = alter(ctx, nope={0: 1})
    assert outcome.topics == (AlteredTopic("nope", None, (AlteredPartition(0, UNKNOWN, outcome.topics[0].partitions[0].error_message),)),)
    assert outcome.initialize == ()
    assert ctx.take_written() == []

    assert alter(ctx, "missing", foo={0: 1}).error_code == ErrorCode.group_id_not_found
    ctx.join("m2", ["foo"])
    ctx.take_written()
    refused = alter(ctx, foo={0: 1})
    assert (refused.error_code, refused.topics, refused.initialize) == (ErrorCode.non_empty_group, (), ())
    assert ctx.take_written() == []


def test_delete_moves_initialized_topics_to_deleting_then_forgets_them():
    ctx = ShareContext(topic("foo", 2), topic("bar", 1))
    empty_group_with_state(ctx, ("foo", "bar"))
    info = ctx.group().share_state

    outcome = initiate(ctx, "foo", "zed", "nope")
    assert outcome.error_code == NONE
    assert outcome.deletes == ((FOO, "foo", (ShareStateDelete("g", FOO, 0), ShareStateDelete("g", FOO, 1))),)
    assert [(t.name, t.error_code, t.error_message) for t in outcome.failed] == [
        ("zed", UNKNOWN, outcome.failed[0].error_message),  # no such topic
        ("nope", UNKNOWN, outcome.failed[1].error_message),
    ]
    assert ctx.take_written() == [
        share_state_partition_metadata_record("g", {}, {BAR: info.initialized[BAR]}, {FOO: "foo"})
    ]

    answered = ctx.run(ctx.shard.share_offsets_delete_complete(CompleteShareOffsetsDelete("g", ((FOO, "foo"),))))
    assert answered == (DeletedShareTopic("foo", FOO, NONE),)
    assert ctx.take_written() == [share_state_partition_metadata_record("g", {}, {BAR: info.initialized[BAR]}, {})]

    # A new member starts foo afresh: its state is initialized again, from share.auto.offset.reset.
    joined = ctx.join("m2", ["foo"])
    assert [(i.topic_id, i.partition, i.start_offset) for i in joined.initialize] == [(FOO, 0, -1), (FOO, 1, -1)]
    assert ctx.replayed().durable_view() == ctx.shard.durable_view()


def test_delete_of_a_topic_without_state_says_so_and_a_topic_left_deleting_is_deleted_whole():
    ctx = ShareContext(topic("foo", 2), topic("bar", 1))
    empty_group_with_state(ctx, ("foo",))
    outcome = initiate(ctx, "bar")
    assert outcome.failed == (DeletedShareTopic("bar", None, UNKNOWN, NO_OFFSET_INFORMATION),)
    assert outcome.deletes == ()

    initiate(ctx, "foo")  # its state delete failed: foo stays deleting
    again = initiate(ctx, "foo")
    assert again.deletes == ((FOO, "foo", (ShareStateDelete("g", FOO, 0), ShareStateDelete("g", FOO, 1))),)


def test_delete_refuses_live_and_missing_groups_and_writes_nothing():
    ctx = ShareContext(topic("foo", 1))
    ctx.join("m1", ["foo"])
    ctx.take_written()
    assert initiate(ctx, "foo").error_code == ErrorCode.non_empty_group
    assert initiate(ctx, "foo", group_id="missing").error_code == ErrorCode.group_id_not_found
    assert ctx.take_written() == []
