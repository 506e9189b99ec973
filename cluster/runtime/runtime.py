"""The coordinator runtime: Kafka's CoordinatorRuntime on asyncio (SPEC.md §4).

One runtime serves every internal partition an actor leads. Per partition, operations run one at a
time in arrival order (batch.py runs them: write, then respond, or revert); different partitions
run concurrently. A timer's expiry is an operation like any other, a value (`ShardCall`) run on the
partition's shard (timers.py). Loading a partition is replaying its log; meanwhile its requests get
"load in progress", and the shard's `on_loaded` is the first operation after it (it arms the timers
the state needs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kernel.codec import Record, RecordCodec
from kernel.result import Result
from kernel.snapshot import TouchedKeys, snapshot_of
from kernel.timer import ShardCall

from cluster.batching import BatchingQueue
from cluster.log import LogConfig
from cluster.runtime.batch import BatchRunner
from cluster.runtime.disk import LogDisk, LogOpener
from cluster.runtime.errors import LoadInProgress, NotCoordinator, NotEnoughReplicas, StorageError, WriteTimeout
from cluster.runtime.partition import Operation, Partition, PartitionStatus, Pending, TopicPartition, set_exception
from cluster.runtime.timers import TIMER_RETRY_BACKOFF_MS, TimerTable
from cluster.runtime.wakeups import LoopWakeups, SystemClock, Wakeups
from cluster.runtime.writer import LocalWriter, PartitionWriter

log = logging.getLogger(__name__)

# The timer of `on_loaded` run again after its first run's write was refused.
ON_LOADED = ("raygroups", "on-loaded")
_ON_LOADED_CALL = ShardCall("on_loaded")


class Shard(Protocol):
    """A shard keeps its own snapshot (`touched` + `restore`, kernel/snapshot.py); a small one that
    keeps none is copied whole per batch. Either way a failed write is undone in memory."""

    touched: TouchedKeys  # what replay changed in the open batch, as it was before

    def replay(self, record: Record) -> None: ...
    def restore(self, saved: dict[Hashable, Any]) -> None: ...
    def on_loaded(self) -> Result: ...


ShardFactory = Callable[[TopicPartition, Any], Shard]  # (tp, clock) -> shard


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    data_dir: Path
    log_config: LogConfig
    max_batch_operations: int = 1000
    # Compact a partition's log after this many records were appended since the last time.
    compaction_records: int = 20_000
    # One syncfs for the appends of every partition (disk.py); off where a test controls each log's fsync.
    shared_sync: bool = False
    # How long an answer waits for its batch to commit (offsets.commit.timeout.ms,
    # share.coordinator.write.timeout.ms); only a replicated writer ever waits.
    write_timeout_ms: int = 5_000


class CoordinatorRuntime:
    def __init__(
        self,
        *,
        codec: RecordCodec,
        shard_factory: ShardFactory,
        config: RuntimeConfig,
        executor: Executor,
        clock: Any = None,
        wakeups: Wakeups | None = None,
        log_opener: LogOpener | None = None,
    ) -> None:
        self.codec = codec
        self.shard_factory = shard_factory
        self.config = config
        self.executor = executor
        self.clock = clock or SystemClock()
        self.wakeups = wakeups or LoopWakeups(self.clock)
        self.disk = LogDisk(codec, executor, config.data_dir, config.log_config, log_opener, config.shared_sync)
        self.writer: PartitionWriter = LocalWriter(self.disk)
        self.batches = BatchRunner(
            self.disk, self.writer, self.clock, self.wakeups, config.compaction_records, config.write_timeout_ms
        )
        self.partitions: dict[TopicPartition, Partition] = {}
        self._next_token = 0

    def use_writer(self, writer: PartitionWriter) -> None:
        """Where batches go from now on (before the first load): a replica host's writer, which
        keeps this runtime's local writer for the partitions kept in one copy."""
        self.writer = self.batches.writer = writer

    # -- leadership ------------------------------------------------------------------------

    async def load(self, tp: TopicPartition, epoch: int) -> str | None:
        """Become leader of tp at epoch: replay its log, then serve it.

        Returns what recovery had to cut from the log's tail, if anything (for the operator).
        The load goes on when its caller stops waiting (the controller's timeout): asked again at
        the same epoch, this waits for the load under way rather than call a loading partition loaded.
        """
        current = self.partitions.get(tp)
        if current is not None:
            if current.epoch == epoch:
                return await asyncio.shield(current.loading) if current.loading is not None else None
            await self.unload(tp)
        partition = Partition(
            tp=tp,
            epoch=epoch,
            queue=BatchingQueue(lambda batch: self.batches.run(partition, batch), self.config.max_batch_operations),
            timers=TimerTable(self.wakeups, lambda key, seq: self._expire(partition, key, seq)),
        )
        partition.queue.pause()  # until loaded
        self.partitions[tp] = partition
        partition.loading = asyncio.ensure_future(self._load_or_drop(partition))
        # Retrieved here so that a failure nobody waits for any more is not reported as unhandled.
        partition.loading.add_done_callback(lambda task: task.cancelled() or task.exception())
        return await asyncio.shield(partition.loading)

    async def _load_or_drop(self, partition: Partition) -> str | None:
        try:
            await self._load(partition)
        except BaseException:
            # Nothing is left behind: the next try starts afresh.
            if self.partitions.get(partition.tp) is partition:
                del self.partitions[partition.tp]
                partition.move_to(PartitionStatus.CLOSED)
            try:
                await self._close_log(partition)
            except Exception:  # noqa: BLE001 - the load's own failure is what is raised
                log.exception("%s: closing the log of a failed load failed", partition.tp)
            raise
        finally:
            partition.loading = None
        recovery = partition.log.recovery if partition.log is not None else None
        return recovery.reason if recovery is not None and recovery.truncated else None

    async def _load(self, partition: Partition) -> None:
        """Open the log, replay it into a new shard, then serve; `on_loaded` runs first."""
        partition.log = partition_log = await self.writer.open(partition)
        if partition_log.recovery.truncated:
            log.warning("%s: %s", partition.tp, partition_log.recovery.reason)
        shard = self.shard_factory(partition.tp, self.clock)
        await self.disk.replay(partition_log, shard)
        if partition.status is PartitionStatus.CLOSED:  # unloaded while loading: its unload waits for this
            await self._close_log(partition)
            return
        partition.shard, partition.snapshot = shard, snapshot_of(shard)
        # A new leader serves what its log holds, its uncommitted tail too (Kafka's loader reads to
        # the log end); answers wait until that tail is committed.
        partition.written = partition_log.end_offset
        partition.committed = min(self.writer.committed(partition) or 0, partition.written)
        partition.move_to(PartitionStatus.ACTIVE)
        # First in the queue, and awaited: once load returns, the timers the state needs are armed.
        loaded = asyncio.get_running_loop().create_future()
        self._enqueue(partition, lambda _token: shard.on_loaded(), loaded)
        partition.queue.resume()
        try:
            await loaded
        except (StorageError, NotEnoughReplicas) as exc:
            # Its write was refused, so nothing of it happened, its timers included (the members'
            # sessions, the offsets' expiry): it runs again as a timer operation, which the
            # runtime retries after a back-off until its write goes through, as Kafka's
            # coordinator retries a timer operation whose write failed.
            if partition.status is PartitionStatus.ACTIVE:  # not unloaded meanwhile
                log.warning("%s: the first operation after loading failed (%s); it runs again in %d ms",
                            partition.tp, exc, TIMER_RETRY_BACKOFF_MS)
                partition.timers.arm(ON_LOADED, TIMER_RETRY_BACKOFF_MS, _ON_LOADED_CALL, self.clock.now_ms())
        except (NotCoordinator, WriteTimeout):
            # Moved away (nothing to arm), or written and armed with only its answer timed out.
            log.exception("%s: the first operation after loading failed", partition.tp)

    async def unload(self, tp: TopicPartition) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is None:
            return
        partition.move_to(PartitionStatus.CLOSED)
        partition.timers.cancel_all()
        partition.queue.pause()
        self._fail_all(partition, NotCoordinator(f"{tp} moved away"))
        partition.commit_advanced.set()  # a batch waiting for its commit answers NOT_COORDINATOR
        await partition.queue.idle()
        if partition.loading is not None:
            # A replay under way reads the log to its end: an unload returns once it has stopped,
            # so that a follower's truncation never cuts under it.
            await asyncio.wait([partition.loading])
        await self._close_log(partition)

    async def _close_log(self, partition: Partition) -> None:
        """Once: the writer's close of what its open gave (a failed load, an unload, or both)."""
        if partition.log is not None:
            await self.writer.close(partition)
            partition.log = None

    def raise_epoch(self, tp: TopicPartition, epoch: int) -> None:
        """Still the leader, at the controller's newer leader epoch: requests routed with it are
        served, those with the old one are fenced (Kafka's scheduleLoadOperation on an active
        partition). Nothing is reloaded."""
        partition = self.partitions.get(tp)
        if partition is not None and epoch > partition.epoch:
            partition.epoch = epoch

    def committed(self, tp: TopicPartition) -> None:
        """The writer's high-watermark listener: tp's committed offset may have moved, so the
        answers waiting for it look again."""
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.commit_advanced.set()

    def led(self) -> dict[TopicPartition, tuple[int, str]]:
        return {tp: (p.epoch, p.status.value) for tp, p in self.partitions.items()}

    def shard(self, tp: TopicPartition) -> Any:
        return self.partitions[tp].shard

    async def close(self) -> None:
        for tp in list(self.partitions):
            await self.unload(tp)

    # -- operations --------------------------------------------------------------------------

    async def write(self, tp: TopicPartition, epoch: int | None, operation: Operation) -> Any:
        """Run operation on tp's shard in order; answer once its records are committed.

        Reads go through here too (operations that return no records): they then see exactly
        the state left by everything before them, answered only once that state is committed,
        and never a state a failed append undoes.
        """
        return await self.submit(tp, epoch, operation)

    def submit(self, tp: TopicPartition, epoch: int | None, operation: Operation, at_once: bool = False) -> asyncio.Future:
        """`write` without a coroutine: queued now, the future answers (a caller running many
        operations at once waits for their futures rather than start a task per operation).

        `at_once`: the operation usually writes nothing (a heartbeat). On a partition at rest it
        runs now, and if it wrote nothing it is answered before this returns (BatchRunner.run_at_once);
        otherwise it queues as any other."""
        partition = self._check(tp, epoch)
        future = asyncio.get_running_loop().create_future()
        pending = self._pending(operation, future)
        if at_once and partition.queue.at_rest and partition.status is PartitionStatus.ACTIVE \
                and self.batches.run_at_once(partition, pending):
            return future
        partition.queue.put(pending)
        return future

    def _check(self, tp: TopicPartition, epoch: int | None) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None or (epoch is not None and partition.epoch != epoch):
            raise NotCoordinator(f"not the coordinator of {tp[0]}-{tp[1]} at epoch {epoch}")
        if partition.status is PartitionStatus.LOADING:
            raise LoadInProgress(f"{tp[0]}-{tp[1]} is loading")
        return partition

    def _enqueue(
        self,
        partition: Partition,
        operation: Operation,
        future: asyncio.Future | None,
        timer: tuple[Hashable, int] | None = None,
    ) -> None:
        partition.queue.put(self._pending(operation, future, timer))

    def _pending(self, operation: Operation, future: asyncio.Future | None, timer: tuple[Hashable, int] | None = None) -> Pending:
        """The operation with the next request token (the shard parks a request under it)."""
        self._next_token += 1
        return Pending(operation, future, self._next_token, timer)

    def _expire(self, partition: Partition, key: Hashable, seq: int) -> None:
        """A timer's deadline passed: its operation queues like a request (if still the key's timer)."""
        armed = partition.timers.get(key)
        if partition.status is not PartitionStatus.ACTIVE or armed is None or armed.seq != seq:
            return
        call = armed.operation
        self._enqueue(partition, lambda _token: call(partition.shard), None, (key, seq))

    def _fail_all(self, partition: Partition, exc: Exception) -> None:
        for pending in partition.queue.take_all():
            set_exception(pending.future, exc)
        partition.fail_parked(exc)
