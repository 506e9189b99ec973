"""Acquiring records for a member (seed 001 §6-2-3; Kafka 4.2's SharePartition.acquire in
batch_optimized mode, the only one ShareFetch v1 has).

What is available from the fetch offset in the batches read from the log becomes ACQUIRED by the
member, its delivery count one higher, under one acquisition lock. In-flight batches the read
covers whole are handed out whole; a batch tracked per offset (or cut by the read) hands out its
available offsets; records never fetched become new in-flight batches cut at log batch
boundaries. max_records and group.share.partition.max.record.locks are soft caps, checked before
each batch and never inside one (lastOffsetAndMaxRecordsToAcquire).
"""

from __future__ import annotations

from collections.abc import Sequence

from sharestate.inflight import DeliveryCountOps, InFlightBatch, InFlightState, RecordState
from sharestate.partition_state import SharePartitionState
from sharestate.partition_view import PartitionView
from sharestate.state_batches import AcquiredRecords, append_run


def acquire(
    sp: PartitionView, member_id: str, max_records: int, fetch_offset: int, log_batches: Sequence[tuple[int, int]]
) -> list[AcquiredRecords]:
    """log_batches: (base offset, last offset) of each batch read, in order."""
    if sp.state is not SharePartitionState.ACTIVE or max_records <= 0 or not log_batches:
        return []
    max_to_acquire, last = _last_offset_and_max_records(sp, fetch_offset, max_records, log_batches[-1][1])
    if max_to_acquire <= 0:
        return []
    lock_id = next(sp.lock_ids)
    acquired: list[AcquiredRecords] = []
    count = 0
    pos = max(fetch_offset, sp.start_offset)
    while pos <= last and count < max_to_acquire:
        batch = sp.batch_at(pos)
        if batch is not None:
            count += _acquire_cached(sp, batch, pos, last, member_id, lock_id, acquired)
            pos = batch.last_offset + 1
            continue
        following = sp.next_first_after(pos)
        hi = last if following is None else min(following - 1, last)
        count += _acquire_new(sp, pos, hi, max_to_acquire - count, log_batches, member_id, lock_id, acquired)
        pos = hi + 1  # or the cap is reached and the walk ends
    if acquired:
        sp.schedule_lock(lock_id, member_id, acquired[0].first_offset, acquired[-1].last_offset)
    return acquired


def _last_offset_and_max_records(sp: PartitionView, fetch_offset: int, max_records: int, last_log: int) -> tuple[int, int]:
    """Kafka's lastOffsetAndMaxRecordsToAcquire: how many records this fetch may take, and up to
    which offset. The in-flight limit counts for released records too; past it, a fetch inside the
    in-flight range still takes released records, but none beyond the end offset."""
    max_to_acquire = min(max_records, sp.config.max_inflight_records - sp.in_flight_records())
    if max_to_acquire <= 0 and fetch_offset <= sp.end_offset:
        return min(max_records, sp.end_offset - fetch_offset + 1), min(last_log, sp.end_offset)
    return max_to_acquire, last_log


def _available(state: InFlightState) -> bool:
    return state.state is RecordState.AVAILABLE and not state.in_transition


def _acquire_cached(
    sp: PartitionView, batch: InFlightBatch, pos: int, last: int, member_id: str, lock_id: int,
    acquired: list[AcquiredRecords],
) -> int:
    """One in-flight batch: whole if the read covers it and it has one state, else per offset."""
    limit = sp.config.delivery_count_limit
    full_match = batch.first_offset >= pos and batch.last_offset <= last
    if full_match and batch.offset_state is None:
        state = batch.batch_state
        assert state is not None
        if not _available(state):
            return 0
        state.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, limit, member_id)
        state.lock_id = lock_id
        acquired.append(AcquiredRecords(batch.first_offset, batch.last_offset, state.delivery_count))
        return batch.size
    if batch.offset_state is None:
        assert batch.batch_state is not None
        if not _available(batch.batch_state):
            return 0  # nothing available in it: no need to track it per offset
        sp.split(batch)
    return _acquire_subset(sp, batch, pos, last, member_id, lock_id, acquired)


def _acquire_subset(
    sp: PartitionView, batch: InFlightBatch, pos: int, last: int, member_id: str, lock_id: int,
    acquired: list[AcquiredRecords],
) -> int:
    """Kafka's acquireSubsetBatchRecords: every available offset of the batch within [pos, last]
    (max_records bounds it only in record_limit mode)."""
    assert batch.offset_state is not None
    limit = sp.config.delivery_count_limit
    taken = 0
    for offset, state in batch.offset_state.items():
        if offset < pos:
            continue
        if offset > last:
            break
        if not _available(state):
            continue
        state.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, limit, member_id)
        state.lock_id = lock_id
        append_run(acquired, offset, state.delivery_count)
        taken += 1
    return taken


def _acquire_new(
    sp: PartitionView, lo: int, hi: int, limit: int, log_batches: Sequence[tuple[int, int]], member_id: str,
    lock_id: int, acquired: list[AcquiredRecords],
) -> int:
    """New in-flight batches over [lo, hi], cut at log batch boundaries; whole log batches while
    fewer than `limit` are taken (acquireNewBatchRecords keeps the batch holding the limit's
    last offset whole)."""
    taken = 0
    for base, last in log_batches:
        if last < lo or taken >= limit:
            continue
        if base > hi:
            break
        first, end = max(base, lo), min(last, hi)
        sp.insert(InFlightBatch(first, end, InFlightState(RecordState.ACQUIRED, 1, member_id, lock_id)))
        acquired.append(AcquiredRecords(first, end, 1))
        taken += end - first + 1
        sp.end_offset = max(sp.end_offset, end)
    return taken
