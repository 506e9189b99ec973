"""Acquiring records for a member (seed 001 §6-2-3; Kafka 4.2's SharePartition.acquire, in
batch_optimized mode and, from ShareFetch v2, record_limit mode: KIP-1206).

What is available from the fetch offset in the batches read from the log becomes ACQUIRED by the
member, its delivery count one higher, under one acquisition lock. In-flight batches the read
covers whole are handed out whole; a batch tracked per offset (or cut by the read) hands out its
available offsets; records never fetched become new in-flight batches cut at log batch
boundaries. max_records and group.share.partition.max.record.locks are soft caps, checked before
each batch and never inside one (lastOffsetAndMaxRecordsToAcquire).

record_limit mode makes max_records exact: an in-flight batch bigger than what is left of it
is split and only its first available offsets are taken; records never fetched become one
in-flight batch up to the end of the log batch holding the last record allowed, of which only
the records allowed are ACQUIRED and the rest stay AVAILABLE for the next fetch (Kafka's
createBatches with maybeInitializeOffsetStateUpdate(targetOffset)).

Throttled delivery (apache/kafka#20837): once a batch's records near group.share.delivery.count.limit
they are handed out in ever smaller pieces, each in a fetch of its own, down to one record on its
last allowed delivery, so a record no consumer can process is archived alone rather than with
every record of its batch (see _acquire_subset).
"""

from __future__ import annotations

from collections.abc import Sequence

from sharestate.inflight import DeliveryCountOps, InFlightBatch, InFlightState, RecordState
from sharestate.partition_state import SharePartitionState
from sharestate.partition_view import PartitionView
from sharestate.state_batches import AcquiredRecords, append_run


def acquire(
    sp: PartitionView, member_id: str, max_records: int, fetch_offset: int, log_batches: Sequence[tuple[int, int]],
    record_limit: bool = False,
) -> list[AcquiredRecords]:
    """Kafka's SharePartition.acquire. log_batches: (base offset, last offset) of each batch
    read, in order; record_limit: ShareAcquireMode RECORD_LIMIT (never more than max_records)."""
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
            throttled = _should_throttle(sp, batch, pos, last)
            if throttled and count > 0:
                break  # not together with what this fetch took already: on their own, next fetch
            # (Kafka's checkForRecordLimitSubsetMatch: a batch bigger than what is left is cut)
            limit = max_to_acquire - count if record_limit else None
            taken = _acquire_cached(sp, batch, pos, last, throttled, limit, member_id, lock_id, acquired)
            count += taken
            if throttled and taken > 0:
                break  # nothing after throttled records either (Kafka sets maxRecordsToAcquire to 0)
            pos = batch.last_offset + 1
            continue
        following = sp.next_first_after(pos)
        hi = last if following is None else min(following - 1, last)
        if record_limit:
            count += _acquire_new_limited(sp, pos, hi, max_to_acquire - count, log_batches, member_id, lock_id, acquired)
        else:
            count += _acquire_new(sp, pos, hi, max_to_acquire - count, log_batches, member_id, lock_id, acquired)
        pos = hi + 1  # or the cap is reached and the walk ends
    if acquired:
        sp.schedule_lock(lock_id, member_id, acquired[0].first_offset, acquired[-1].last_offset)
    return acquired


def _last_offset_and_max_records(
    sp: PartitionView, fetch_offset: int, max_records: int, last_log: int
) -> tuple[int, int]:
    """Kafka's lastOffsetAndMaxRecordsToAcquire: how many records this fetch may take, and up to
    which offset. The in-flight limit counts for released records too; past it, a fetch inside the
    in-flight range still takes released records, but none beyond the end offset."""
    max_to_acquire = min(max_records, sp.config.max_inflight_records - sp.in_flight_records())
    if max_to_acquire <= 0 and fetch_offset <= sp.end_offset:
        return min(max_records, sp.end_offset - fetch_offset + 1), min(last_log, sp.end_offset)
    return max_to_acquire, last_log


def _available(state: InFlightState) -> bool:
    return state.state is RecordState.AVAILABLE and not state.in_transition


def _should_throttle(sp: PartitionView, batch: InFlightBatch, pos: int, last: int) -> bool:
    """Kafka's shouldThrottleRecordsDelivery (with apache/kafka#20978): a record of the batch that
    this fetch could acquire has reached the throttle limit. Records mid-transition do not count."""
    limit = sp.config.throttle_records_delivery_limit
    if batch.offset_state is None:
        assert batch.batch_state is not None
        return _available(batch.batch_state) and batch.batch_state.delivery_count >= limit
    return any(
        pos <= offset <= last and _available(state) and state.delivery_count >= limit
        for offset, state in batch.offset_state.items()
    )


def _acquire_cached(
    sp: PartitionView, batch: InFlightBatch, pos: int, last: int, throttled: bool, record_limit: int | None,
    member_id: str, lock_id: int, acquired: list[AcquiredRecords],
) -> int:
    """One in-flight batch: whole if the read covers it, it has one state, it is not throttled
    and (record_limit mode) it fits in the records left; else per offset, at most
    `record_limit` of them when given."""
    limit = sp.config.delivery_count_limit
    full_match = batch.first_offset >= pos and batch.last_offset <= last
    fits = record_limit is None or batch.size <= record_limit
    if full_match and batch.offset_state is None and not throttled and fits:
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
    return _acquire_subset(sp, batch, pos, last, member_id, lock_id, acquired, record_limit)


def _acquire_subset(
    sp: PartitionView, batch: InFlightBatch, pos: int, last: int, member_id: str, lock_id: int,
    acquired: list[AcquiredRecords], record_limit: int | None = None,
) -> int:
    """Kafka's acquireSubsetBatchRecords: the available offsets of the batch within [pos, last]
    (max_records bounds them only in record_limit mode), throttled near the delivery limit:

    - from the first record at the throttle limit on, at most (records in the batch) >> (its
      delivery count - throttle limit + 1) of them, halving with each further delivery;
    - a record on its last allowed delivery goes out alone: it ends the piece when others are in
      it already (it leads the next fetch's), and nothing joins it. Kafka does this only with a
      delivery limit above 2, where a batch can be cut before its last delivery.
    """
    assert batch.offset_state is not None
    limit = sp.config.delivery_count_limit
    throttle_limit = sp.config.throttle_records_delivery_limit
    isolate_last = limit > 2
    piece = 0  # Kafka's maxFetchRecordsWhileThrottledRecords, fixed by the first throttled record
    taken = 0
    for offset, state in batch.offset_state.items():
        if offset < pos:
            continue
        if offset > last:
            break
        if not _available(state):
            continue
        if isolate_last and state.delivery_count == limit - 1 and taken > 0:
            break
        if state.delivery_count >= throttle_limit and piece == 0:
            piece = max(1, len(batch.offset_state) >> (state.delivery_count - throttle_limit + 1))
        state.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, limit, member_id)
        state.lock_id = lock_id
        append_run(acquired, offset, state.delivery_count)
        taken += 1
        if (isolate_last and state.delivery_count == limit) or taken == piece or taken == record_limit:
            break
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


def _acquire_new_limited(
    sp: PartitionView, lo: int, hi: int, limit: int, log_batches: Sequence[tuple[int, int]], member_id: str,
    lock_id: int, acquired: list[AcquiredRecords],
) -> int:
    """record_limit mode's acquireNewBatchRecords and createBatches: one in-flight batch from
    `lo` to the end of the log batch holding the last record allowed (never past `hi`, so it
    cannot overlap the batch after a gap); when it holds more than `limit` records, it is tracked
    per offset and the records past the limit stay AVAILABLE, never delivered (delivery count 0)."""
    if limit <= 0:
        return 0
    end = hi
    if hi - lo + 1 > limit:
        target = lo + limit - 1
        end = next((last for base, last in log_batches if base <= target <= last), target)
        end = min(max(end, target), hi)
    batch = InFlightBatch(lo, end, InFlightState(RecordState.ACQUIRED, 1, member_id, lock_id))
    taken = min(limit, end - lo + 1)
    if taken < batch.size:
        batch.split()
        assert batch.offset_state is not None
        for offset in range(lo + taken, end + 1):
            batch.offset_state[offset] = InFlightState(RecordState.AVAILABLE, 0)
        sp.find_next = True  # the tail is the next fetch's
    sp.insert(batch)
    acquired.append(AcquiredRecords(lo, lo + taken - 1, 1))
    sp.end_offset = max(sp.end_offset, end)
    return taken
