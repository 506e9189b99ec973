"""runtime.submit(..., at_once=True): an operation that usually writes nothing (a heartbeat), run in
its caller's pass on a partition at rest, and answered before submit returns when it wrote
nothing; queued as any other when the partition is busy, its writes uncommitted, or it wrote."""

from __future__ import annotations

import asyncio

import pytest

from cluster.runtime import WriteTimeout
from kernel.result import Result
from tests.unit.test_runtime import EXPIRY_MS, TP
from tests.unit.test_runtime_commit import TIMEOUT_MS, incr, make, release, run, until


def submit(rt, operation, at_once=True) -> asyncio.Future:
    return rt.submit(TP, None, operation, at_once)


def test_a_read_on_a_partition_at_rest_is_answered_before_submit_returns(tmp_path):
    async def main():
        rt, wakeups, _ = make(tmp_path)
        await rt.load(TP, 1)
        assert await incr(rt, "a") == 1
        read = submit(rt, lambda _t: rt.shard(TP).get("a"))
        assert read.done() and read.result() == 1
        queued = submit(rt, lambda _t: rt.shard(TP).get("a"), at_once=False)
        assert not queued.done()  # without at_once: a batch of its own, on the next pass
        assert await queued == 1
        await rt.close()

    run(main)


def test_its_timers_are_armed_as_in_a_batch(tmp_path):
    """A heartbeat's only effect is its session timer: re-armed at once, the expiry moves."""

    async def main():
        rt, wakeups, _ = make(tmp_path)
        await rt.load(TP, 1)
        assert await incr(rt, "a") == 1
        shard = rt.shard(TP)
        wakeups.advance(EXPIRY_MS - 10)
        touch = submit(rt, lambda _t: Result(timers=[shard._arm("a")], response="touched"))
        assert touch.result() == "touched"
        wakeups.advance(20)  # past the first deadline: the re-armed timer holds
        for _ in range(3):
            await asyncio.sleep(0)
        assert shard.values == {"a": 1}
        wakeups.advance(EXPIRY_MS)
        await until(lambda: shard.values == {}, "the re-armed expiry")
        await rt.close()

    run(main)


def test_a_read_behind_a_write_under_way_waits_its_turn(tmp_path):
    async def main():
        rt, _, writer = make(tmp_path, held=True)
        await rt.load(TP, 1)
        write = incr(rt, "a")
        await until(lambda: writer.appends == 1, "the append")
        read = submit(rt, lambda _t: rt.shard(TP).get("a"))
        assert not read.done()  # the queue is busy: it waits for the write's commit
        release(rt, writer, 1)
        assert await write == 1 and await read == 1
        await rt.close()

    run(main)


def test_a_read_is_not_answered_at_once_while_what_it_sees_is_uncommitted(tmp_path):
    """A write that timed out keeps its state: the queue is at rest, but a read of that state waits
    for its commit, as in a batch."""

    async def main():
        rt, wakeups, writer = make(tmp_path, held=True)
        await rt.load(TP, 1)
        write = incr(rt, "a")
        await until(lambda: writer.appends == 1, "the append")
        wakeups.advance(TIMEOUT_MS)  # below the counter's expiry: nothing else runs
        with pytest.raises(WriteTimeout):
            await write
        await until(lambda: rt.partitions[TP].queue.at_rest, "the queue at rest")
        read = submit(rt, lambda _t: rt.shard(TP).get("a"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not read.done()
        release(rt, writer, 1)
        assert await read == 1
        await rt.close()

    run(main)


def test_an_operation_that_writes_after_all_is_run_again_in_a_batch_and_written_once(tmp_path):
    runs = []

    async def main():
        rt, _, _ = make(tmp_path)
        await rt.load(TP, 1)

        def incr_counted(_token):
            runs.append(1)
            return rt.shard(TP).incr("a")

        first = submit(rt, incr_counted)
        assert not first.done() and len(runs) == 1  # tried, wrote: dropped and queued
        assert await first == 1 and len(runs) == 2
        assert await incr(rt, "a") == 2  # the first increment was written once
        await rt.close()

    run(main)


def test_an_operation_that_raises_fails_alone(tmp_path):
    async def main():
        rt, _, _ = make(tmp_path)
        await rt.load(TP, 1)
        failed = submit(rt, lambda _t: rt.shard(TP).boom())
        assert failed.done() and isinstance(failed.exception(), RuntimeError)
        assert await incr(rt, "a") == 1
        await rt.close()

    run(main)


def test_an_operation_that_parks_is_queued_and_parked_once(tmp_path):
    runs = []

    async def main():
        rt, _, _ = make(tmp_path)
        await rt.load(TP, 1)

        def wait_for_a(token):
            runs.append(token)
            return rt.shard(TP).wait_for("a", token)

        parked = submit(rt, wait_for_a)
        assert not parked.done() and len(runs) == 1
        await until(lambda: len(runs) == 2 and len(rt.shard(TP).waiters) == 1, "the queued run")
        released = submit(rt, lambda _t: rt.shard(TP).release("a"))
        assert await released == 1 and await parked == "released a"
        assert runs[0] == runs[1]  # the same request (token) both times
        await rt.close()

    run(main)
