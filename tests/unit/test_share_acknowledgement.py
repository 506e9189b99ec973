"""SharePartition.acknowledge over offsets that are not in the cached state, as Kafka 4.2's
fetchSubMapForAcknowledgementBatch and acknowledgeBatchRecords treat them: the in-flight batches
from the one at or before the batch's first offset up to its last offset are acknowledged, and
offsets between them that were never fetched are skipped."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from sharestate.inflight import AcknowledgeType as A
from sharestate.inflight import RecordState as R
from sharestate.partition import AcknowledgementBatch, AcquiredRecords
from sharestate.records import StateBatch
from tests.unit.test_share_partition import Harness


def with_a_gap() -> Harness:
    """0-4 and 10-14 held by m1; 5-9 were delivered by the leader before, never acknowledged
    durably (a gap after recovery), and not fetched again yet."""
    h = Harness()
    h.reload(0, 1, [StateBatch(0, 4, R.AVAILABLE, 1), StateBatch(10, 14, R.AVAILABLE, 1)], reset_offset=0)
    assert h.sp.acquire("m1", 500, 0, [(0, 4)]) == [AcquiredRecords(0, 4, 2)]
    assert h.sp.acquire("m1", 500, 10, [(10, 14)]) == [AcquiredRecords(10, 14, 2)]
    assert h.sp.gap_window() == (5, 14)
    return h


def test_an_acknowledgement_spanning_a_gap_never_fetched_skips_the_gap():
    h = with_a_gap()
    outcome = h.ack("m1", 0, 14, A.ACCEPT)
    assert outcome.error_code == ErrorCode.none
    assert outcome.write.batches == (StateBatch(0, 4, R.ACKNOWLEDGED, 2), StateBatch(10, 14, R.ACKNOWLEDGED, 2))
    # The gap is still to be delivered: the start offset stops at it and the next fetch reads it.
    assert h.sp.start_offset == 5 and h.sp.next_fetch_offset() == 5
    assert h.acquire("m2", [(5, 9), (10, 14)]) == [AcquiredRecords(5, 9, 1)]


def test_gap_acknowledgements_of_offsets_not_in_the_cached_state_are_skipped():
    h = with_a_gap()
    types = (A.ACCEPT,) * 5 + (A.GAP,) * 5 + (A.REJECT,) * 5
    outcome = h.sp.acknowledge("m1", [AcknowledgementBatch(0, 14, tuple(int(t) for t in types))])
    assert outcome.error_code == ErrorCode.none
    assert outcome.write.batches == (StateBatch(0, 4, R.ACKNOWLEDGED, 2), StateBatch(10, 14, R.ARCHIVED, 2))


def test_offsets_outside_the_cached_state_and_their_error_codes():
    """Past the last in-flight batch the acknowledgement reaches: INVALID_REQUEST (never
    acquired). No in-flight batch at or before its first offset: INVALID_RECORD_STATE."""
    h = with_a_gap()
    before = h.sp.offsets()
    assert h.ack("m1", 3, 7, A.ACCEPT).error_code == ErrorCode.invalid_request  # ends in the gap
    assert h.ack("m1", 6, 8, A.ACCEPT).error_code == ErrorCode.invalid_request  # wholly in the gap
    assert h.ack("m1", 12, 20, A.ACCEPT).error_code == ErrorCode.invalid_request  # past the end offset
    assert h.sp.offsets() == before

    # A gap at the start offset: nothing cached at or before 2.
    h.reload(0, 1, [StateBatch(5, 9, R.AVAILABLE, 1)], reset_offset=0)
    h.sp.acquire("m1", 500, 5, [(5, 9)])
    assert h.ack("m1", 2, 7, A.ACCEPT).error_code == ErrorCode.invalid_record_state

    # Nothing in flight at all.
    h = Harness()
    h.acquire("m1", [(0, 4)])
    h.ack("m1", 0, 4, A.ACCEPT)
    assert h.sp.cached_state == {}
    assert h.ack("m1", 5, 6, A.ACCEPT).error_code == ErrorCode.invalid_record_state


def test_an_acknowledgement_starting_in_a_gap_checks_the_batch_before_it():
    """Kafka's floor entry: the in-flight batch at or before the first offset is part of the
    acknowledgement even when it ends before it, and, tracked as one batch, must be the member's."""
    h = with_a_gap()
    assert h.ack("m1", 7, 12, A.ACCEPT).write.batches == (StateBatch(10, 12, R.ACKNOWLEDGED, 2),)
    assert h.state(4) == (R.ACQUIRED, 2, "m1")

    h = with_a_gap()
    h.ack("m1", 0, 4, A.RELEASE)
    h.sp.acquire("m2", 500, 0, [(0, 4)])
    outcome = h.ack("m1", 7, 12, A.ACCEPT)
    assert outcome.error_code == ErrorCode.invalid_record_state  # 0-4 is m2's
    assert h.state(10) == (R.ACQUIRED, 2, "m1")
