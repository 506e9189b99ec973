"""The runtime answers at the committed offset, not at the append (Kafka's deferred event queue):
a writer whose high watermark the test moves by hand, as a replicated log's would move."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from kio.schema.errors import ErrorCode

from cluster.actors.coordinator_host import _as_error
from cluster.log import LogConfig
from cluster.runtime import (
    RUNTIME_ERRORS,
    CoordinatorRuntime,
    ManualWakeups,
    NotCoordinator,
    LocalWriter,
    NotEnoughReplicas,
    RuntimeConfig,
    WriteTimeout,
)
from cluster.runtime.partition import Partition
from kernel.clock import ManualClock
from cluster.runtime.runtime import ON_LOADED
from cluster.runtime.timers import TIMER_RETRY_BACKOFF_MS
from kernel.codec import Record
from kernel.result import Result
from tests.unit.test_runtime import CODEC, EXPIRY_MS, TP, CounterKey, CounterShard, CounterValue

TIMEOUT_MS = 500  # below CounterShard's expiry (1,000 ms), so that no expiry runs meanwhile


class HeldWriter(LocalWriter):
    """Appends to the partition's own log, as the local writer does, but commits only up to the
    offset the test releases; it can refuse appends (too few in-sync replicas) and lose the lead."""

    def __init__(self, disk) -> None:
        super().__init__(disk)
        self.high_watermark = 0
        self.leading = True
        self.refuse = False
        self.appends = 0

    async def append(self, partition: Partition, batches: list[bytearray]) -> int:
        if self.refuse:
            raise NotEnoughReplicas("in-sync replicas 1, min.insync.replicas 2")
        end = await super().append(partition, batches)
        self.appends += 1
        return end

    def committed(self, partition: Partition) -> int | None:
        return self.high_watermark if self.leading else None


def make(tmp_path, held: bool = False) -> tuple[CoordinatorRuntime, ManualWakeups, HeldWriter | None]:
    clock = ManualClock(1_000_000)
    wakeups = ManualWakeups(clock)
    runtime = CoordinatorRuntime(
        codec=CODEC,
        shard_factory=CounterShard,
        config=RuntimeConfig(data_dir=tmp_path, log_config=LogConfig(compacted=True, segment_bytes=4096),
                             write_timeout_ms=TIMEOUT_MS),
        executor=ThreadPoolExecutor(2),
        clock=clock,
        wakeups=wakeups,
    )
    writer = None
    if held:
        writer = HeldWriter(runtime.disk)
        runtime.use_writer(writer)
    return runtime, wakeups, writer


async def until(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


def release(rt: CoordinatorRuntime, writer: HeldWriter, offset: int) -> None:
    writer.high_watermark = offset
    rt.committed(TP)


def incr(rt, name):
    return asyncio.ensure_future(rt.write(TP, None, lambda t: rt.shard(TP).incr(name)))


def get(rt, name):
    return asyncio.ensure_future(rt.write(TP, None, lambda t: rt.shard(TP).get(name)))


def run(main) -> None:
    """Every wait in these tests is for an event; a test that would hang fails instead."""
    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_write_is_answered_only_once_the_high_watermark_passes_it(tmp_path):
    async def main():
        rt, _, writer = make(tmp_path, held=True)
        await rt.load(TP, 1)
        first = incr(rt, "a")
        await until(lambda: writer.appends == 1, "the append")
        partition = rt.partitions[TP]
        assert (partition.written, partition.committed) == (1, 0)
        second = incr(rt, "a")  # queued behind the batch that waits for its commit
        release(rt, writer, 0)  # the listener fires, but nothing moved
        await asyncio.sleep(0)
        assert not first.done() and not second.done()
        release(rt, writer, 1)
        assert await first == 1
        await until(lambda: writer.appends == 2, "the second append")
        assert not second.done()
        release(rt, writer, 2)
        assert await second == 2
        # Everything written is committed: a read is answered at once again.
        assert await get(rt, "a") == 2 and writer.appends == 2
        await rt.close()

    run(main)


def test_a_timed_out_write_keeps_its_state_and_a_read_behind_it_waits_for_its_commit(tmp_path):
    """Kafka: a write whose records do not commit in time fails with a timeout (the client is told
    COORDINATOR_NOT_AVAILABLE), but its records stay in the log and its state in memory; an
    operation that writes nothing waits for the pending writes before it is answered."""
    async def main():
        rt, wakeups, writer = make(tmp_path, held=True)
        await rt.load(TP, 1)
        write = incr(rt, "a")
        await until(lambda: writer.appends == 1, "the append")
        wakeups.advance(TIMEOUT_MS - 1)
        await asyncio.sleep(0)
        assert not write.done()
        wakeups.advance(1)
        with pytest.raises(WriteTimeout, match="not committed within 500 ms"):
            await write
        read = get(rt, "a")
        for _ in range(5):
            await asyncio.sleep(0)
        assert not read.done()
        release(rt, writer, 1)
        assert await read == 1  # the timed-out write's state was kept
        await rt.close()

    run(main)


def test_a_parked_request_is_released_only_with_the_commit_of_the_batch_that_releases_it(tmp_path):
    async def main():
        rt, _, writer = make(tmp_path, held=True)
        await rt.load(TP, 1)
        waiter = asyncio.ensure_future(rt.write(TP, None, lambda t: rt.shard(TP).wait_for("x", t)))
        await until(lambda: rt.partitions[TP].parked, "the request parked")  # its record is transient
        first = incr(rt, "a")
        await until(lambda: writer.appends == 1, "the first append")
        # Queued behind the batch that waits for its commit, so they run as one batch.
        second = incr(rt, "b")
        releasing = asyncio.ensure_future(rt.write(TP, None, lambda t: rt.shard(TP).release("x")))
        release(rt, writer, 1)
        assert await first == 1
        await until(lambda: writer.appends == 2, "the second batch's append")
        await asyncio.sleep(0)
        assert not waiter.done() and not releasing.done() and not second.done()
        release(rt, writer, 2)
        assert await releasing == 1 and await second == 1
        assert await waiter == "released x"
        await rt.close()

    run(main)


def test_an_append_refused_for_too_few_in_sync_replicas_reverts_only_its_batch(tmp_path):
    async def main():
        rt, _, writer = make(tmp_path, held=True)
        await rt.load(TP, 1)
        first = incr(rt, "a")
        await until(lambda: writer.appends == 1, "the append")
        release(rt, writer, 1)
        assert await first == 1
        writer.refuse = True
        with pytest.raises(NotEnoughReplicas):
            await incr(rt, "a")
        assert rt.partitions[TP].written == 1 and rt.partitions[TP].log.end_offset == 1
        writer.refuse = False
        assert await get(rt, "a") == 1  # answered at once: the refused batch left nothing
        later = incr(rt, "a")
        await until(lambda: writer.appends == 2, "the append")
        release(rt, writer, 2)
        assert await later == 2
        await rt.close()

    run(main)


def test_an_unload_or_a_lost_leadership_answers_a_waiting_write_not_coordinator(tmp_path):
    async def main():
        rt, _, writer = make(tmp_path, held=True)
        await rt.load(TP, 1)
        waiting = incr(rt, "a")
        await until(lambda: writer.appends == 1, "the append")
        await rt.unload(TP)
        with pytest.raises(NotCoordinator):
            await waiting

        writer.high_watermark = 1  # the record committed after all (the load waits for its log end to)
        await rt.load(TP, 2)  # its own log, the record the unloaded leader wrote included
        assert rt.shard(TP).values == {"a": 1}
        losing = incr(rt, "a")
        await until(lambda: writer.appends == 2, "the append")
        writer.leading = False  # the replica was demoted under the write
        rt.committed(TP)
        with pytest.raises(NotCoordinator, match="lost its leadership"):
            await losing
        await rt.close()

    run(main)


def test_a_new_leader_loads_its_uncommitted_tail_and_answers_once_it_commits(tmp_path):
    """Kafka's loader replays to the log end; what a follower fetched but never saw committed is
    state the new leader serves, answered once its high watermark reaches the log end."""
    async def main():
        local, _, _ = make(tmp_path)
        await local.load(TP, 1)
        for _ in range(3):
            await local.write(TP, 1, lambda t: local.shard(TP).incr("a"))
        await local.close()

        rt, _, writer = make(tmp_path, held=True)
        writer.high_watermark = 1
        loading = asyncio.ensure_future(rt.load(TP, 2))
        await until(lambda: TP in rt.partitions and rt.partitions[TP].shard is not None, "the replay")
        assert (rt.partitions[TP].written, rt.partitions[TP].committed) == (3, 1)
        read = get(rt, "a")
        await asyncio.sleep(0)
        assert not read.done() and not loading.done()
        release(rt, writer, 3)
        await loading
        assert await read == 3
        await rt.close()

    run(main)


@pytest.mark.parametrize(
    "exc, code",
    [
        (NotEnoughReplicas("in-sync replicas 1"), ErrorCode.coordinator_not_available),
        (WriteTimeout("not committed within 5000 ms"), ErrorCode.coordinator_not_available),
        (NotCoordinator("lost its leadership"), ErrorCode.not_coordinator),
    ],
)
def test_a_coordinator_maps_the_runtimes_refusals_as_kafka_does(exc, code):
    """CoordinatorOperationExceptionHelper: too few in-sync replicas and a timeout send the client
    to look the coordinator up again; a lost leadership is NOT_COORDINATOR."""
    assert _as_error(exc).error_code == code
    assert isinstance(exc, RUNTIME_ERRORS)  # what execute() catches and answers with an error


class LoadWritingShard(CounterShard):
    """A shard whose first operation after loading writes (as a group shard's does for a group
    over group.max.size) and arms a timer for every counter."""

    def on_loaded(self):
        armed = super().on_loaded()
        value = self.values.get("loads", 0) + 1
        return Result([Record(CounterKey("loads"), CounterValue(value))], timers=[*armed.timers, self._arm("loads")])


def test_a_refused_first_operation_after_loading_runs_again_until_it_is_written(tmp_path):
    """Its write refused (too few in-sync replicas), `on_loaded` left nothing, its timers (the
    members' sessions, in a group shard) included: it runs again after the timer back-off, as
    Kafka retries a timer operation whose write failed. Before, the partition served on with no
    timers armed: no session ever expired."""
    async def main():
        local, _, _ = make(tmp_path)
        await local.load(TP, 1)
        await local.write(TP, 1, lambda t: local.shard(TP).incr("a"))
        await local.close()

        rt, wakeups, writer = make(tmp_path, held=True)
        rt.shard_factory = LoadWritingShard
        writer.high_watermark = 1  # the record "a"
        writer.refuse = True
        await rt.load(TP, 2)  # served: its first operation failed, and is armed to run again
        timers = rt.partitions[TP].timers
        assert timers.get(("expire", "a")) is None and timers.get(ON_LOADED) is not None
        wakeups.advance(TIMER_RETRY_BACKOFF_MS)  # refused again: re-armed after the back-off
        await until(lambda: timers.get(ON_LOADED) is not None and timers.get(ON_LOADED).seq > 1, "the second try")
        writer.refuse = False
        wakeups.advance(TIMER_RETRY_BACKOFF_MS)
        await until(lambda: writer.appends == 1, "the third try's append")
        release(rt, writer, rt.partitions[TP].written)
        await until(lambda: timers.get(ON_LOADED) is None, "the retry done")
        assert rt.shard(TP).values == {"a": 1, "loads": 1}  # the refused tries left nothing
        assert timers.get(("expire", "a")) is not None and timers.get(("expire", "loads")) is not None
        wakeups.advance(EXPIRY_MS)  # the timers it armed run
        await until(lambda: rt.shard(TP).values == {}, "both counters expired")
        await rt.close()

    run(main)
