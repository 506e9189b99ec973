"""A user-topic partition on its leader: the log, group-committed appends, and fetch waiters.

Produce requests that arrive while an append is being written are written together in the
next append (one write, one fsync). A fetch that finds nothing new waits on `data_appended`
until records arrive or its max wait passes (Kafka's DelayedFetch).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from cluster.batching import BatchingQueue
from cluster.log import LogWriteError, OffsetOutOfRange, PartitionLog
from cluster.recordbatch import BatchError, parse_header, record_timestamps, split_produced


@dataclass(slots=True)
class ProduceOutcome:
    error_code: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None


@dataclass(slots=True)
class FetchOutcome:
    error_code: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass(slots=True)
class _Append:
    batches: list[bytearray]
    future: asyncio.Future


class UserPartition:
    def __init__(
        self, topic: str, partition: int, epoch: int, log: PartitionLog, executor: Executor, max_batch_bytes: int
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.epoch = epoch
        self.log = log
        self.executor = executor
        self.max_batch_bytes = max_batch_bytes
        self.data_appended = asyncio.Event()
        self._appends: BatchingQueue[_Append] = BatchingQueue(self._write)
        self.closed = False

    # -- produce -------------------------------------------------------------------------------

    async def produce(self, records: bytes) -> ProduceOutcome:
        try:
            batches = split_produced(records)
        except BatchError as exc:
            return ProduceOutcome(exc.error_code, message=str(exc))
        for batch in batches:
            if len(batch) > self.max_batch_bytes:
                return ProduceOutcome(
                    ErrorCode.message_too_large,
                    message=f"record batch of {len(batch)} bytes exceeds message.max.bytes ({self.max_batch_bytes})",
                )
        future = asyncio.get_running_loop().create_future()
        self._appends.put(_Append(batches, future))
        return await future

    async def _write(self, appends: list[_Append]) -> None:
        batches = [b for a in appends for b in a.batches]
        try:
            offsets = await asyncio.get_running_loop().run_in_executor(
                self.executor, self.log.append, batches, self.epoch
            )
        except LogWriteError as exc:
            for a in appends:
                _resolve(a.future, ProduceOutcome(ErrorCode.kafka_storage_error, message=f"write failed: {exc}"))
            return
        i = 0
        for a in appends:
            _resolve(a.future, ProduceOutcome(ErrorCode.none, offsets[i], self.log.log_start_offset))
            i += len(a.batches)
        # Wake every waiting fetch, then arm a fresh event for the next ones.
        self.data_appended.set()
        self.data_appended = asyncio.Event()

    # -- fetch -----------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> FetchOutcome:
        """Whole batches from offset; max_bytes 0 reports positions only."""
        log = self.log
        end, start = log.end_offset, log.log_start_offset
        if offset > end or offset < start:
            return FetchOutcome(ErrorCode.offset_out_of_range, end, start)
        if max_bytes <= 0 or offset == end:
            return FetchOutcome(ErrorCode.none, end, start)
        try:
            data = log.read(offset, max_bytes)
        except OffsetOutOfRange:
            return FetchOutcome(ErrorCode.offset_out_of_range, end, start)
        return FetchOutcome(ErrorCode.none, end, start, data)

    # -- list offsets ------------------------------------------------------------------------------

    def offset_for(self, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) per ListOffsets: -1 latest, -2 earliest, -3 max timestamp, else by time."""
        log = self.log
        if timestamp == -1:
            return log.end_offset, -1
        if timestamp == -2:
            return log.log_start_offset, -1
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
    stamps = record_timestamps(batch)
    if stamps is None:  # compressed: the batch is the finest grain we read without decompressing
        return header.base_offset, header.max_timestamp
    for offset, ts in stamps:
        if (ts == timestamp) if exact_max else (ts >= timestamp):
            return offset, ts
    return header.last_offset, header.max_timestamp


def _resolve(future: asyncio.Future, value: object) -> None:
    if not future.done():
        future.set_result(value)
