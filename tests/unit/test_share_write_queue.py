"""ShareStateWriteQueue without Ray: a persister whose answers the test releases one by one."""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from kernel.clock import ManualClock
from sharestate import messages as m
from sharestate.inflight import AcknowledgeType as A
from sharestate.partition import AcknowledgementBatch, SharePartition

from cluster.share.write_queue import ShareStateWriteQueue


class HeldPersister:
    """Each write waits until the test answers it."""

    def __init__(self) -> None:
        self.requests: list[m.WriteShareGroupStateRequest] = []
        self.answers: list[asyncio.Future] = []

    async def write(self, request: m.WriteShareGroupStateRequest) -> m.WriteShareGroupStateResponse:
        self.requests.append(request)
        answer = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return await answer

    def answer(self, i: int, code: ErrorCode = ErrorCode.none) -> None:
        self.answers[i].set_result(m.WriteShareGroupStateResponse(code, None if code == ErrorCode.none else "no"))


def share_with(n: int) -> SharePartition:
    clock = ManualClock(0)
    sp = SharePartition("g", uuid.UUID(int=1), 0, clock=clock)
    sp.initialize(-1, 0, [], reset_offset=0)
    sp.acquire("m1", 500, 0, [(i, i) for i in range(n)])
    return sp


def accept(sp: SharePartition, offset: int):
    return sp.acknowledge("m1", [AcknowledgementBatch(offset, offset, (int(A.ACCEPT),))]).write


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_writes_go_one_at_a_time_in_order_and_those_queued_meanwhile_go_together():
    async def main():
        sp, persister, fenced = share_with(3), HeldPersister(), []
        queue = ShareStateWriteQueue(sp, persister, 7, lambda: None, lambda: fenced.append(True))
        first = queue.submit(accept(sp, 0), answer=True)
        await settle()
        second = queue.submit(accept(sp, 1), answer=True)
        third = queue.submit(accept(sp, 2), answer=True)
        await settle()
        assert len(persister.requests) == 1  # the next write waits for the first's answer
        persister.answer(0)
        await settle()
        assert first.result() == (ErrorCode.none, None) and not second.done()
        assert len(persister.requests) == 2
        together = persister.requests[1]
        assert [(b.first_offset, b.last_offset) for b in together.state_batches] == [(1, 1), (2, 2)]
        assert together.start_offset == 3 and together.leader_epoch == 7
        persister.answer(1)
        await settle()
        assert second.result() == third.result() == (ErrorCode.none, None)
        assert [r.start_offset for r in persister.requests] == [1, 3]  # never backwards
        assert sp.start_offset == 3 and not queue.sending and queue.sent == 2 and not fenced

    asyncio.run(main())


def test_a_refused_write_rolls_back_and_a_fenced_one_ends_the_copy():
    async def main():
        sp, persister, fenced = share_with(2), HeldPersister(), []
        queue = ShareStateWriteQueue(sp, persister, 1, lambda: None, lambda: fenced.append(True))
        refused = queue.submit(accept(sp, 0), answer=True)
        await settle()
        persister.answer(0, ErrorCode.coordinator_not_available)
        await settle()
        assert refused.result()[0] == ErrorCode.coordinator_not_available
        assert sp.offsets()[0][2] == "m1" and not fenced  # still the member's to acknowledge
        late = queue.submit(accept(sp, 1), answer=True)
        await settle()
        persister.answer(1, ErrorCode.fenced_leader_epoch)
        await settle()
        assert late.result()[0] == ErrorCode.fenced_leader_epoch and fenced == [True]

    asyncio.run(main())
