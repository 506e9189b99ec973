"""Group coordinator batches cross Ray packed (Endpoint.COORDINATOR.packed): one pickle for the
items and one for the answers, the same values on either side; what pickle refuses travels as a
list, as Ray would have sent it; other endpoints are not packed. At most two packed calls per actor
are under way; what comes meanwhile goes in one call."""

from __future__ import annotations

import asyncio
import pickle
from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import CommitPartition, HeartbeatRequest, HeartbeatResponse, OffsetCommitRequest
from cluster.calls import CoordinatorItem, Endpoint, Failed, pack, unpack
from cluster.calls import CoordinatorOp as Op
from cluster.clients.batchers import ActorBatcher, PackedBatcher, batcher_for
from cluster.clients.links import ActorLink


class FakeHandle:
    """An actor handle whose methods answer on the next loop pass with what `answer` makes of the
    argument; every argument is kept as sent."""

    def __init__(self, answer) -> None:
        self.sent: list = []
        remote = lambda arg: self._answer(arg)  # noqa: E731
        self.execute = SimpleNamespace(remote=remote)
        self._make = answer

    async def _answer(self, arg):
        self.sent.append(arg)
        await asyncio.sleep(0)
        return self._make(arg)


ITEMS = [
    CoordinatorItem(Op.HEARTBEAT, 3, 7, HeartbeatRequest("g", 5, "m-1", None)),
    CoordinatorItem(Op.COMMIT, 3, 7, OffsetCommitRequest("g", 5, "m-1", None, (("t", (CommitPartition(0, 42, -1, None),)),))),
]
ANSWERS = [HeartbeatResponse(ErrorCode.none), Failed(ErrorCode.not_coordinator, "moved")]


def test_pack_round_trips_and_falls_back_to_the_list_for_what_pickle_refuses():
    packed = pack(ITEMS)
    assert type(packed) is bytes and unpack(packed) == ITEMS
    odd = [CoordinatorItem(Op.HEARTBEAT, 1, 1, lambda: None)]
    assert pack(odd) is odd and unpack(odd) is odd


def test_only_the_packed_endpoints_get_a_packed_batcher():
    handle = FakeHandle(lambda arg: arg)
    assert type(batcher_for(ActorLink(handle, None), Endpoint.COORDINATOR)) is PackedBatcher
    assert type(batcher_for(ActorLink(handle, None), Endpoint.SHARE_STATE)) is ActorBatcher
    assert [e for e in Endpoint if e.packed] == [Endpoint.COORDINATOR]


def test_a_packed_batch_sends_one_pickle_and_answers_each_caller_in_order():
    handle = FakeHandle(lambda arg: pickle.dumps(ANSWERS))

    async def main():
        batcher = batcher_for(ActorLink(handle, None), Endpoint.COORDINATOR)
        return await asyncio.gather(*(batcher.call(item) for item in ITEMS))

    assert asyncio.run(main()) == ANSWERS
    [sent] = handle.sent
    assert type(sent) is bytes and pickle.loads(sent) == ITEMS


def test_an_unpicklable_batch_goes_as_a_list_and_a_list_answer_is_taken_as_is():
    handle = FakeHandle(lambda arg: ["ok"] * len(unpack(arg)))
    odd = CoordinatorItem(Op.HEARTBEAT, 1, 1, lambda: None)

    async def main():
        batcher = batcher_for(ActorLink(handle, None), Endpoint.COORDINATOR)
        return await asyncio.gather(batcher.call(odd), batcher.call(ITEMS[0]))

    assert asyncio.run(main()) == ["ok", "ok"]
    assert handle.sent[0] == [odd, ITEMS[0]]


def test_a_failed_packed_call_fails_every_caller():
    def boom(_arg):
        raise RuntimeError("actor died")

    handle = FakeHandle(boom)

    async def main():
        batcher = batcher_for(ActorLink(handle, None), Endpoint.COORDINATOR)
        return await asyncio.gather(*(batcher.call(item) for item in ITEMS), return_exceptions=True)

    assert all(isinstance(outcome, RuntimeError) for outcome in asyncio.run(main()))


class GatedHandle:
    """Packed execute calls that answer when the test says (one gate per call, in call order)."""

    def __init__(self) -> None:
        self.calls: list[list] = []
        self.gates: list[asyncio.Future] = []
        self.execute = SimpleNamespace(remote=self._remote)

    def _remote(self, arg):
        items = unpack(arg)
        self.calls.append(items)
        gate = asyncio.get_running_loop().create_future()
        self.gates.append(gate)

        async def answer():
            await gate
            return pack([f"answer {item}" for item in items])

        return answer()


def test_at_most_two_packed_calls_are_under_way_and_the_rest_waits_to_go_in_one():
    async def main():
        handle = GatedHandle()
        batcher = batcher_for(ActorLink(handle, None), Endpoint.COORDINATOR)
        first = batcher.call(1)
        await asyncio.sleep(0)
        second = batcher.call(2)
        await asyncio.sleep(0)
        waiting = [batcher.call(n) for n in (3, 4)]
        await asyncio.sleep(0)
        waiting.append(batcher.call(5))
        for _ in range(3):
            await asyncio.sleep(0)
        assert handle.calls == [[1], [2]]  # two under way: 3, 4 and 5 wait
        handle.gates[1].set_result(None)
        assert await second == "answer 2"
        for _ in range(3):
            await asyncio.sleep(0)
        assert handle.calls == [[1], [2], [3, 4, 5]]  # one call for all that waited
        handle.gates[0].set_result(None)
        handle.gates[2].set_result(None)
        assert await first == "answer 1"
        assert await asyncio.gather(*waiting) == ["answer 3", "answer 4", "answer 5"]

    asyncio.run(main())
