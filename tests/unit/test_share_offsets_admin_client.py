"""AlterShareGroupOffsets and DeleteShareGroupOffsets through the CoordinatorClient, without Ray: a
real group coordinator shard behind a fake router, and a persister that may fail some partitions
(Kafka's GroupCoordinatorService.persisterInitialize, deleteShareGroupOffsetsState)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from sharestate import messages as m

from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed
from cluster.clients.coordinator import CoordinatorClient
from cluster.services.group_service import GroupCoordinatorService
from coordinator.share.offsets_admin import AlterShareOffsetsRequest, DeletedShareTopic, DeleteShareOffsetsRequest
from tests.unit.share.context import BAR, FOO, ShareContext, topic

NONE = ErrorCode.none

class ShardRouter:
    """call_leader runs the operation on the context's shard, as the actor would."""

    def __init__(self, ctx: ShareContext) -> None:
        self.ctx = ctx
        self.ops: list[Op] = []

    async def call_leader(self, topic, partition, endpoint, make_item, not_leader):
        item = make_item(1)
        self.ops.append(item.op)
        return self.ctx.run(item.op.run(self.ctx.shard, item.request, None))


class Persister:
    def __init__(self, failing: set[tuple] = frozenset()) -> None:
        self.failing = failing
        self.calls: list[tuple] = []

    def _error(self, req):
        return ErrorCode.coordinator_not_available if (req.topic_id, req.partition) in self.failing else NONE

    async def initialize(self, req: m.InitializeShareGroupStateRequest):
        self.calls.append(("initialize", req.topic_id, req.partition, req.state_epoch, req.start_offset))
        return m.InitializeShareGroupStateResponse(self._error(req))

    async def delete(self, req: m.DeleteShareGroupStateRequest):
        self.calls.append(("delete", req.topic_id, req.partition))
        error = self._error(req)
        return m.DeleteShareGroupStateResponse(error, None if error == NONE else "moving")


def setup(persister: Persister) -> tuple[ShareContext, ShardRouter, CoordinatorClient]:
    ctx = ShareContext(topic("foo", 2), topic("bar", 1))
    ctx.join("m1", ["foo", "bar"])
    ctx.initialize()
    ctx.heartbeat("m1", ctx.member("m1").member_epoch)
    ctx.leave("m1")
    router = ShardRouter(ctx)
    return ctx, router, GroupCoordinatorService(CoordinatorClient(router, 1), persister)


def test_alter_initializes_the_new_start_offsets_and_records_them_and_reports_failed_partitions():
    persister = Persister(failing={(FOO, 1)})
    ctx, router, client = setup(persister)
    epoch = ctx.group().group_epoch
    outcome = asyncio.run(client.alter_share_group_offsets(AlterShareOffsetsRequest("g", (("foo", ((0, 3), (1, 4))),))))
    assert router.ops == [Op.SHARE_OFFSETS_ALTER, Op.SHARE_OFFSETS_INITIALIZED]
    assert persister.calls == [("initialize", FOO, 0, epoch, 3), ("initialize", FOO, 1, epoch, 4)]
    (t,) = outcome.topics
    assert [(p.partition, p.error_code) for p in t.partitions] == [(0, NONE), (1, ErrorCode.coordinator_not_available)]
    # Both answers recorded: 0 initialized again, 1 dropped from initializing (a heartbeat retries it).
    info = ctx.group().share_state
    assert info.initializing == {} and info.initialized[FOO].partitions == frozenset({0, 1})


def test_alter_of_a_live_group_asks_nothing_of_the_persister():
    persister = Persister()
    ctx, router, client = setup(persister)
    ctx.join("m2", ["foo"])
    outcome = asyncio.run(client.alter_share_group_offsets(AlterShareOffsetsRequest("g", (("foo", ((0, 3),)),))))
    assert outcome.error_code == ErrorCode.non_empty_group
    assert persister.calls == [] and router.ops == [Op.SHARE_OFFSETS_ALTER]


def test_delete_deletes_each_topics_state_and_a_topic_that_failed_stays_deleting():
    persister = Persister(failing={(BAR, 0)})
    ctx, router, client = setup(persister)
    first, answered = asyncio.run(client.delete_share_group_offsets(DeleteShareOffsetsRequest("g", ("foo", "bar"))))
    assert first.error_code == NONE
    assert sorted(persister.calls) == sorted([("delete", FOO, 0), ("delete", FOO, 1), ("delete", BAR, 0)])
    assert router.ops == [Op.SHARE_OFFSETS_DELETE, Op.SHARE_OFFSETS_DELETE_COMPLETE]
    assert set(answered) == {
        DeletedShareTopic("foo", FOO, NONE),
        DeletedShareTopic("bar", BAR, ErrorCode.coordinator_not_available, "moving"),
    }
    info = ctx.group().share_state
    assert set(info.initialized) == set() and info.deleting == {BAR: "bar"}


def test_a_coordinator_that_cannot_be_reached_answers_its_error():
    class Gone:
        async def call_leader(self, *args):
            from cluster.clients.routing import NoLeader

            raise NoLeader("no leader")

    client = GroupCoordinatorService(CoordinatorClient(Gone(), 1), Persister())
    first, answered = asyncio.run(client.delete_share_group_offsets(DeleteShareOffsetsRequest("g", ("foo",))))
    assert isinstance(first, Failed) and first.error_code == ErrorCode.coordinator_not_available and answered == ()
