"""The coordinator runtime: Kafka's CoordinatorRuntime on asyncio (SPEC.md §4).

One runtime serves every internal partition an actor leads. Per partition:
- operations run one at a time, in arrival order; different partitions run concurrently;
- an operation is a pure function returning a `Result` (records, response, timer changes); the
  runtime replays the records into the shard, appends all records of the operations that queued
  up meanwhile in one batch (group commit), and only when that append is durable releases the
  responses and arms the timers (write, then respond);
- if the append fails, the shard puts back what the batch's replay touched (kernel/snapshot.py,
  Kafka's SnapshottableCoordinator): only the batch's operations get the error, and whatever
  queued behind it runs on the state as it was before the batch. The log is not reread;
- a timer's expiry is an operation like any other, a value (`ShardCall`) run on the partition's
  shard; one whose key was re-armed or cancelled while it waited in the queue does not run;
- loading a partition is replaying its log; meanwhile its requests get "load in progress". The
  shard's `on_loaded` is the first operation after it (it arms the timers the state needs).
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
from kernel.lifecycle import validate_transition
from kernel.result import PARKED, RequestToken, Result
from kernel.snapshot import ShardSnapshot, TouchedKeys, snapshot_of
from kernel.timer import ManualTimer, Schedule, ShardCall, TimerChange, TimerOperation

from cluster.batching import BatchingQueue
from cluster.log import LogConfig, LogWriteError, PartitionLog
from cluster.recordbatch import decode_records, encode_records

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Operation = Callable[[RequestToken], Result]

# Kafka's coordinator retries a timer operation whose write failed after this back-off.
TIMER_RETRY_BACKOFF_MS = 500


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class Shard(Protocol):
    """A shard keeps its own snapshot (`touched` + `restore`, kernel/snapshot.py); a small one that
    keeps none is copied whole per batch. Either way a failed write is undone in memory."""

    touched: TouchedKeys  # what replay changed in the open batch, as it was before

    def replay(self, record: Record) -> None: ...
    def restore(self, saved: dict[Hashable, Any]) -> None: ...
    def on_loaded(self) -> Result: ...


ShardFactory = Callable[[TopicPartition, Any], Shard]  # (tp, clock) -> shard


class NotCoordinator(Exception):
    """This runtime does not lead the partition at that epoch (Kafka NOT_COORDINATOR)."""


class LoadInProgress(Exception):
    """The partition is still replaying its log (Kafka COORDINATOR_LOAD_IN_PROGRESS)."""


class StorageError(Exception):
    """The batch holding this operation's records could not be written (KAFKA_STORAGE_ERROR)."""


class PartitionStatus(enum.Enum):
    """loading -> active -> closed; a load that is cut short (unload, failure) goes to closed."""

    LOADING = "loading"  # replaying the log: requests get "load in progress"
    ACTIVE = "active"
    CLOSED = "closed"

    def validate_transition(self, target: "PartitionStatus") -> None:
        validate_transition(_VALID_PREVIOUS, self, target, "coordinator partition")


_VALID_PREVIOUS: dict[PartitionStatus, frozenset[PartitionStatus]] = {
    PartitionStatus.ACTIVE: frozenset({PartitionStatus.LOADING}),
    PartitionStatus.CLOSED: frozenset({PartitionStatus.LOADING, PartitionStatus.ACTIVE}),
}


@dataclass(slots=True)
class _Pending:
    operation: Operation
    future: asyncio.Future | None
    token: RequestToken
    timer: tuple[Hashable, int] | None = None  # (key, arming) of the timer whose expiry this is


@dataclass(slots=True)
class _Armed:
    seq: int
    operation: ShardCall
    handle: Any


@dataclass(slots=True)
class _Partition:
    tp: TopicPartition
    epoch: int
    queue: BatchingQueue[_Pending]
    status: PartitionStatus = PartitionStatus.LOADING
    shard: Any = None
    snapshot: ShardSnapshot | None = None
    log: PartitionLog | None = None
    timers: dict[Hashable, _Armed] = field(default_factory=dict)
    parked: dict[RequestToken, asyncio.Future] = field(default_factory=dict)
    records_since_compaction: int = 0

    def move_to(self, target: PartitionStatus) -> None:
        self.status.validate_transition(target)
        self.status = target


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
        self._armings = itertools.count(1)

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
            await self._load(partition)
        except BaseException:
            if self.partitions.get(tp) is partition:
                del self.partitions[tp]
                partition.move_to(PartitionStatus.CLOSED)
            raise
        recovery = partition.log.recovery if partition.log is not None else None
        return recovery.reason if recovery is not None and recovery.truncated else None

    async def unload(self, tp: TopicPartition) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is None:
            return
        partition.move_to(PartitionStatus.CLOSED)
        self._disarm_all(partition)
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

    def _enqueue(
        self,
        partition: _Partition,
        operation: Operation,
        future: asyncio.Future | None,
        timer: tuple[Hashable, int] | None = None,
    ) -> None:
        self._next_token += 1
        partition.queue.put(_Pending(operation, future, self._next_token, timer))

    async def _run_batch(self, partition: _Partition, batch: list[_Pending]) -> None:
        shard = partition.shard
        now = self.clock.now_ms()
        answered: list[tuple[_Pending, Any]] = []
        completions: list[tuple[RequestToken, Any]] = []
        records: list[Record] = []
        timers: list[TimerChange] = []
        fired: list[tuple[Hashable, int]] = []
        snapshot = partition.snapshot
        snapshot.begin()
        for pending in batch:
            if pending.timer is not None:
                key, seq = pending.timer
                # Kafka's timer event checks it is still the key's timer: an operation before it
                # (in an earlier batch or in this one) may have re-armed or cancelled the key.
                if not self._is_armed(partition, key, seq) or any(change.key == key for change in timers):
                    continue
                fired.append(pending.timer)
            try:
                result = pending.operation(pending.token) or Result()
            except Exception as exc:
                # Operations are pure: one that raised changed nothing, so only it fails.
                log.exception("operation failed on %s", partition.tp)
                _set_exception(pending.future, exc)
                continue
            try:
                for record in result.records:
                    shard.replay(record)
            except Exception as exc:
                # A half-applied replay: put back everything the batch touched.
                log.exception("replay failed on %s", partition.tp)
                await self._revert(partition, batch, fired, exc)
                return
            records.extend(result.records)
            answered.append((pending, result.response))
            completions.extend(result.completions)
            timers.extend(result.timers)

        entries = self.codec.encode_all(records)
        if entries:
            numbered = [(n, key, value) for n, (key, value) in enumerate(entries)]
            data = bytearray(encode_records(numbered, self.clock.now_ms()))
            try:
                await self._in_executor(partition.log.append, [data], partition.epoch)
            except LogWriteError as exc:
                await self._revert(partition, batch, fired, StorageError(str(exc)))
                return
            partition.records_since_compaction += len(entries)
        snapshot.commit()

        for key, seq in fired:
            if self._is_armed(partition, key, seq):
                del partition.timers[key]
        self._apply_timers(partition, timers, now)
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

    async def _revert(
        self, partition: _Partition, batch: list[_Pending], fired: list[tuple[Hashable, int]], exc: Exception
    ) -> None:
        """The batch is lost: its operations fail, the state is as before it, and its timer changes
        and answers to parked requests never happen (those requests stay parked in the restored
        state). A timer operation that was in it runs again after a back-off, as in Kafka."""
        partition.snapshot.revert()
        for pending in batch:
            _set_exception(pending.future, exc)
        now = self.clock.now_ms()
        for key, seq in fired:
            armed = partition.timers.get(key)
            if armed is not None and armed.seq == seq:
                self._arm(partition, key, TIMER_RETRY_BACKOFF_MS, armed.operation, now)
        if partition.log is not None and partition.log.failed:
            # The log could not even cut the failed write off its tail: it asks to be reopened
            # (its recovery drops the partial batch), and the restored state matches it again.
            await self._reopen_log(partition)

    async def _reopen_log(self, partition: _Partition) -> None:
        old_log, partition.log = partition.log, None
        if old_log is not None:
            await self._in_executor(old_log.close)
        try:
            partition.log = await self._in_executor(self._open_log, self._path(partition), self.config.log_config)
        except LogWriteError:
            # Still unreadable: every later append fails fast until the partition is moved.
            log.exception("%s: reopening the log after a failed write failed", partition.tp)
            partition.log = old_log

    async def _compact(self, partition: _Partition) -> None:
        partition.records_since_compaction = 0
        try:
            report = await self._in_executor(partition.log.compact, self.clock.now_ms())
            log.info("compacted %s: %s", partition.tp, report)
        except LogWriteError:
            log.exception("compaction of %s failed; the log is unchanged", partition.tp)

    # -- timers ------------------------------------------------------------------------------------

    def _apply_timers(self, partition: _Partition, changes: list[TimerChange], now: int) -> None:
        for change in changes:
            if isinstance(change, Schedule):
                self._arm(partition, change.key, change.delay_ms, change.operation, now)
            else:
                armed = partition.timers.pop(change.key, None)
                if armed is not None:
                    armed.handle.cancel()

    def _arm(self, partition: _Partition, key: Hashable, delay_ms: int, operation: ShardCall, now: int) -> None:
        previous = partition.timers.pop(key, None)
        if previous is not None:
            previous.handle.cancel()
        seq = next(self._armings)
        handle = self.wakeups.call_at(now + max(0, delay_ms), lambda: self._fire(partition, key, seq))
        partition.timers[key] = _Armed(seq, operation, handle)

    def _fire(self, partition: _Partition, key: Hashable, seq: int) -> None:
        armed = partition.timers.get(key)
        if partition.status is not PartitionStatus.ACTIVE or armed is None or armed.seq != seq:
            return
        call = armed.operation
        self._enqueue(partition, lambda _token: call(partition.shard), None, (key, seq))

    @staticmethod
    def _is_armed(partition: _Partition, key: Hashable, seq: int) -> bool:
        armed = partition.timers.get(key)
        return armed is not None and armed.seq == seq

    def _disarm_all(self, partition: _Partition) -> None:
        for armed in partition.timers.values():
            armed.handle.cancel()
        partition.timers.clear()

    # -- loading -------------------------------------------------------------------------------

    def _path(self, partition: _Partition) -> Path:
        return self.config.data_dir / f"{partition.tp[0]}-{partition.tp[1]}"

    async def _load(self, partition: _Partition) -> None:
        """Open the log, replay it into a new shard, then serve; `on_loaded` runs first."""
        partition_log = await self._in_executor(self._open_log, self._path(partition), self.config.log_config)
        if partition_log.recovery.truncated:
            log.warning("%s: %s", partition.tp, partition_log.recovery.reason)
        shard = self._new_shard(partition.tp)
        await self._in_executor(self._replay_log, partition_log, shard)
        if partition.status is PartitionStatus.CLOSED:  # unloaded while loading
            await self._in_executor(partition_log.close)
            return
        partition.log, partition.shard, partition.snapshot = partition_log, shard, snapshot_of(shard)
        partition.move_to(PartitionStatus.ACTIVE)
        # First in the queue, and awaited: once load returns, the timers the state needs are armed.
        loaded = asyncio.get_running_loop().create_future()
        self._enqueue(partition, lambda _token: shard.on_loaded(), loaded)
        partition.queue.resume()
        try:
            await loaded
        except (StorageError, NotCoordinator):
            log.exception("%s: the first operation after loading failed", partition.tp)

    def _new_shard(self, tp: TopicPartition) -> Shard:
        return self.shard_factory(tp, self.clock)

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
