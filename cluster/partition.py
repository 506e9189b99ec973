"""A user-topic partition on its leader: the log, group-committed appends, and fetch waiters.

Produce requests that arrive while an append is being written are written together in the
next append (one write, one fsync). Idempotent producers' sequences and epochs are checked in
that same serial path, request by request in arrival order, each against the state the requests
ahead of it leave (cluster/producer_state.py): two in-flight requests of one producer cannot
race, and a retry is recognised even when its original is in the same append. A fetch that finds
nothing new waits on `data_appended` until records arrive or its max wait passes (Kafka's
DelayedFetch).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kernel.message import message

from cluster.batching import BatchingQueue
from cluster.log import LogWriteError, OffsetOutOfRange, PartitionLog, group_commit
from cluster.producer_state import Accepted, Duplicate, ProducerStateEntry, ProducerStateManager, Verdict
from cluster.recordbatch import BatchError, BatchHeader, check_produced, parse_header, record_timestamps
from cluster.replication.leader import check_leader_epoch


# Every answer crosses Ray: as flat messages (kernel/message.py) they pickle as a plain tuple, in
# a third of the time of the default reduce of a slots dataclass holding an enum.
@message(flat=True, frozen=False)
class ProduceOutcome:
    error_code: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None


@message(flat=True, frozen=False)
class FetchOutcome:
    error_code: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


# KIP-320, for user and internal partitions alike, and for follower fetches: one check.
check_client_epoch = check_leader_epoch


@dataclass(slots=True)
class _Append:
    batches: list[bytearray]
    headers: list[BatchHeader]
    future: asyncio.Future
    acks_all: bool = True
    timeout_ms: int = 30_000


@dataclass(slots=True)
class _Staged:
    """One append's plan: each request's verdict, in arrival order, and what is to be written."""

    verdicts: list[Verdict]
    staged: dict[int, ProducerStateEntry]
    batches: list[bytearray]
    headers: list[BatchHeader]
    expected_offsets: list[int]


class UserPartition:
    def __init__(
        self,
        topic: str,
        partition: int,
        epoch: int,
        log: PartitionLog,
        executor: Executor,
        max_batch_bytes: int,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.epoch = epoch
        self.log = log
        # Rebuilt from the log's batch headers by whoever opens the log (PartitionLeader.load).
        self.producer_state = producer_state if producer_state is not None else ProducerStateManager()
        self.executor = executor
        # With flush=batch, the appends of every partition on this disk share one sync (one syncfs
        # for all the partitions this leader writes at once) where the kernel makes that safe.
        self._group = group_commit.for_logs(executor, log.directory, log.config)
        self.max_batch_bytes = max_batch_bytes
        self.data_appended = asyncio.Event()
        self._appends: BatchingQueue[_Append] = BatchingQueue(self._write)
        self.closed = False

    # -- produce -------------------------------------------------------------------------------

    def submit(self, records: bytes, acks_all: bool = True, timeout_ms: int = 30_000) -> ProduceOutcome | asyncio.Future:
        """Check the batches and queue them for the next append: the outcome of a rejected request
        now, else a future of it. Not a coroutine, so that a leader queues the many requests of one
        call without a task each (a task per batch was most of the leader's Python per batch)."""
        try:
            checked = check_produced(records)
        except BatchError as exc:
            return ProduceOutcome(exc.error_code, message=str(exc))
        batches: list[bytearray] = []
        headers: list[BatchHeader] = []
        for batch, header in checked:
            if len(batch) > self.max_batch_bytes:
                return ProduceOutcome(
                    ErrorCode.message_too_large,
                    message=f"record batch of {len(batch)} bytes exceeds message.max.bytes ({self.max_batch_bytes})",
                )
            batches.append(batch)
            headers.append(header)
        future = asyncio.get_running_loop().create_future()
        self._appends.put(_Append(batches, headers, future, acks_all, timeout_ms))
        return future

    async def _write(self, appends: list[_Append]) -> None:
        plan = self._stage(appends)
        offsets: list[int] = []
        if plan.batches:
            try:
                if self._group is not None:
                    offsets = await self._group.append(self.log, plan.batches, self.epoch, plan.headers)
                else:
                    offsets = await asyncio.get_running_loop().run_in_executor(
                        self.executor, self.log.append, plan.batches, self.epoch, plan.headers
                    )
            except LogWriteError as exc:
                self._write_failed(appends, exc)
                return
            assert offsets == plan.expected_offsets, (offsets, plan.expected_offsets)
            self.producer_state.update(plan.staged)
        for a, outcome in zip(appends, self._outcomes(appends, plan, offsets)):
            _resolve(a.future, outcome)
        if plan.batches:
            self._appended()

    def _stage(self, appends: list[_Append]) -> _Staged:
        """Check every request before writing any, in arrival order; offsets are known in advance
        because this is the only writer: the log numbers batches on from its end offset."""
        next_offset = self.log.end_offset
        plan = _Staged([], {}, [], [], [])
        for a in appends:
            verdict = self.producer_state.analyze(a.headers, next_offset, plan.staged)
            plan.verdicts.append(verdict)
            if isinstance(verdict, Accepted):
                plan.staged.update(verdict.entries)
                plan.batches += a.batches
                plan.headers += a.headers
                for header in a.headers:
                    plan.expected_offsets.append(next_offset)
                    next_offset += header.last_offset_delta + 1
        return plan

    def _outcomes(self, appends: list[_Append], plan: _Staged, offsets: list[int]) -> list[ProduceOutcome]:
        """Each request's answer once its batches are written at `offsets`."""
        out = []
        i = 0
        log_start = self.log.log_start_offset
        for a, verdict in zip(appends, plan.verdicts):
            if isinstance(verdict, Accepted):
                out.append(ProduceOutcome(ErrorCode.none, offsets[i], log_start))
                i += len(a.batches)
            elif isinstance(verdict, Duplicate):
                # Kafka answers a retry with the offsets the batch got the first time, and no error.
                out.append(ProduceOutcome(ErrorCode.none, verdict.batch.first_offset, log_start))
            else:
                out.append(ProduceOutcome(verdict.error_code, message=verdict.message))
        return out

    @staticmethod
    def _write_failed(appends: list[_Append], exc: BaseException) -> None:
        # Nothing was written, so the staged producer state is dropped. Retries, duplicates
        # and rejections of this append all get the retriable storage error: their answers
        # may have depended on batches that are not in the log after all.
        for a in appends:
            _resolve(a.future, ProduceOutcome(ErrorCode.kafka_storage_error, message=f"write failed: {exc}"))

    def _appended(self) -> None:
        # Wake every waiting fetch, then arm a fresh event for the next ones.
        self.data_appended.set()
        self.data_appended = asyncio.Event()

    # -- fetch -----------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, up_to: int | None = None) -> FetchOutcome:
        """Whole batches from offset (none after the one holding `up_to` when given); max_bytes 0
        reports positions only."""
        log = self.log
        end, start = log.end_offset, log.log_start_offset
        if offset > end or offset < start:
            return FetchOutcome(ErrorCode.offset_out_of_range, end, start)
        if max_bytes <= 0 or offset == end:
            return FetchOutcome(ErrorCode.none, end, start)
        try:
            data = log.read(offset, max_bytes, up_to)
        except OffsetOutOfRange:
            return FetchOutcome(ErrorCode.offset_out_of_range, end, start)
        return FetchOutcome(ErrorCode.none, end, start, data)

    def latest_offset(self) -> int:
        """Where a consumer starting at the latest would start: the log end (a replicated
        partition's high watermark)."""
        return self.log.end_offset

    # -- list offsets ------------------------------------------------------------------------------

    def offset_for(self, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) per ListOffsets: -1 latest, -2 earliest, -3 max timestamp, -4
        earliest local (v8), -5 latest tiered (v9), else by time.

        Kafka's UnifiedLog.fetchOffsetByTimestamp without tiered storage, which raygroups has not:
        the earliest local offset is the log start offset, and there is no tiered offset (-1)."""
        log = self.log
        if timestamp == -1:
            return log.end_offset, -1
        if timestamp in (-2, -4):
            return log.log_start_offset, -1
        if timestamp == -5:
            return -1, -1
        if timestamp == -3:
            batch = log.max_timestamp_batch()
            if batch is None:
                return -1, -1
            return _record_at_or_after(batch, parse_header(batch).max_timestamp, exact_max=True)
        batch = log.offset_for_timestamp(timestamp)
        if batch is None:
            return -1, -1
        return _record_at_or_after(batch, timestamp)

    async def close(self) -> None:
        self.closed = True
        await self._appends.idle()
        for a in self._appends.take_all():
            _resolve(a.future, ProduceOutcome(ErrorCode.not_leader_or_follower, message="partition moved"))
        await asyncio.get_running_loop().run_in_executor(self.executor, self.log.close)
        self.data_appended.set()


def _record_at_or_after(batch: bytes, timestamp: int, exact_max: bool = False) -> tuple[int, int]:
    header = parse_header(batch)
    try:
        stamps = record_timestamps(batch)
    except BatchError:
        # Records that do not fit their batch (produce checks only the header): Kafka would not
        # have stored them, and the batch is the finest grain left to answer with.
        stamps = None
    if stamps is None:  # compressed: the batch is the finest grain we read without decompressing
        return header.base_offset, header.max_timestamp
    for offset, ts in stamps:
        if (ts == timestamp) if exact_max else (ts >= timestamp):
            return offset, ts
    return header.last_offset, header.max_timestamp


def _resolve(future: asyncio.Future, value: object) -> None:
    if not future.done():
        future.set_result(value)
