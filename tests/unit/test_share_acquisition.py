"""SharePartition.acquire as Kafka 4.2 does it in batch_optimized mode (the only mode ShareFetch v1
has): whole cached batches, max_records and the in-flight limit as soft caps checked before each
batch (lastOffsetAndMaxRecordsToAcquire)."""

from __future__ import annotations

from sharestate.inflight import AcknowledgeType as A
from sharestate.inflight import RecordState as R
from sharestate.partition import AcknowledgementBatch, AcquiredRecords
from tests.unit.test_share_partition import Harness


def test_a_released_batch_is_re_acquired_whole_even_past_max_records():
    """checkForFullMatch: a cached batch the fetch covers is handed out whole; max_records only
    stops the walk before the next batch (Kafka's acquire breaks on acquiredCount >= max before
    a batch, never inside one)."""
    h = Harness()
    h.acquire("m1", [(0, 9)])
    h.ack("m1", 0, 9, A.RELEASE)
    assert h.acquire("m2", [(0, 9)], max_records=3) == [AcquiredRecords(0, 9, 2)]
    batch = h.sp.cached_state[0]
    assert batch.offset_state is None  # still one in-flight batch, not split per offset
    assert (batch.batch_state.state, batch.batch_state.member_id) == (R.ACQUIRED, "m2")


def test_max_records_is_checked_before_each_cached_batch():
    h = Harness()
    h.acquire("m1", [(0, 4), (5, 9), (10, 14)])
    h.ack("m1", 0, 14, A.RELEASE)
    # 5 < 7 after the first batch, so the second is taken whole too; 10 >= 7 stops before the third.
    assert h.acquire("m2", [(0, 4), (5, 9), (10, 14)], max_records=7) == [
        AcquiredRecords(0, 4, 2),
        AcquiredRecords(5, 9, 2),
    ]
    assert h.state(10) == (R.AVAILABLE, 1, "")


def test_a_split_batch_hands_out_every_available_offset_it_covers():
    """acquireSubsetBatchRecords counts max_records only in record_limit mode."""
    h = Harness()
    h.acquire("m1", [(0, 9)])
    h.sp.acknowledge("m1", [AcknowledgementBatch(0, 9, (1, 1, 2, 1, 2, 1, 2, 1, 1, 1))])
    for transition in list(h.sp.pending):
        h.sp.complete(transition, True)
    assert h.acquire("m2", [(0, 9)], max_records=1) == [
        AcquiredRecords(2, 2, 2),
        AcquiredRecords(4, 4, 2),
        AcquiredRecords(6, 6, 2),
    ]


def test_the_in_flight_limit_bounds_re_acquisition_too():
    """lastOffsetAndMaxRecordsToAcquire: max records = min(max_records, limit - in flight), for
    released records as for new ones; at the limit, released records up to the end offset only."""
    h = Harness(max_inflight_records=12)
    h.acquire("m1", [(0, 4), (5, 9)])
    h.ack("m1", 0, 9, A.RELEASE)
    # 10 in flight, room for 2: the first released batch (5 >= 2) and nothing after it.
    assert h.acquire("m2", [(0, 4), (5, 9), (10, 14)]) == [AcquiredRecords(0, 4, 2)]
    assert h.state(5) == (R.AVAILABLE, 1, "") and h.sp.end_offset == 9

    h = Harness(max_inflight_records=12)
    h.acquire("m1", [(0, 4), (5, 9)])
    h.acquire("m1", [(10, 14)])  # room for 2: one whole log batch, 15 in flight
    h.ack("m1", 0, 9, A.RELEASE)
    # Past the limit the fetch still takes released records, up to the end offset (14) and at
    # most end - fetch offset + 1 of them; nothing new.
    assert h.acquire("m2", [(0, 4), (5, 9), (10, 14), (15, 19)]) == [
        AcquiredRecords(0, 4, 2),
        AcquiredRecords(5, 9, 2),
    ]
    assert h.sp.end_offset == 14
