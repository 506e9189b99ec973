"""SharePartition.acquire in record_limit mode (KIP-1206, ShareFetch v2): max_records is exact.

Kafka 4.2's acquireNewBatchRecords/createBatches keep the in-flight batch to the end of the log
batch holding the last record allowed, ACQUIRED up to the limit and AVAILABLE after it
(InFlightBatch.maybeInitializeOffsetStateUpdate(targetOffset)); checkForRecordLimitSubsetMatch
cuts a cached batch bigger than what is left, acquireSubsetBatchRecords stopping at the limit.
"""

from __future__ import annotations

from sharestate.inflight import AcknowledgeType as A
from sharestate.inflight import RecordState as R
from sharestate.partition import AcquiredRecords
from tests.unit.test_share_partition import Harness


def acquire(h: Harness, member: str, log, max_records: int):
    acquired = h.sp.acquire(member, max_records, h.sp.next_fetch_offset(), log, record_limit=True)
    h.timer.apply(h.sp.take_timers(), h.sp)
    return acquired


def test_new_records_are_cut_inside_a_log_batch_the_rest_stay_available():
    h = Harness()
    assert acquire(h, "m1", [(0, 9)], 3) == [AcquiredRecords(0, 2, 1)]
    assert [h.state(o) for o in (0, 2)] == [(R.ACQUIRED, 1, "m1")] * 2
    # Tracked to the end of the log batch, never delivered: delivery count 0.
    assert h.state(3) == (R.AVAILABLE, 0, "") and h.state(9) == (R.AVAILABLE, 0, "")
    assert h.sp.end_offset == 9 and h.sp.next_fetch_offset() == 3
    # The next fetch takes the tail, again exactly.
    assert acquire(h, "m2", [(0, 9)], 4) == [AcquiredRecords(3, 6, 1)]
    assert acquire(h, "m2", [(0, 9), (10, 14)], 5) == [AcquiredRecords(7, 9, 1), AcquiredRecords(10, 11, 1)]
    assert h.state(12) == (R.AVAILABLE, 0, "") and h.sp.end_offset == 14


def test_the_limit_ends_at_the_log_batch_holding_it():
    """Log batches before the one holding the limit join one in-flight batch (no batch cut in
    record_limit mode); the batch after it is not read into the cache."""
    h = Harness()
    assert acquire(h, "m1", [(0, 4), (5, 9), (10, 14)], 7) == [AcquiredRecords(0, 6, 1)]
    assert list(h.sp.cached_state) == [0] and h.sp.cached_state[0].last_offset == 9
    assert h.state(7) == (R.AVAILABLE, 0, "") and h.state(10) is None
    assert h.sp.end_offset == 9


def test_everything_fits_one_whole_batch():
    h = Harness()
    assert acquire(h, "m1", [(0, 4), (5, 9)], 10) == [AcquiredRecords(0, 9, 1)]
    assert h.sp.cached_state[0].offset_state is None  # not split: nothing was left over


def test_a_released_cached_batch_bigger_than_the_limit_is_split():
    """Unlike batch_optimized, which hands the released batch out whole past max_records."""
    h = Harness()
    h.acquire("m1", [(0, 9)])
    h.ack("m1", 0, 9, A.RELEASE)
    assert acquire(h, "m2", [(0, 9)], 3) == [AcquiredRecords(0, 2, 2)]
    assert h.state(3) == (R.AVAILABLE, 1, "")
    assert acquire(h, "m3", [(0, 9)], 100) == [AcquiredRecords(3, 9, 2)]


def test_the_limit_counts_over_several_cached_batches():
    h = Harness()
    h.acquire("m1", [(0, 4), (5, 9), (10, 14)])
    h.ack("m1", 0, 14, A.RELEASE)
    # The first batch fits whole, the second is cut: 5 + 2 (one run: same delivery count).
    assert acquire(h, "m2", [(0, 4), (5, 9), (10, 14)], 7) == [AcquiredRecords(0, 6, 2)]
    assert h.sp.cached_state[0].offset_state is None
    assert h.state(7) == (R.AVAILABLE, 1, "") and h.state(10) == (R.AVAILABLE, 1, "")


def test_a_split_batch_hands_out_at_most_the_limit():
    """acquireSubsetBatchRecords stops at maxFetchRecords in record_limit mode."""
    h = Harness()
    h.acquire("m1", [(0, 9)])
    h.ack("m1", 0, 9, A.RELEASE)
    acquire(h, "m2", [(0, 9)], 2)  # splits 0-9 per offset
    assert acquire(h, "m3", [(0, 9)], 3) == [AcquiredRecords(2, 4, 2)]
    assert h.state(5) == (R.AVAILABLE, 1, "")


def test_cached_records_then_new_ones_up_to_the_limit():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    h.ack("m1", 0, 4, A.RELEASE)
    assert acquire(h, "m2", [(0, 4), (5, 9)], 6) == [AcquiredRecords(0, 4, 2), AcquiredRecords(5, 5, 1)]
    assert h.state(6) == (R.AVAILABLE, 0, "") and h.sp.end_offset == 9


def test_the_tail_is_not_under_the_lock_and_the_lock_releases_only_what_it_took():
    h = Harness(record_lock_duration_ms=1000)
    acquire(h, "m1", [(0, 9)], 3)
    h.advance(1000)
    assert h.state(0) == (R.AVAILABLE, 1, "") and h.state(3) == (R.AVAILABLE, 0, "")
    assert h.sp.next_fetch_offset() == 0


def test_acknowledging_the_acquired_part_moves_the_start_offset_to_the_tail():
    h = Harness()
    acquire(h, "m1", [(0, 9)], 4)
    assert h.ack("m1", 0, 3, A.ACCEPT).error_code == 0
    assert h.sp.start_offset == 4 and h.sp.next_fetch_offset() == 4
    # The tail was never acquired: acknowledging it is an invalid record state.
    assert h.ack("m1", 4, 4, A.ACCEPT).error_code != 0

