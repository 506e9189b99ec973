"""CoordinatorClient without Ray: routing by group, fan-out per partition, errors as Failed, and
DeleteGroups deleting a share group's state before the group (Kafka's deleteShareGroups)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import DeletedGroup, ListedGroup
from coordinator.share.messages import ShareStateDelete, ShareStateDeletion
from sharestate import messages as m

from cluster.calls import CoordinatorItem, Endpoint, ParkedItem
from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed
from cluster.clients.coordinator import CoordinatorClient
from cluster.services.group_service import GroupCoordinatorService
from cluster.metadata import CONSUMER_OFFSETS
from cluster.clients.routing import NoLeader

TOPIC_ID = uuid.uuid4()


class FakeRouter:
    """call_leader runs the item through `coordinator(op, partition, request)`; no leader -> NoLeader."""

    def __init__(self, coordinator, handles=None) -> None:
        self.coordinator = coordinator
        self.log: list[tuple] = []
        self.leadership = SimpleNamespace(handles=handles or {})

    async def call_leader(self, topic, partition, endpoint, make_item, not_leader):
        assert topic == CONSUMER_OFFSETS
        item = make_item(7)
        if endpoint is Endpoint.COORDINATOR_PARKED:  # answered on the channel (FakeChannelHandle), started here
            assert isinstance(item, ParkedItem)
            ticket, item = item.ticket, item.item
        assert isinstance(item, CoordinatorItem) and (item.partition, item.epoch) == (partition, 7)
        op, request = item.op, item.request
        self.log.append((endpoint, op, partition, request))
        outcome = self.coordinator(op, partition, request)
        if endpoint is not Endpoint.COORDINATOR_PARKED or isinstance(outcome, Failed):
            return outcome
        self.parked_handle.owed.append((ticket, outcome))
        return ("group-coordinator-0", "incarnation-1")

    def leader(self, topic, partition):
        return ("group-coordinator-0", 7)

    def handle(self, actor):
        return self.parked_handle

    @property
    def parked_handle(self):
        if not hasattr(self, "_parked_handle"):
            self._parked_handle = FakeChannelHandle()
        return self._parked_handle


class FakeChannelHandle:
    """A coordinator's answers_stream: everything started so far, one item per wake-up."""

    def __init__(self) -> None:
        self.owed: list[tuple[int, object]] = []
        self.answers_stream = SimpleNamespace(options=lambda **_: SimpleNamespace(remote=self._stream))

    async def _stream(self, channel):
        while True:
            answers, self.owed = self.owed, []
            yield _ready(("incarnation-1", answers))
            await asyncio.sleep(0)


async def _ready(value):
    return value


class FakePersister:
    def __init__(self, error: ErrorCode = ErrorCode.none, log: list | None = None) -> None:
        self.error = error
        self.log = log if log is not None else []

    async def delete(self, req: m.DeleteShareGroupStateRequest) -> m.DeleteShareGroupStateResponse:
        self.log.append(("persister.delete", req.group_id, req.partition))
        return m.DeleteShareGroupStateResponse(self.error, None if self.error == ErrorCode.none else "disk full")


def groups_table(share_groups=("s",), state="Empty"):
    """A coordinator holding share groups `share_groups` (one initialized partition each) and
    classic group "c"; it answers DeleteGroups for everything it is asked."""

    def coordinator(op, partition, request):
        if op is Op.SHARE_DELETE_PREPARE:
            return [
                ShareStateDeletion(g, ErrorCode.none, tuple(ShareStateDelete(g, TOPIC_ID, p) for p in (0, 1)))
                if g in share_groups and state == "Empty"
                else ShareStateDeletion(g, ErrorCode.non_empty_group if g in share_groups else ErrorCode.none)
                for g in request
            ]
        if op is Op.DELETE:
            return [DeletedGroup(g, ErrorCode.none) for g in request]
        raise AssertionError(op)

    return coordinator


def test_delete_groups_deletes_a_share_groups_state_before_the_group():
    router = FakeRouter(groups_table())
    log = router.log
    client = GroupCoordinatorService(CoordinatorClient(router, 1), FakePersister(log=log))
    result = asyncio.run(client.delete_groups(["s", "c"]))
    assert result == {"s": DeletedGroup("s", ErrorCode.none), "c": DeletedGroup("c", ErrorCode.none)}
    steps = [entry[1] if entry[0] != "persister.delete" else "persister.delete" for entry in log]
    assert steps == [Op.SHARE_DELETE_PREPARE, "persister.delete", "persister.delete", Op.DELETE]
    assert log[-1][3] == ("s", "c")


def test_a_share_group_whose_state_could_not_be_deleted_stays_and_answers_the_error():
    router = FakeRouter(groups_table())
    client = GroupCoordinatorService(CoordinatorClient(router, 1), FakePersister(ErrorCode.coordinator_not_available))
    result = asyncio.run(client.delete_groups(["s", "c"]))
    assert result["s"] == Failed(ErrorCode.coordinator_not_available, "disk full")
    assert result["c"] == DeletedGroup("c", ErrorCode.none)
    deletes = [entry for entry in router.log if entry[1] is Op.DELETE]
    assert [entry[3] for entry in deletes] == [("c",)]  # the share group was not deleted


def test_a_share_group_with_members_keeps_its_state_and_the_coordinator_refuses_it():
    persister = FakePersister()

    def coordinator(op, partition, request):
        if op is Op.DELETE:
            return [DeletedGroup(g, ErrorCode.non_empty_group) for g in request]
        return groups_table(state="Stable")(op, partition, request)

    client = GroupCoordinatorService(CoordinatorClient(FakeRouter(coordinator), 1), persister)
    result = asyncio.run(client.delete_groups(["s"]))
    assert result["s"].error_code == ErrorCode.non_empty_group and persister.log == []


def test_delete_groups_while_loading_answers_every_group_the_error():
    def loading(op, partition, request):
        return Failed(ErrorCode.coordinator_load_in_progress, "loading")

    client = GroupCoordinatorService(CoordinatorClient(FakeRouter(loading), 1), FakePersister())
    result = asyncio.run(client.delete_groups(["s", "c"]))
    assert {g: r.error_code for g, r in result.items()} == {
        "s": ErrorCode.coordinator_load_in_progress, "c": ErrorCode.coordinator_load_in_progress}


def test_per_group_sends_one_call_per_partition_and_answers_per_group():
    router = FakeRouter(lambda op, p, request: [f"{g}@{p}" for g in request])
    client = CoordinatorClient(router, 50)
    ids = [f"group-{i}" for i in range(20)]
    answers = asyncio.run(client.per_group(Op.DESCRIBE, ids + ids[:3]))
    assert answers == {g: f"{g}@{client.partition_for(g)}" for g in ids}
    partitions = [entry[2] for entry in router.log]
    assert sorted(partitions) == sorted({client.partition_for(g) for g in ids})


def test_a_call_that_finds_no_coordinator_or_an_error_answers_failed():
    async def no_leader(*_args):
        raise NoLeader("no leader for __consumer_offsets-3")

    router = FakeRouter(None)
    router.call_leader = no_leader
    client = CoordinatorClient(router, 50)
    assert asyncio.run(client.group(Op.HEARTBEAT, "g", None)).error_code == ErrorCode.coordinator_not_available
    client = CoordinatorClient(FakeRouter(lambda *_: Failed(ErrorCode.not_coordinator, "moved")), 50)
    assert asyncio.run(client.group(Op.HEARTBEAT, "g", None)) == Failed(ErrorCode.not_coordinator, "moved")


def test_join_and_sync_are_answered_on_the_parked_channel_the_rest_as_batches():
    router = FakeRouter(lambda op, *_: f"{op.name} ok")

    async def run():
        client = CoordinatorClient(router, 50)
        outcomes = [await client.group(op, "g", None) for op in (Op.JOIN, Op.SYNC, Op.HEARTBEAT, Op.COMMIT)]
        client.parked.close()
        return outcomes

    assert asyncio.run(run()) == ["JOIN ok", "SYNC ok", "HEARTBEAT ok", "COMMIT ok"]
    P, B = Endpoint.COORDINATOR_PARKED, Endpoint.COORDINATOR
    assert [entry[0] for entry in router.log] == [P, P, B, B]


class Handle:
    def __init__(self, answer) -> None:
        self._answer = answer
        self.list_groups = SimpleNamespace(remote=self._remote)

    async def _remote(self, states, types):
        if isinstance(self._answer, BaseException):
            raise self._answer
        return self._answer


def test_list_groups_merges_every_coordinator_and_any_error_answers_no_groups():
    from ray.exceptions import RayActorError

    a = Handle((None, [ListedGroup("b", "consumer", "Stable", "classic")]))
    b = Handle((None, [ListedGroup("a", "share", "Empty", "share")]))
    handles = {"group-coordinator-0": a, "group-coordinator-1": b, "partition-leader-0": object()}
    listing = asyncio.run(CoordinatorClient(FakeRouter(None, handles), 50).list_groups())
    assert listing.error_code == ErrorCode.none and [g.group_id for g in listing.groups] == ["a", "b"]
    loading = Handle((Failed(ErrorCode.coordinator_load_in_progress), []))
    listing = asyncio.run(CoordinatorClient(FakeRouter(None, {**handles, "group-coordinator-2": loading}), 50).list_groups())
    assert listing.error_code == ErrorCode.coordinator_load_in_progress and listing.groups == ()
    dead = Handle(RayActorError())
    listing = asyncio.run(CoordinatorClient(FakeRouter(None, {**handles, "group-coordinator-2": dead}), 50).list_groups())
    assert listing.error_code == ErrorCode.coordinator_not_available and listing.groups == ()


def test_a_group_ids_partition_is_hashed_once_and_stays_kafkas(monkeypatch):
    from cluster.clients import coordinator as client_module
    from coordinator.hashing import group_partition

    calls = []
    monkeypatch.setattr(client_module, "group_partition", lambda g, n: calls.append(g) or group_partition(g, n))
    monkeypatch.setattr(client_module, "_REMEMBERED_GROUPS", 2)
    client = client_module.CoordinatorClient(router=None, num_partitions=50)
    ids = ["orders", "payments", "orders", "payments", "audit", "orders"]
    assert [client.partition_for(g) for g in ids] == [group_partition(g, 50) for g in ids]
    assert calls == ["orders", "payments", "audit", "orders"]  # a third id forgets the first two
