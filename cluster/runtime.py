"""The coordinator runtime: Kafka's CoordinatorRuntime on asyncio (SPEC.md §4).

One runtime serves every internal partition an actor leads. Per partition:
- operations run one at a time, in arrival order; different partitions run concurrently;
- an operation is a pure function returning a `Result` (records + response); the runtime
  replays the records into the shard, appends all records of the operations that queued up
  meanwhile in one batch (group commit), and only when that append is durable releases the
  responses (write, then respond);
- if the append fails, the shard is rebuilt from the log (its last committed state): loading and
  reverting are the same replay, and every operation of the failed batch gets the error;
- a timer's expiry is an operation like any other;
- loading a partition is replaying its log; meanwhile its requests get "load in progress".
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kernel.clock import ManualClock
from kernel.codec import Record, RecordCodec
from kernel.result import PARKED, RequestToken, Result
from kernel.timer import ManualTimer, TimerOperation

from cluster.batching import BatchingQueue
from cluster.log import LogConfig, LogWriteError, PartitionLog
from cluster.recordbatch import decode_records, encode_records

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Operation = Callable[[RequestToken], Result]


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class Shard(Protocol):
    def replay(self, record: Record) -> None: ...
    def on_loaded(self) -> None: ...


ShardFactory = Callable[[TopicPartition, Any, Any], Shard]  # (tp, clock, timer) -> shard


class NotCoordinator(Exception):
    """This runtime does not lead the partition at that epoch (Kafka NOT_COORDINATOR)."""


class LoadInProgress(Exception):
    """The partition is still replaying its log (Kafka COORDINATOR_LOAD_IN_PROGRESS)."""


class StorageError(Exception):
    """The batch holding this operation's records could not be written (KAFKA_STORAGE_ERROR)."""


class PartitionStatus(enum.Enum):
    LOADING = "loading"  # first load: requests get "load in progress"
    REVERTING = "reverting"  # rebuilding after a failed append: requests queue up meanwhile
    ACTIVE = "active"
    CLOSED = "closed"


@dataclass(slots=True)
class _Pending:
    operation: Operation
    future: asyncio.Future | None
    token: RequestToken


@dataclass(slots=True)
class _Partition:
    tp: TopicPartition
    epoch: int
    queue: BatchingQueue[_Pending]
    status: PartitionStatus = PartitionStatus.LOADING
    shard: Any = None
    log: PartitionLog | None = None
    timer: "RuntimeTimer | None" = None
    parked: dict[RequestToken, asyncio.Future] = field(default_factory=dict)
    records_since_compaction: int = 0


class Wakeups(Protocol):
    """When to run a timer's expiry: real time in production, a ManualClock in tests."""

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> Any: ...  # returns a handle with cancel()


class LoopWakeups:
    def __init__(self, clock: Any) -> None:
        self._clock = clock

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        delay = max(0, deadline_ms - self._clock.now_ms()) / 1000
        return asyncio.get_running_loop().call_later(delay, callback)


class ManualWakeups:
    """Fires due callbacks only when a test advances the ManualClock (in deadline order)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._timer = ManualTimer(clock)
        self._ids = itertools.count()

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> "_ManualHandle":
        key = next(self._ids)
        self._timer.schedule(key, deadline_ms - self.clock.now_ms(), callback)
        return _ManualHandle(self._timer, key)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        while (due := self._timer.pop_expired()) is not None:
            due[1]()


@dataclass(slots=True)
class _ManualHandle:
    timer: ManualTimer
    key: int

    def cancel(self) -> None:
        self.timer.cancel(self.key)


class WakeupTimer:
    """A domain Timer over Wakeups: when a key's deadline passes, `on_expiry(operation)` runs."""

    def __init__(self, clock: Any, wakeups: Wakeups, on_expiry: Callable[[TimerOperation], None]) -> None:
        self._clock = clock
        self._wakeups = wakeups
        self._on_expiry = on_expiry
        self._handles: dict[Hashable, Any] = {}

    def schedule(self, key: Hashable, delay_ms: int, operation: TimerOperation) -> None:
        self.cancel(key)
        deadline = self._clock.now_ms() + max(0, delay_ms)
        self._handles[key] = self._wakeups.call_at(deadline, lambda: self._fire(key, operation))

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _fire(self, key: Hashable, operation: TimerOperation) -> None:
        self._handles.pop(key, None)
        self._on_expiry(operation)


class RuntimeTimer(WakeupTimer):
    """The Timer a shard gets: expiry enqueues the operation on the shard's own partition."""

    def __init__(self, runtime: "CoordinatorRuntime", partition: _Partition) -> None:
        def expire(operation: TimerOperation) -> None:
            if partition.status is PartitionStatus.ACTIVE:
                runtime._enqueue(partition, lambda _token: operation(), None)

        super().__init__(runtime.clock, runtime.wakeups, expire)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    data_dir: Path
    log_config: LogConfig
    max_batch_operations: int = 1000
    # Compact a partition's log after this many records were appended since the last time.
    compaction_records: int = 20_000


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
        log_opener: Callable[[Path, LogConfig], PartitionLog] | None = None,
    ) -> None:
        self.codec = codec
        self.shard_factory = shard_factory
        self.config = config
        self.executor = executor
        self.clock = clock or SystemClock()
        self.wakeups = wakeups or LoopWakeups(self.clock)
        self._open_log = log_opener or (lambda path, cfg: PartitionLog.open(path, cfg))
        self.partitions: dict[TopicPartition, _Partition] = {}
        self._next_token = 0

    # -- leadership ------------------------------------------------------------------------

    async def load(self, tp: TopicPartition, epoch: int) -> str | None:
        """Become leader of tp at epoch: replay its log, then serve it.

        Returns what recovery had to cut from the log's tail, if anything (for the operator).
        """
        current = self.partitions.get(tp)
        if current is not None:
            if current.epoch == epoch:
                return None
            await self.unload(tp)
        partition = _Partition(
            tp=tp,
            epoch=epoch,
            queue=BatchingQueue(
                lambda batch: self._run_batch(partition, batch), self.config.max_batch_operations
            ),
        )
        partition.queue.pause()  # until loaded
        self.partitions[tp] = partition
        try:
            await self._rebuild(partition)
        except BaseException:
            if self.partitions.get(tp) is partition:
                del self.partitions[tp]
            raise
        recovery = partition.log.recovery if partition.log is not None else None
        return recovery.reason if recovery is not None and recovery.truncated else None

    async def unload(self, tp: TopicPartition) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is None:
            return
        partition.status = PartitionStatus.CLOSED
        if partition.timer is not None:
            partition.timer.cancel_all()
        partition.queue.pause()
        self._fail_all(partition, NotCoordinator(f"{tp} moved away"))
        await partition.queue.idle()
        if partition.log is not None:
            await self._in_executor(partition.log.close)

    def led(self) -> dict[TopicPartition, tuple[int, str]]:
        return {tp: (p.epoch, p.status.value) for tp, p in self.partitions.items()}

    def shard(self, tp: TopicPartition) -> Any:
        return self.partitions[tp].shard

    # -- operations --------------------------------------------------------------------------

    async def write(self, tp: TopicPartition, epoch: int | None, operation: Operation) -> Any:
        """Run operation on tp's shard in order; answer once its records are durable.

        Reads go through here too (operations that return no records): they then see exactly
        the state left by everything before them and never a state a failed append undoes.
        """
        partition = self._check(tp, epoch)
        future = asyncio.get_running_loop().create_future()
        self._enqueue(partition, operation, future)
        return await future

    def _check(self, tp: TopicPartition, epoch: int | None) -> _Partition:
        partition = self.partitions.get(tp)
        if partition is None or (epoch is not None and partition.epoch != epoch):
            raise NotCoordinator(f"not the coordinator of {tp[0]}-{tp[1]} at epoch {epoch}")
        if partition.status is PartitionStatus.LOADING:
            raise LoadInProgress(f"{tp[0]}-{tp[1]} is loading")
        return partition

    def _enqueue(self, partition: _Partition, operation: Operation, future: asyncio.Future | None) -> None:
        self._next_token += 1
        partition.queue.put(_Pending(operation, future, self._next_token))

    async def _run_batch(self, partition: _Partition, batch: list[_Pending]) -> None:
        answered: list[tuple[_Pending, Any]] = []
        completions: list[tuple[RequestToken, Any]] = []
        records: list[Record] = []
        for pending in batch:
            try:
                result = pending.operation(pending.token)
            except Exception as exc:
                # Operations are pure: one that raised changed nothing, so only it fails.
                log.exception("operation failed on %s", partition.tp)
                _set_exception(pending.future, exc)
                continue
            try:
                for record in result.records:
                    partition.shard.replay(record)
            except Exception as exc:
                # A half-applied replay leaves the state suspect: rebuild it from the log.
                log.exception("replay failed on %s", partition.tp)
                await self._revert(partition, batch, exc)
                return
            records.extend(result.records)
            answered.append((pending, result.response))
            completions.extend(result.completions)

        entries = self.codec.encode_all(records)
        if entries:
            numbered = [(n, key, value) for n, (key, value) in enumerate(entries)]
            data = bytearray(encode_records(numbered, self.clock.now_ms()))
            try:
                await self._in_executor(partition.log.append, [data], partition.epoch)
            except LogWriteError as exc:
                await self._revert(partition, batch, StorageError(str(exc)))
                return
            partition.records_since_compaction += len(entries)

        for pending, response in answered:
            if response is PARKED:
                if pending.future is not None:
                    partition.parked[pending.token] = pending.future
            elif pending.future is not None and not pending.future.done():
                pending.future.set_result(response)
        for token, response in completions:
            future = partition.parked.pop(token, None)
            if future is not None and not future.done():
                future.set_result(response)

        if partition.records_since_compaction >= self.config.compaction_records:
            await self._compact(partition)

    async def _revert(self, partition: _Partition, batch: list[_Pending], exc: Exception) -> None:
        for pending in batch:
            _set_exception(pending.future, exc)
        # Parked requests belong to the in-memory state being thrown away; their clients retry.
        self._fail_parked(partition, StorageError("coordinator state reverted after a failed write"))
        await self._rebuild(partition, reverting=True)

    async def _compact(self, partition: _Partition) -> None:
        partition.records_since_compaction = 0
        try:
            report = await self._in_executor(partition.log.compact, self.clock.now_ms())
            log.info("compacted %s: %s", partition.tp, report)
        except LogWriteError:
            log.exception("compaction of %s failed; the log is unchanged", partition.tp)

    # -- loading -------------------------------------------------------------------------------

    async def _rebuild(self, partition: _Partition, reverting: bool = False) -> None:
        """(Re)load the shard from the log: the load path, and the revert path after a failure."""
        if partition.status is PartitionStatus.CLOSED:
            return
        partition.status = PartitionStatus.REVERTING if reverting else PartitionStatus.LOADING
        partition.queue.pause()
        if partition.timer is not None:
            partition.timer.cancel_all()
        old_log, partition.log = partition.log, None
        if old_log is not None:
            await self._in_executor(old_log.close)
        path = self.config.data_dir / f"{partition.tp[0]}-{partition.tp[1]}"
        partition_log = await self._in_executor(self._open_log, path, self.config.log_config)
        if partition_log.recovery.truncated:
            log.warning("%s: %s", partition.tp, partition_log.recovery.reason)
        timer = RuntimeTimer(self, partition)
        shard = self.shard_factory(partition.tp, self.clock, timer)
        await self._in_executor(self._replay_log, partition_log, shard)
        if partition.status is PartitionStatus.CLOSED:  # unloaded while loading
            await self._in_executor(partition_log.close)
            return
        partition.log, partition.shard, partition.timer = partition_log, shard, timer
        partition.status = PartitionStatus.ACTIVE
        shard.on_loaded()
        partition.queue.resume()

    def _replay_log(self, partition_log: PartitionLog, shard: Shard) -> int:
        count = 0
        decode = self.codec.decode
        for batch in partition_log.batches():
            for _offset, key, value in decode_records(batch):
                shard.replay(decode(key, value))
                count += 1
        return count

    # -- helpers -------------------------------------------------------------------------------

    async def _in_executor(self, fn: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def _fail_all(self, partition: _Partition, exc: Exception) -> None:
        for pending in partition.queue.take_all():
            _set_exception(pending.future, exc)
        self._fail_parked(partition, exc)

    def _fail_parked(self, partition: _Partition, exc: Exception) -> None:
        for future in partition.parked.values():
            _set_exception(future, exc)
        partition.parked.clear()

    async def close(self) -> None:
        for tp in list(self.partitions):
            await self.unload(tp)


def _set_exception(future: asyncio.Future | None, exc: Exception) -> None:
    if future is not None and not future.done():
        future.set_exception(exc)
