"""Loading, as the reconciler's retries see it: a load asked for again at the same epoch while the
first is still replaying waits for that one (it must not report a partition that is still loading
as loaded), and a load that fails leaves nothing behind, so the next try starts afresh."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cluster.log import LogWriteError, PartitionLog
from cluster.runtime import LoadInProgress
from tests.unit.test_runtime import TP, make_runtime


class StuckOpen:
    """Opens of the log wait at a gate (a stuck disk read), and can fail instead."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.fail = False

    def __call__(self, path, cfg):
        self.entered.set()
        self.gate.wait(5)
        if self.fail:
            raise LogWriteError("injected: the disk refused the read")
        return PartitionLog.open(path, cfg)


async def entered(opener: StuckOpen) -> None:
    while not opener.entered.is_set():
        await asyncio.sleep(0.001)


def test_a_second_load_at_the_same_epoch_waits_for_the_first(tmp_path):
    async def main():
        opener = StuckOpen()
        rt = make_runtime(tmp_path, log_opener=opener)
        first = asyncio.ensure_future(rt.load(TP, 1))
        await entered(opener)
        again = asyncio.ensure_future(rt.load(TP, 1))  # the reconciler's retry after a timeout
        await asyncio.sleep(0.01)
        assert not again.done()  # still loading: not reported as loaded
        with pytest.raises(LoadInProgress):
            await rt.write(TP, 1, lambda t: rt.shard(TP).get("a"))
        opener.gate.set()
        assert await again is None and await first is None
        assert await rt.write(TP, 1, lambda t: rt.shard(TP).incr("a")) == 1
        await rt.close()

    asyncio.run(main())


def test_a_caller_that_stops_waiting_does_not_cut_the_load_short(tmp_path):
    async def main():
        opener = StuckOpen()
        rt = make_runtime(tmp_path, log_opener=opener)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(rt.load(TP, 1), 0.02)  # the controller gave up on this call
        opener.gate.set()
        assert await rt.load(TP, 1) is None  # the retry finds the load that went on
        assert rt.led() == {TP: (1, "active")}
        await rt.close()

    asyncio.run(main())


def test_a_failed_load_fails_every_waiter_and_the_next_try_starts_afresh(tmp_path):
    async def main():
        opener = StuckOpen()
        opener.fail = True
        rt = make_runtime(tmp_path, log_opener=opener)
        first = asyncio.ensure_future(rt.load(TP, 1))
        await entered(opener)
        again = asyncio.ensure_future(rt.load(TP, 1))
        opener.gate.set()
        for load in (first, again):
            with pytest.raises(LogWriteError):
                await load
        assert rt.led() == {}
        opener.fail = False
        assert await rt.load(TP, 1) is None
        assert rt.led() == {TP: (1, "active")}
        await rt.close()

    asyncio.run(main())
