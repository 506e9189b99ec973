"""Acquiring records for a member (seed 001 §6-2-2; Kafka's SharePartition.acquire).

What is available from the fetch offset in the batches read from the log becomes ACQUIRED by
the member, its delivery count one higher, under one acquisition lock. Records in flight
already are taken where they are available; new ones are cut at log batch boundaries.
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
    """log_batches: (base offset, last offset) of each batch read, in order. New records are
    acquired in whole log batches (max_records may be exceeded to keep batch boundaries, as
    Kafka does), and only while group.share.partition.max.record.locks allows."""
    if sp.state is not SharePartitionState.ACTIVE or not log_batches:
        return []
    last_log = log_batches[-1][1]
    lock_id = next(sp.lock_ids)
    acquired: list[AcquiredRecords] = []
    budget = max_records
    pos = max(fetch_offset, sp.start_offset)
    while pos <= last_log and budget > 0:
        batch = sp.batch_at(pos)
        if batch is not None:
            budget -= _acquire_cached(sp, batch, pos, last_log, budget, member_id, lock_id, acquired)
            pos = batch.last_offset + 1
            continue
        following = sp.next_first_after(pos)
        hi = last_log if following is None else min(following - 1, last_log)
        limit = budget
        if pos > sp.end_offset:
            limit = min(budget, sp.config.max_inflight_records - sp.in_flight_records())
            if limit <= 0:
                break
        taken = _acquire_new(sp, pos, hi, limit, log_batches, member_id, lock_id, acquired)
        if taken == 0:
            pos = hi + 1
            continue
        budget -= taken
        pos = acquired[-1].last_offset + 1
    if acquired:
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        sp.schedule_lock(lock_id, member_id, first, last)
    return acquired


def _acquire_cached(
    sp: PartitionView, batch: InFlightBatch, pos: int, last_log: int, budget: int, member_id: str, lock_id: int,
    acquired: list[AcquiredRecords],
) -> int:
    limit = sp.config.delivery_count_limit
    whole = (
        batch.offset_state is None
        and batch.first_offset >= pos
        and batch.last_offset <= last_log
        and batch.size <= budget
    )
    if whole:
        state = batch.batch_state
        assert state is not None
        if state.state is not RecordState.AVAILABLE or state.in_transition:
            return 0
        state.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, limit, member_id)
        state.lock_id = lock_id
        acquired.append(AcquiredRecords(batch.first_offset, batch.last_offset, state.delivery_count))
        return batch.size
    if batch.offset_state is None and (batch.batch_state is None or batch.batch_state.state is not RecordState.AVAILABLE):
        return 0  # nothing available in it: no need to split it
    sp.split(batch)
    assert batch.offset_state is not None
    taken = 0
    for offset in range(max(pos, batch.first_offset), min(batch.last_offset, last_log) + 1):
        if taken >= budget:
            break
        state = batch.offset_state[offset]
        if state.state is not RecordState.AVAILABLE or state.in_transition:
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
    """New in-flight batches over [lo, hi], cut at log batch boundaries."""
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
