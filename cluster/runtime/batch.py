"""Running one batch of a partition's queued operations: write, then respond once committed; or revert.

Each operation is pure and returns a `Result`; its records are replayed into the shard at once (the
next operation sees them), and all records of the batch go to the log in one append (group commit).
Only when that append is committed (durable with the local writer; below the high watermark with a
replicated one, writer.py) are the answers released; the timers are armed once it is written.
The operations that write nothing ahead of the batch's first record (a heartbeat, a fetch of
offsets) are answered at once when everything written before them is committed: they saw only
committed state. Otherwise they wait with the batch, as Kafka's runtime makes a write event without
records wait for the pending writes.

If the append fails or is refused, the partition's snapshot puts back what the batch's replay
touched (Kafka's SnapshottableCoordinator): only the batch's operations get the error, whatever
queued behind it runs on the state as it was before the batch, and the log is not reread. A batch
that was written but not committed in time keeps its state, as in Kafka: its answers are a
timeout, and it commits when the replicas catch up. A partition unloaded meanwhile answers
NOT_COORDINATOR.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

from kernel.codec import Record
from kernel.result import PARKED, RequestToken, Result
from kernel.timer import TimerChange

from cluster.log import LogError
from cluster.record_batch_writer import write_batch
from cluster.runtime.disk import LogDisk
from cluster.runtime.errors import NotCoordinator, NotEnoughReplicas, StorageError, WriteTimeout
from cluster.runtime.partition import Partition, PartitionStatus, Pending, set_exception
from cluster.runtime.timers import Fired
from cluster.runtime.wakeups import Wakeups
from cluster.runtime.writer import PartitionWriter

log = logging.getLogger(__name__)


class BatchRunner:
    def __init__(
        self,
        disk: LogDisk,
        writer: PartitionWriter,
        clock: Any,
        wakeups: Wakeups,
        compaction_records: int,
        write_timeout_ms: int,
    ) -> None:
        self.disk = disk
        self.writer = writer
        self.clock = clock
        self.wakeups = wakeups
        self.compaction_records = compaction_records
        self.write_timeout_ms = write_timeout_ms

    async def run(self, partition: Partition, batch: list[Pending]) -> None:
        shard = partition.shard
        now = self.clock.now_ms()
        # Whether everything written before this batch is committed: only then may an operation
        # that writes nothing be answered from the state it sees.
        settled = self._settled(partition)
        answered: list[tuple[Pending, Any]] = []
        completions: list[tuple[RequestToken, Any]] = []
        records: list[Record] = []
        timers: list[TimerChange] = []
        fired: list[Fired] = []
        partition.snapshot.begin()
        for pending in batch:
            if pending.timer is not None:
                if not self._still_due(partition, pending.timer, timers):
                    continue
                fired.append(pending.timer)
            result = _call(partition, pending)
            if result is None:
                continue
            try:
                for record in result.records:
                    shard.replay(record)
            except Exception as exc:
                # A half-applied replay: put back everything the batch touched.
                log.exception("replay failed on %s", partition.tp)
                await self._revert(partition, batch, fired, exc)
                return
            if settled and not records and _writes_nothing(result):
                # It read only committed state (every earlier batch is committed, and nothing
                # before it in this one wrote): answered now, not after this batch's fsync (Kafka's
                # runtime answers such an operation once the writes before it are).
                _answer_alone(partition, pending, result, now)
                continue
            records.extend(result.records)
            answered.append((pending, result.response))
            completions.extend(result.completions)
            timers.extend(result.timers)

        entries = self.disk.codec.encode_all(records)
        if entries:
            numbered = [(n, key, value) for n, (key, value) in enumerate(entries)]
            data = bytearray(write_batch(numbered, self.clock.now_ms()))
            try:
                partition.written = await self.writer.append(partition, [data])
            except LogError as exc:  # LogWriteError, or a log closed under it: the batch is answered either way
                await self._revert(partition, batch, fired, StorageError(str(exc)))
                return
            except (NotEnoughReplicas, NotCoordinator, StorageError) as exc:  # refused before anything was written
                await self._revert(partition, batch, fired, exc)
                return
            partition.records_since_compaction += len(entries)
        partition.snapshot.commit()

        partition.timers.expired(fired)
        partition.timers.apply(timers, now)
        if answered or completions:
            try:
                await self._wait_committed(partition, partition.written)
            except (NotCoordinator, WriteTimeout) as exc:
                _fail(partition, answered, completions, exc)
                return
        _respond(partition, answered, completions)
        if partition.records_since_compaction >= self.compaction_records:
            partition.records_since_compaction = 0
            await self.writer.compact(partition, self.clock.now_ms())

    def run_at_once(self, partition: Partition, pending: Pending) -> bool:
        """An operation on a partition at rest (nothing queued or under way), run in its caller's
        pass rather than as a batch of one on the loop's next (a Task and a pass: about a tenth of
        an unloaded heartbeat's round trip). If everything written is committed and the operation
        writes nothing, it is answered as `run` answers it in a batch of its own: True. Otherwise
        its result is dropped (operations are pure: running one changed nothing) and it is to be
        queued: False. Only operations that usually write nothing are tried, so little is run twice."""
        if not self._settled(partition):
            return False
        result = _call(partition, pending)
        if result is None:
            return True  # it raised: failed, as in a batch
        if not _writes_nothing(result):
            return False
        _answer_alone(partition, pending, result, self.clock.now_ms())
        return True

    def _settled(self, partition: Partition) -> bool:
        committed = self.writer.committed(partition)
        if committed is not None and committed > partition.committed:
            partition.committed = committed
        return partition.committed >= partition.written

    async def _wait_committed(self, partition: Partition, end: int) -> None:
        """Until the log is committed up to `end` (Kafka's deferred event queue): WriteTimeout
        after the write timeout, NotCoordinator once the partition is unloaded or no longer led."""
        deadline = self.clock.now_ms() + self.write_timeout_ms
        event = partition.commit_advanced
        while True:
            committed = self.writer.committed(partition)
            if committed is not None:
                partition.committed = max(partition.committed, committed)
            if partition.committed >= end:
                return  # committed is committed, an unload meanwhile or not
            if committed is None or partition.status is PartitionStatus.CLOSED:
                raise NotCoordinator(f"{partition.tp[0]}-{partition.tp[1]} lost its leadership before its write committed")
            if self.clock.now_ms() >= deadline:
                raise WriteTimeout(
                    f"{partition.tp[0]}-{partition.tp[1]}: the write up to offset {end} was not committed within "
                    f"{self.write_timeout_ms} ms (committed: {partition.committed})"
                )
            event.clear()
            handle = self.wakeups.call_at(deadline, event.set)
            try:
                await event.wait()
            finally:
                handle.cancel()

    @staticmethod
    def _still_due(partition: Partition, fired: Fired, changes: list[TimerChange]) -> bool:
        # An operation before it (in an earlier batch or earlier in this one) may have re-armed or
        # cancelled the key; then this expiry is stale.
        key: Hashable = fired[0]
        return partition.timers.is_armed(*fired) and not any(change.key == key for change in changes)

    async def _revert(self, partition: Partition, batch: list[Pending], fired: list[Fired], exc: Exception) -> None:
        """The batch is lost: its operations fail, the state is as before it, and its timer changes
        and answers to parked requests never happen (those requests stay parked in the restored
        state). A timer operation that was in it runs again after a back-off, as in Kafka."""
        partition.snapshot.revert()
        for pending in batch:
            set_exception(pending.future, exc)
        partition.timers.retry(fired, self.clock.now_ms())
        if partition.log is not None and partition.log.failed:
            await self.writer.recover(partition)


def _call(partition: Partition, pending: Pending) -> Result | None:
    """The operation's result; None when it raised (then only it fails: operations are pure, so
    one that raised changed nothing)."""
    try:
        return pending.operation(pending.token) or Result()
    except Exception as exc:
        log.exception("operation failed on %s", partition.tp)
        set_exception(pending.future, exc)
        return None


def _writes_nothing(result: Result) -> bool:
    """No records, no parked request completed, and not parked itself."""
    return not result.records and not result.completions and result.response is not PARKED


def _answer_alone(partition: Partition, pending: Pending, result: Result, now: int) -> None:
    """An operation that wrote nothing, on committed state: its timers armed and its answer given now."""
    partition.timers.apply(result.timers, now)
    _respond(partition, [(pending, result.response)], [])


def _fail(partition: Partition, answered: list[tuple[Pending, Any]], completions: list[tuple[RequestToken, Any]],
          exc: Exception) -> None:
    """The batch's state stays, its answers are the error: the parked requests it completed too."""
    for pending, _response in answered:
        set_exception(pending.future, exc)
    for token, _response in completions:
        set_exception(partition.parked.pop(token, None), exc)


def _respond(partition: Partition, answered: list[tuple[Pending, Any]], completions: list[tuple[RequestToken, Any]]) -> None:
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
