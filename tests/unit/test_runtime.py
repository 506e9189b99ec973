"""The coordinator runtime with a manual clock: ordering, group commit, write-then-respond,
revert on a failed append, timers as values, parked requests, loading and epochs."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from cluster.log import LogConfig, PartitionLog
from cluster.runtime import (
    CoordinatorRuntime,
    LoadInProgress,
    ManualWakeups,
    NotCoordinator,
    RuntimeConfig,
    StorageError,
)
from kernel.clock import ManualClock
from kernel.codec import Record, RecordCodec
from kernel.result import PARKED, Result
from kernel.snapshot import TouchedKeys
from kernel.timer import Schedule, ShardCall
from tests.full_disk import FullDisk

TP = ("__test", 0)


@dataclass(frozen=True, slots=True)
class CounterKey:
    name: str


@dataclass(frozen=True, slots=True)
class CounterValue:
    value: int


@dataclass(frozen=True, slots=True)
class WaiterKey:
    token: int


@dataclass(frozen=True, slots=True)
class WaiterValue:
    name: str


CODEC = RecordCodec("test")
CODEC.register(CounterKey, CounterValue, name="Counter")
CODEC.register(WaiterKey, WaiterValue, name="Waiter", transient=True)

EXPIRY_MS = 1000


class CounterShard:
    """Counters that expire EXPIRY_MS after their last increment, and waiters released by name."""

    def __init__(self, tp, clock) -> None:
        self.clock = clock
        self.values: dict[str, int] = {}
        self.waiters: dict[int, str] = {}
        self.touched = TouchedKeys()

    def replay(self, record: Record) -> None:
        table = self.values if isinstance(record.key, CounterKey) else self.waiters
        name = getattr(record.key, "name", getattr(record.key, "token", None))
        self.touched.save((id(table), name), lambda: (table, name, table.get(name)))
        if isinstance(record.key, CounterKey):
            if record.value is None:
                self.values.pop(record.key.name, None)
            else:
                self.values[record.key.name] = record.value.value
        elif isinstance(record.key, WaiterKey):
            if record.value is None:
                self.waiters.pop(record.key.token, None)
            else:
                self.waiters[record.key.token] = record.value.name
        else:
            raise TypeError(record)

    def restore(self, saved) -> None:
        for table, name, value in saved.values():
            if value is None:
                table.pop(name, None)
            else:
                table[name] = value

    def on_loaded(self) -> Result:
        return Result(timers=[self._arm(name) for name in self.values])

    def _arm(self, name: str) -> Schedule:
        return Schedule(("expire", name), EXPIRY_MS, ShardCall("expire", (name,)))

    def incr(self, name: str) -> Result:
        value = self.values.get(name, 0) + 1
        return Result([Record(CounterKey(name), CounterValue(value))], value, timers=[self._arm(name)])

    def get(self, name: str) -> Result:
        return Result.of(self.values.get(name))

    def expire(self, name: str) -> Result:
        if name not in self.values:
            return Result()
        return Result([Record(CounterKey(name), None)])

    def wait_for(self, name: str, token: int) -> Result:
        return Result([Record(WaiterKey(token), WaiterValue(name))], PARKED)

    def release(self, name: str) -> Result:
        tokens = [t for t, n in self.waiters.items() if n == name]
        return Result(
            [Record(WaiterKey(t), None) for t in tokens],
            len(tokens),
            completions=[(t, f"released {name}") for t in tokens],
        )

    def boom(self) -> Result:
        raise RuntimeError("bug in an operation")


class GatedLog(PartitionLog):
    """A log whose appends block until the test opens the gate, and that counts appends."""

    gate: threading.Event
    appends: int = 0

    def append(self, batches, leader_epoch):
        self.gate.wait(5)
        type(self).appends += 1
        return super().append(batches, leader_epoch)



def make_runtime(tmp_path, *, clock=None, log_opener=None, compaction_records=10_000):
    clock = clock or ManualClock(1_000_000)
    return CoordinatorRuntime(
        codec=CODEC,
        shard_factory=CounterShard,
        config=RuntimeConfig(
            data_dir=tmp_path, log_config=LogConfig(compacted=True, segment_bytes=4096), compaction_records=compaction_records
        ),
        executor=ThreadPoolExecutor(2),
        clock=clock,
        wakeups=ManualWakeups(clock),
        log_opener=log_opener,
    )


def op(fn, *args):
    return lambda token: fn(*args)


async def settle():
    for _ in range(20):
        await asyncio.sleep(0.005)


def test_operations_answer_only_after_their_batch_is_appended_and_queued_ones_share_one_append(tmp_path):
    async def main():
        GatedLog.gate = threading.Event()
        GatedLog.appends = 0
        rt = make_runtime(tmp_path, log_opener=lambda path, cfg: GatedLog.open(path, cfg))
        await rt.load(TP, 1)
        shard = lambda: rt.shard(TP)  # noqa: E731
        first = asyncio.ensure_future(rt.write(TP, 1, lambda t: shard().incr("a")))
        await settle()
        second = asyncio.ensure_future(rt.write(TP, 1, lambda t: shard().incr("a")))
        third = asyncio.ensure_future(rt.write(TP, 1, lambda t: shard().incr("b")))
        await settle()
        # The first batch is still being written: nobody has an answer yet, not even the reader.
        assert not first.done() and not second.done() and not third.done()
        GatedLog.gate.set()
        assert await first == 1
        assert await second == 2 and await third == 1
        # Two appends: the first operation's, then the two that queued meanwhile (group commit).
        assert GatedLog.appends == 2
        await rt.close()

    asyncio.run(main())


class TurnLog(PartitionLog):
    """A log whose appends each wait for one turn the test gives."""

    turns: threading.Semaphore

    def append(self, batches, leader_epoch):
        self.turns.acquire(timeout=5)
        return super().append(batches, leader_epoch)


def test_an_operation_that_writes_nothing_ahead_of_its_batchs_records_is_answered_before_their_append(tmp_path):
    """Kafka's runtime answers an operation that wrote nothing once the writes before it are
    durable. A read queued behind an append waits for it (its batch runs after), but not for the
    append of the records queued with it; a read after those records in its batch waits for them."""
    async def main():
        TurnLog.turns = threading.Semaphore(0)
        rt = make_runtime(tmp_path, log_opener=lambda path, cfg: TurnLog.open(path, cfg))
        await rt.load(TP, 1)
        shard = lambda: rt.shard(TP)  # noqa: E731
        first = asyncio.ensure_future(rt.write(TP, 1, lambda t: shard().incr("a")))
        await settle()
        read_a = asyncio.ensure_future(rt.write(TP, 1, lambda t: shard().get("a")))
        write_b = asyncio.ensure_future(rt.write(TP, 1, lambda t: shard().incr("b")))
        read_b = asyncio.ensure_future(rt.write(TP, 1, lambda t: shard().get("b")))
        await settle()
        assert not read_a.done()  # the append before it is not durable yet
        TurnLog.turns.release()  # the first batch's append
        assert await first == 1
        assert await asyncio.wait_for(read_a, 5) == 1  # while the second batch's append waits
        await settle()
        assert not write_b.done() and not read_b.done()
        TurnLog.turns.release()
        assert await write_b == 1 and await read_b == 1
        await rt.close()

    asyncio.run(main())


def test_failed_append_fails_the_batch_reverts_state_and_keeps_serving(tmp_path):
    async def main():
        disk = FullDisk()  # shared by every reopening of the log (the revert reopens it)
        rt = make_runtime(tmp_path, log_opener=lambda path, cfg: PartitionLog.open(path, cfg, disk))
        await rt.load(TP, 1)
        shard = lambda: rt.shard(TP)  # noqa: E731
        assert await rt.write(TP, 1, lambda t: shard().incr("a")) == 1
        with disk.filled(), pytest.raises(StorageError):
            await rt.write(TP, 1, lambda t: shard().incr("a"))
        # The replayed-but-unwritten increment is gone: state is the last committed one.
        assert await rt.write(TP, 1, lambda t: shard().get("a")) == 1
        assert await rt.write(TP, 1, lambda t: shard().incr("a")) == 2
        await rt.unload(TP)
        await rt.load(TP, 2)
        assert rt.shard(TP).values == {"a": 2}
        await rt.close()

    asyncio.run(main())


def test_timer_expiry_is_an_operation_driven_by_the_manual_clock(tmp_path):
    async def main():
        clock = ManualClock(5_000)
        rt = make_runtime(tmp_path, clock=clock)
        await rt.load(TP, 1)
        await rt.write(TP, 1, lambda t: rt.shard(TP).incr("a"))
        rt.wakeups.advance(EXPIRY_MS - 1)
        await settle()
        assert rt.shard(TP).values == {"a": 1}
        rt.wakeups.advance(1)
        await settle()
        assert rt.shard(TP).values == {}
        # The expiry's tombstone was written: a reload agrees.
        await rt.unload(TP)
        await rt.load(TP, 2)
        assert rt.shard(TP).values == {}
        await rt.close()

    asyncio.run(main())


def test_load_replays_the_log_restarts_timers_and_fences_stale_epochs(tmp_path):
    async def main():
        rt = make_runtime(tmp_path)
        await rt.load(TP, 1)
        for name in ("a", "b", "a"):
            await rt.write(TP, 1, lambda t, n=name: rt.shard(TP).incr(n))
        await rt.close()

        rt2 = make_runtime(tmp_path)
        await rt2.load(TP, 2)
        assert rt2.shard(TP).values == {"a": 2, "b": 1}
        with pytest.raises(NotCoordinator):
            await rt2.write(TP, 1, lambda t: rt2.shard(TP).get("a"))
        with pytest.raises(NotCoordinator):
            await rt2.write(("__test", 9), 2, lambda t: None)
        # Timers restart from load time, not from when the records were written.
        rt2.wakeups.advance(EXPIRY_MS)
        await settle()
        assert rt2.shard(TP).values == {}
        await rt2.close()

    asyncio.run(main())


def test_requests_during_load_get_load_in_progress(tmp_path):
    async def main():
        opened = threading.Event()
        release = threading.Event()

        def slow_open(path, cfg):
            opened.set()
            release.wait(5)
            return PartitionLog.open(path, cfg)

        rt = make_runtime(tmp_path, log_opener=slow_open)
        loading = asyncio.ensure_future(rt.load(TP, 1))
        while not opened.is_set():
            await asyncio.sleep(0.001)
        with pytest.raises(LoadInProgress):
            await rt.write(TP, 1, lambda t: None)
        release.set()
        await loading
        assert await rt.write(TP, 1, lambda t: rt.shard(TP).get("x")) is None
        await rt.close()

    asyncio.run(main())


def test_parked_requests_are_answered_by_a_later_operation(tmp_path):
    async def main():
        rt = make_runtime(tmp_path)
        await rt.load(TP, 1)
        waiters = [asyncio.ensure_future(rt.write(TP, 1, lambda t: rt.shard(TP).wait_for("x", t))) for _ in range(2)]
        other = asyncio.ensure_future(rt.write(TP, 1, lambda t: rt.shard(TP).wait_for("y", t)))
        await settle()
        assert not any(w.done() for w in waiters)
        assert await rt.write(TP, 1, lambda t: rt.shard(TP).release("x")) == 2
        assert [await w for w in waiters] == ["released x", "released x"]
        assert not other.done()
        # Unloading answers what is still parked: the client must find the new coordinator.
        await rt.unload(TP)
        with pytest.raises(NotCoordinator):
            await other

    asyncio.run(main())


def test_an_operation_that_raises_fails_alone(tmp_path):
    async def main():
        rt = make_runtime(tmp_path)
        await rt.load(TP, 1)
        ok1 = asyncio.ensure_future(rt.write(TP, 1, lambda t: rt.shard(TP).incr("a")))
        bad = asyncio.ensure_future(rt.write(TP, 1, lambda t: rt.shard(TP).boom()))
        ok2 = asyncio.ensure_future(rt.write(TP, 1, lambda t: rt.shard(TP).incr("a")))
        assert await ok1 == 1
        with pytest.raises(RuntimeError, match="bug"):
            await bad
        assert await ok2 == 2
        await rt.close()

    asyncio.run(main())


def test_compaction_runs_after_enough_records_and_keeps_the_state(tmp_path):
    async def main():
        rt = make_runtime(tmp_path, compaction_records=50)
        await rt.load(TP, 1)
        for i in range(400):
            await rt.write(TP, 1, lambda t, n=i % 3: rt.shard(TP).incr(f"k{n}"))
        values = dict(rt.shard(TP).values)
        size_before_reload = rt.partitions[TP].log.size_bytes
        await rt.close()
        rt2 = make_runtime(tmp_path)
        await rt2.load(TP, 2)
        assert rt2.shard(TP).values == values
        # 400 records of ~40 bytes each would be far larger uncompacted.
        assert size_before_reload < 400 * 40
        await rt2.close()

    asyncio.run(main())
