"""Throttled delivery near the delivery limit (Kafka 4.2, apache/kafka#20837 and #20978).

Once a record's delivery count reaches the throttle limit (half of group.share.delivery.count.limit
rounded up, at least 2), its in-flight batch is handed out in smaller pieces, halved with each
further delivery, and a record on its last allowed delivery goes out alone, so a record no
consumer can process is archived by itself instead of taking its whole batch with it.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from sharestate.inflight import AcknowledgeType as A
from sharestate.inflight import RecordState as R
from sharestate.partition import AcquiredRecords
from tests.unit.test_share_partition import Harness

LOG = [(0, 9)]  # one producer batch of 10 records


def consume_with_a_poison_record(h: Harness, poison: int) -> tuple[list[list[AcquiredRecords]], dict[int, tuple[R, int]]]:
    """A consumer that fails a whole poll when the poison record is in it (RELEASE of all it got)
    and accepts every other poll; until nothing is left. Returns each poll's acquired records and
    every offset's final state and delivery count as written to the share coordinator."""
    polls: list[list[AcquiredRecords]] = []
    written: dict[int, tuple[R, int]] = {}
    while acquired := h.acquire("m1", LOG):
        polls.append(acquired)
        got = [o for a in acquired for o in range(a.first_offset, a.last_offset + 1)]
        kind = A.RELEASE if poison in got else A.ACCEPT
        for a in acquired:
            outcome = h.ack("m1", a.first_offset, a.last_offset, kind)
            assert outcome.error_code == ErrorCode.none
            for b in outcome.write.batches:
                for offset in range(b.first_offset, b.last_offset + 1):
                    written[offset] = (R(b.delivery_state), b.delivery_count)
        assert len(polls) < 50
    return polls, written


def ranges(polls: list[list[AcquiredRecords]]) -> list[tuple[int, int, int]]:
    """Each poll as (first, last, delivery count), for polls of one contiguous run."""
    out = []
    for acquired in polls:
        counts = {a.delivery_count for a in acquired}
        assert len(counts) == 1 and all(b.first_offset == a.last_offset + 1 for a, b in zip(acquired, acquired[1:]))
        out.append((acquired[0].first_offset, acquired[-1].last_offset, counts.pop()))
    return out


def test_a_poison_record_in_the_first_half_is_archived_alone():
    h = Harness(delivery_count_limit=5)  # throttle limit 3
    polls, written = consume_with_a_poison_record(h, poison=3)
    assert ranges(polls) == [
        (0, 9, 1), (0, 9, 2), (0, 9, 3),  # below the throttle limit: the whole batch
        (0, 4, 4),  # delivery count 3 reached: 10 >> 1 records
        (0, 0, 5), (1, 1, 5), (2, 2, 5), (3, 3, 5), (4, 4, 5),  # the last delivery: one record each
        (5, 9, 4),  # the rest of the batch, still at 3: 10 >> 1 again
    ]
    assert written == {
        **{o: (R.ACKNOWLEDGED, 5) for o in (0, 1, 2, 4)},
        3: (R.ARCHIVED, 5),
        **{o: (R.ACKNOWLEDGED, 4) for o in range(5, 10)},
    }
    assert h.sp.start_offset == 10


def test_a_poison_record_in_the_second_half_is_archived_alone():
    h = Harness(delivery_count_limit=5)
    polls, written = consume_with_a_poison_record(h, poison=7)
    assert ranges(polls) == [
        (0, 9, 1), (0, 9, 2), (0, 9, 3),
        (0, 4, 4),  # accepted: the poison record is not in it
        (5, 9, 4),
        (5, 5, 5), (6, 6, 5), (7, 7, 5), (8, 8, 5), (9, 9, 5),
    ]
    assert [o for o, (state, _) in written.items() if state is R.ARCHIVED] == [7]
    assert {o: w for o, w in written.items() if o != 7} == {
        **{o: (R.ACKNOWLEDGED, 4) for o in range(5)},
        **{o: (R.ACKNOWLEDGED, 5) for o in (5, 6, 8, 9)},
    }


@pytest.mark.parametrize(
    ("limit", "whole", "then"),
    [(2, 2, None), (3, 2, (0, 0, 3)), (4, 2, (0, 4, 3)), (5, 3, (0, 4, 4)), (6, 3, (0, 4, 4)), (10, 5, (0, 4, 6))],
)
def test_the_throttle_limit_is_half_the_delivery_limit_and_at_least_two(limit, whole, then):
    """max(2, ceil(limit / 2)); the last delivery goes out alone only with a limit above 2, so a
    limit of 2 delivers the whole batch both times."""
    h = Harness(delivery_count_limit=limit)
    for delivery in range(1, whole + 1):
        assert h.acquire("m1", LOG) == [AcquiredRecords(0, 9, delivery)]
        h.ack("m1", 0, 9, A.RELEASE)
    if then is None:
        assert h.acquire("m1", LOG) == []  # archived at the limit
    else:
        assert h.acquire("m1", LOG) == [AcquiredRecords(*then)]


def test_a_throttled_batch_ends_the_fetch_before_or_after_it():
    """Records already taken in this fetch are never delivered together with a throttled batch,
    and nothing is taken after one (Kafka sets maxRecordsToAcquire to 0)."""
    h = Harness(delivery_count_limit=5)
    h.acquire("m1", [(0, 4), (5, 9)])
    for _ in range(2):
        h.ack("m1", 5, 9, A.RELEASE)
        assert h.sp.acquire("m1", 500, 5, [(5, 9)])[0].first_offset == 5
    h.ack("m1", 0, 9, A.RELEASE)  # 0-4 at delivery 1, 5-9 at delivery 3: throttled
    log = [(0, 4), (5, 9), (10, 14)]
    assert h.acquire("m2", log) == [AcquiredRecords(0, 4, 2)]
    assert h.acquire("m2", log[1:]) == [AcquiredRecords(5, 6, 4)]  # 5 >> 1, and no new records
    assert h.sp.end_offset == 9
    assert h.acquire("m2", log[1:]) == [AcquiredRecords(7, 8, 4)]


def test_a_batch_mid_transition_is_not_throttled():
    """apache/kafka#20978: only records that can be acquired count, so a release still being
    written does not stop the fetch."""
    h = Harness(delivery_count_limit=5)
    h.acquire("m1", [(0, 4), (5, 9)])
    for _ in range(2):
        h.ack("m1", 5, 9, A.RELEASE)
        h.sp.acquire("m1", 500, 5, [(5, 9)])
    h.ack("m1", 0, 4, A.RELEASE)
    pending = h.ack("m1", 5, 9, A.RELEASE, commit=None)  # AVAILABLE at delivery 3, not yet written
    assert h.sp.acquire("m2", 500, 0, [(0, 4), (5, 9), (10, 14)]) == [
        AcquiredRecords(0, 4, 2),
        AcquiredRecords(10, 14, 1),
    ]
    h.sp.complete(pending.write.transition, True)
    assert h.acquire("m2", [(5, 9)]) == [AcquiredRecords(5, 6, 4)]


def test_throttling_ignores_max_records_as_kafka_does():
    """batch_optimized: max_records is checked before a batch; the throttle alone sizes the piece."""
    h = Harness(delivery_count_limit=5)
    for _ in range(3):
        h.acquire("m1", LOG)
        h.ack("m1", 0, 9, A.RELEASE)
    assert h.acquire("m2", LOG, max_records=1) == [AcquiredRecords(0, 4, 4)]


def test_records_before_the_first_throttled_one_count_toward_its_piece_as_in_kafka():
    """Kafka's acquireSubsetBatchRecords ends the piece when its count of records taken from the
    batch equals the piece, counting those taken before the first throttled record: with the piece
    filled by them already, the equality never holds and the rest of the batch goes too. Found by
    the state machine test (test_share_partition_machine.py); kept as Kafka 4.2 has it."""
    h = Harness(delivery_count_limit=5)  # throttle limit 3
    log = [(0, 1)]
    assert h.acquire("m1", log) == [AcquiredRecords(0, 1, 1)]
    assert h.ack("m1", 1, 1, A.RELEASE).error_code == ErrorCode.none  # 0 stays with m1, at 1
    for count in (2, 3):
        assert h.acquire("m2", log) == [AcquiredRecords(1, 1, count)]
        assert h.ack("m2", 1, 1, A.RELEASE).error_code == ErrorCode.none
    assert h.ack("m1", 0, 0, A.RELEASE).error_code == ErrorCode.none
    # Offset 0 at 1, offset 1 at 3 (throttled: a piece of 2 >> 1 = 1). Both go, 0 first.
    assert h.acquire("m3", log) == [AcquiredRecords(0, 0, 2), AcquiredRecords(1, 1, 4)]
