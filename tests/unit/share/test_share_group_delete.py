"""DeleteGroups of a share group as Kafka 4.x does it (GroupCoordinatorService.deleteGroups ->
deleteShareGroups -> GroupCoordinatorShard.sharePartitionDeleteRequests, then deleteGroups):

    1. one shard operation validates Empty and moves the group's share partitions to `deleting`
       (a ShareGroupStatePartitionMetadata record), answering which share state to delete;
    2. the share state is deleted through the persister (the cluster's part, not here);
    3. the group is deleted only if it is still Empty (GROUP_NOT_EMPTY otherwise).

A member joining between the steps finds no initialized partition, so its heartbeat initializes them
again instead of being handed partitions whose state is about to be deleted."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import DeletedGroup
from coordinator.context import OperationContext
from coordinator.records import share_state_partition_metadata_record
from coordinator.share.deletion import prepare_share_group_deletes
from coordinator.share.messages import ShareStateDelete, ShareStateDeletion
from tests.unit.share.context import BAR, FOO, ShareContext, classic_group, topic

NONE = ErrorCode.none


def prepare(ctx: ShareContext, *group_ids: str) -> list[ShareStateDeletion]:
    """Step 1, as the shard's operation runs it (an operation context, its result replayed)."""
    op = OperationContext(ctx.shard)
    return ctx.run(op.result(prepare_share_group_deletes(op, group_ids)))


def empty_group_with_state(ctx: ShareContext) -> None:
    ctx.join("m1", ["foo"])
    ctx.initialize()
    ctx.heartbeat("m1", ctx.member("m1").member_epoch)
    ctx.leave("m1")
    ctx.take_written()


def test_a_member_joining_between_the_state_delete_and_the_group_delete_keeps_the_group_and_initializes_again():
    ctx = ShareContext(topic("foo", 2))
    empty_group_with_state(ctx)

    (prepared,) = prepare(ctx, "g")
    assert prepared == ShareStateDeletion("g", NONE, (ShareStateDelete("g", FOO, 0), ShareStateDelete("g", FOO, 1)))
    assert ctx.take_written() == [share_state_partition_metadata_record("g", {}, {}, {FOO: "foo"})]

    # m2 joins while the share state is being deleted: nothing is assignable, its partitions are
    # initialized again (and taken out of `deleting`), not handed out with state about to vanish.
    joined = ctx.join("m2", ["foo"])
    assert joined.response.error_code == NONE
    assert joined.response.assignment == ()
    epoch = ctx.group().group_epoch
    assert [(i.topic_id, i.partition, i.state_epoch) for i in joined.initialize] == [(FOO, 0, epoch), (FOO, 1, epoch)]
    assert ctx.group().share_state.deleting == {}

    # Step 3 checks Empty again: the group stays, with m2.
    (deleted,) = ctx.run(ctx.shard.delete_groups(("g",)))
    assert deleted == DeletedGroup("g", ErrorCode.non_empty_group)
    assert set(ctx.group().members) == {"m2"}

    ctx.initialize()
    assigned = ctx.heartbeat("m2", ctx.member("m2").member_epoch)
    assert ctx.member("m2").assigned_partitions == {FOO: frozenset({0, 1})}
    assert assigned.response.error_code == NONE
    assert ctx.replayed().durable_view() == ctx.shard.durable_view()


def test_a_prepared_delete_deletes_the_group_without_deleting_its_state_again():
    ctx = ShareContext(topic("foo", 2))
    empty_group_with_state(ctx)
    prepare(ctx, "g")
    (deleted,) = ctx.run(ctx.shard.delete_groups(("g",)))
    # The state went in step 2; deleting it again afterwards could wipe a new group's of the same id.
    assert deleted == DeletedGroup("g", NONE)
    assert ctx.group() is None


def test_prepare_refuses_a_non_empty_group_and_skips_what_is_not_a_share_group():
    ctx = ShareContext(topic("foo", 1))
    ctx.join("m1", ["foo"])
    ctx.initialize()
    classic_group(ctx, "c")
    ctx.take_written()
    busy, classic, missing = prepare(ctx, "g", "c", "nope")
    assert busy == ShareStateDeletion("g", ErrorCode.non_empty_group)
    # Kafka leaves groups that are not share groups to the group delete, which answers for them.
    assert classic == ShareStateDeletion("c", NONE) and missing == ShareStateDeletion("nope", NONE)
    assert ctx.take_written() == []


def test_a_failed_state_delete_is_retried_whole_by_the_next_delete_groups():
    """The group stays Empty with its topics `deleting`; the next attempt deletes those whole
    (Kafka's deleteRetryCandidates), together with anything initializing meanwhile."""
    ctx = ShareContext(topic("foo", 2), topic("bar", 1))
    empty_group_with_state(ctx)
    prepare(ctx, "g")  # ... and the persister failed: the group is kept
    (again,) = prepare(ctx, "g")
    assert again.deletes == (ShareStateDelete("g", FOO, 0), ShareStateDelete("g", FOO, 1))
    assert ctx.take_written()[-1] == share_state_partition_metadata_record("g", {}, {}, {FOO: "foo"})


def test_prepare_covers_initializing_partitions_and_a_group_without_share_state():
    ctx = ShareContext(topic("foo", 1), topic("bar", 1))
    ctx.join("m1", ["foo", "bar"])
    ctx.initialize(inits=[i for i in ctx.pending_inits if i.topic_id == FOO])
    ctx.leave("m1")
    ctx.join("m9", [], group_id="bare")
    ctx.leave("m9", group_id="bare")
    ctx.take_written()
    (prepared, bare) = prepare(ctx, "g", "bare")
    # bar was asked for and never answered: its state may exist all the same.
    assert prepared.deletes == (ShareStateDelete("g", BAR, 0), ShareStateDelete("g", FOO, 0))
    assert bare == ShareStateDeletion("bare", NONE)
    assert ctx.take_written() == [share_state_partition_metadata_record("g", {}, {}, {BAR: "bar", FOO: "foo"})]
    assert ctx.shard.groups["g"].share_state.initialized == {} == ctx.shard.groups["g"].share_state.initializing
