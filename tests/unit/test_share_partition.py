"""SharePartition with a manual clock: every path of seed 001 §6-§7, and the exact state written."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from kernel.clock import ManualClock
from kernel.timer import ManualTimer
from sharestate.inflight import AcknowledgeType as A
from sharestate.inflight import RecordState as R
from sharestate.records import StateBatch
from sharestate.partition import AcknowledgementBatch, AcquiredRecords, SharePartition, SharePartitionConfig, StateWrite

LOCK = 30_000
TOPIC = uuid.UUID(int=7)


class Harness:
    def __init__(self, **config) -> None:
        self.clock = ManualClock(0)
        self.timer = ManualTimer(self.clock)
        self.config = SharePartitionConfig(**config)
        self.reload(-1, 0, [], reset_offset=0)
        self.expiry_writes: list[StateWrite] = []

    def reload(self, start_offset: int, state_epoch: int, batches, reset_offset: int) -> None:
        """A new copy of the share partition from this durable state (a new leader's)."""
        self.sp = SharePartition("g", TOPIC, 0, clock=self.clock, config=self.config)
        self.sp.initialize(start_offset, state_epoch, batches, reset_offset)

    def acquire(self, member: str, log: list[tuple[int, int]], max_records: int = 500) -> list[AcquiredRecords]:
        acquired = self.sp.acquire(member, max_records, self.sp.next_fetch_offset(), log)
        self.timer.apply(self.sp.take_timers(), self.sp)
        return acquired

    def ack(self, member: str, first: int, last: int, *types: A, commit: bool | None = True):
        outcome = self.sp.acknowledge(member, [AcknowledgementBatch(first, last, tuple(int(t) for t in types))])
        self.timer.apply(self.sp.take_timers(), self.sp)
        if outcome.write is not None and commit is not None:
            self.sp.complete(outcome.write.transition, commit)
        return outcome

    def advance(self, ms: int) -> None:
        self.timer.apply(self.sp.take_timers(), self.sp)  # locks handed out by calls made on h.sp directly
        self.clock.advance(ms)
        while (due := self.timer.pop_expired()) is not None:
            write = due[1]()
            if write is not None:
                self.expiry_writes.append(write)

    def state(self, offset: int):
        return self.sp.offsets().get(offset)


def test_acquire_then_accept_writes_acknowledged_and_moves_the_start_offset():
    h = Harness()
    assert h.acquire("m1", [(0, 4), (5, 9)]) == [AcquiredRecords(0, 4, 1), AcquiredRecords(5, 9, 1)]
    assert h.state(3) == (R.ACQUIRED, 1, "m1")
    outcome = h.ack("m1", 0, 9, A.ACCEPT, commit=None)
    assert outcome.error_code == ErrorCode.none
    assert outcome.write.batches == (StateBatch(0, 9, R.ACKNOWLEDGED, 1),)
    assert outcome.write.start_offset == 10  # persisted as it will be once committed
    assert h.sp.start_offset == 0  # not yet: the write is not durable
    h.sp.complete(outcome.write.transition, True)
    assert (h.sp.start_offset, h.sp.cached_state, h.sp.next_fetch_offset()) == (10, {}, 10)


def test_release_then_redelivery_with_delivery_count_two():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    outcome = h.ack("m1", 0, 4, A.RELEASE)
    assert outcome.write.batches == (StateBatch(0, 4, R.AVAILABLE, 1),) and outcome.write.start_offset == 0
    assert h.sp.next_fetch_offset() == 0
    assert h.acquire("m2", [(0, 4)]) == [AcquiredRecords(0, 4, 2)]
    assert h.state(0) == (R.ACQUIRED, 2, "m2")


def test_lock_expiry_returns_records_to_available():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    h.advance(LOCK - 1)
    assert h.state(0)[0] is R.ACQUIRED
    h.advance(1)
    assert h.state(0) == (R.AVAILABLE, 1, "")
    assert h.expiry_writes == [StateWrite(0, (StateBatch(0, 4, R.AVAILABLE, 1),))]
    assert h.sp.next_fetch_offset() == 0
    # A late acknowledgement of the expired lock is refused.
    assert h.ack("m1", 0, 4, A.ACCEPT).error_code == ErrorCode.invalid_record_state


def test_the_fifth_delivery_released_is_archived():
    h = Harness(delivery_count_limit=5)
    for delivery in range(1, 6):  # one record: throttled delivery (test_share_throttled_delivery.py) cuts nothing
        assert h.acquire("m1", [(0, 0)]) == [AcquiredRecords(0, 0, delivery)]
        outcome = h.ack("m1", 0, 0, A.RELEASE)
    assert outcome.write.batches == (StateBatch(0, 0, R.ARCHIVED, 5),) and outcome.write.start_offset == 1
    assert h.sp.start_offset == 1 and h.sp.next_fetch_offset() == 1
    assert h.acquire("m2", [(0, 0)]) == []  # never delivered a sixth time


def test_lock_expiry_at_the_limit_archives_too():
    h = Harness(delivery_count_limit=2)
    h.acquire("m1", [(0, 0)])
    h.advance(LOCK)
    h.acquire("m1", [(0, 0)])
    h.advance(LOCK)
    assert h.expiry_writes[-1] == StateWrite(1, (StateBatch(0, 0, R.ARCHIVED, 2),))


def test_renew_keeps_the_lock():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    h.advance(20_000)
    outcome = h.ack("m1", 0, 4, A.RENEW)
    assert outcome.error_code == ErrorCode.none and outcome.write is None  # RENEW writes nothing
    h.advance(LOCK - 20_000)  # the original deadline passes
    assert h.state(0) == (R.ACQUIRED, 1, "m1")
    h.advance(20_000 - 1)
    assert h.state(0)[0] is R.ACQUIRED
    h.advance(1)  # 30 s after the renewal
    assert h.state(0)[0] is R.AVAILABLE


def test_acknowledging_records_held_by_another_member_is_invalid_and_changes_nothing():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    h.acquire("m2", [(5, 9)])
    before = h.sp.offsets()
    outcome = h.ack("m2", 3, 7, A.ACCEPT)
    assert outcome.error_code == ErrorCode.invalid_record_state and outcome.write is None
    assert h.sp.offsets() == before
    # Never delivered: past the last acquired offset is a bad request (Kafka's INVALID_REQUEST).
    assert h.ack("m1", 20, 21, A.ACCEPT).error_code == ErrorCode.invalid_request


def test_a_failed_state_write_rolls_the_acknowledgement_back():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    outcome = h.ack("m1", 0, 4, A.ACCEPT, commit=None)
    assert h.acquire("m2", [(0, 4)]) == []  # mid-transition: not available to anyone
    h.sp.complete(outcome.write.transition, committed=False)
    assert h.state(0) == (R.ACQUIRED, 1, "m1") and h.sp.start_offset == 0
    assert h.ack("m1", 0, 4, A.ACCEPT).write.batches == (StateBatch(0, 4, R.ACKNOWLEDGED, 1),)


def test_a_lock_that_expires_during_a_failed_write_releases_when_the_write_is_undone():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    outcome = h.ack("m1", 0, 4, A.ACCEPT, commit=None)
    h.advance(LOCK)  # the lock expires while the write is in flight
    assert h.state(0)[0] is R.ACKNOWLEDGED  # pending transition: expiry waits for its outcome
    release = h.sp.complete(outcome.write.transition, committed=False)
    assert release == StateWrite(0, (StateBatch(0, 4, R.AVAILABLE, 1),))
    assert h.state(0) == (R.AVAILABLE, 1, "")


def test_per_offset_acknowledgements_split_the_batch_and_write_runs():
    h = Harness()
    h.acquire("m1", [(0, 5)])
    outcome = h.sp.acknowledge(
        "m1", [AcknowledgementBatch(0, 5, (A.ACCEPT, A.ACCEPT, A.RELEASE, A.REJECT, A.GAP, A.ACCEPT))]
    )
    assert outcome.write.batches == (
        StateBatch(0, 1, R.ACKNOWLEDGED, 1),
        StateBatch(2, 2, R.AVAILABLE, 1),
        StateBatch(3, 4, R.ARCHIVED, 1),
        StateBatch(5, 5, R.ACKNOWLEDGED, 1),
    )
    assert outcome.write.start_offset == 2
    h.sp.complete(outcome.write.transition, True)
    assert h.sp.start_offset == 2 and h.sp.next_fetch_offset() == 2
    assert h.acquire("m2", [(0, 5)]) == [AcquiredRecords(2, 2, 2)]


def test_a_partial_acknowledgement_of_a_batch():
    h = Harness()
    h.acquire("m1", [(0, 9)])
    assert h.ack("m1", 3, 4, A.RELEASE).write.batches == (StateBatch(3, 4, R.AVAILABLE, 1),)
    assert h.sp.next_fetch_offset() == 3
    assert h.state(2) == (R.ACQUIRED, 1, "m1") and h.state(3) == (R.AVAILABLE, 1, "")


def test_max_records_and_the_in_flight_limit():
    h = Harness(max_inflight_records=10)
    # New records are taken in whole log batches: max_records 3 still yields the first batch of 5.
    assert h.acquire("m1", [(0, 4), (5, 9), (10, 14)], max_records=3) == [AcquiredRecords(0, 4, 1)]
    assert h.acquire("m1", [(5, 9), (10, 14), (15, 19)]) == [AcquiredRecords(5, 9, 1)]  # 10 in flight: the limit
    assert not h.sp.can_acquire_records()
    assert h.acquire("m2", [(10, 14)]) == []
    h.ack("m1", 0, 4, A.ACCEPT)
    assert h.sp.can_acquire_records() and h.acquire("m2", [(10, 14)]) == [AcquiredRecords(10, 14, 1)]


def test_records_of_a_closed_session_are_released():
    h = Harness()
    h.acquire("m1", [(0, 4)])
    h.acquire("m2", [(5, 9)])
    write = h.sp.release_member("m1")
    assert write == StateWrite(0, (StateBatch(0, 4, R.AVAILABLE, 0),))  # the delivery given back
    assert h.state(7) == (R.ACQUIRED, 1, "m2")


def test_recovery_rebuilds_cached_state_start_offset_and_the_gap_window():
    h = Harness()
    h.reload(
        10,
        3,
        [
            StateBatch(5, 11, R.AVAILABLE, 1),  # partly before the start offset: trimmed
            StateBatch(20, 25, R.ACKNOWLEDGED, 1),
            StateBatch(26, 30, R.AVAILABLE, 2),
        ],
        reset_offset=0,
    )
    assert (h.sp.start_offset, h.sp.end_offset, h.sp.state_epoch) == (10, 30, 3)
    assert sorted(h.sp.cached_state) == [10, 20, 26]
    # 12..19 were delivered before the failover but never acknowledged durably: the gap window.
    assert h.sp.gap_window() == (12, 30)
    assert h.sp.next_fetch_offset() == 10
    log = [(10, 14), (15, 19), (20, 24), (25, 30)]
    assert h.sp.acquire("m1", 100, h.sp.next_fetch_offset(), log) == [
        AcquiredRecords(10, 11, 2),
        AcquiredRecords(12, 14, 1),
        AcquiredRecords(15, 19, 1),
        AcquiredRecords(26, 30, 3),
    ]
    assert h.sp.gap_window() is None and h.sp.next_fetch_offset() == 31


def test_no_durable_start_applies_the_auto_offset_reset_offset():
    h = Harness()
    h.reload(-1, 1, [], reset_offset=42)  # e.g. share.auto.offset.reset=latest: the log end
    assert (h.sp.start_offset, h.sp.next_fetch_offset()) == (42, 42)
    assert h.acquire("m1", [(40, 44)]) == [AcquiredRecords(42, 44, 1)]


def test_recovered_acquired_records_are_available_again():
    h = Harness()
    h.reload(0, 1, [StateBatch(0, 4, R.ACQUIRED, 1)], reset_offset=0)
    assert h.state(0) == (R.AVAILABLE, 1, "")


def test_the_log_start_moving_past_in_flight_records_archives_them():
    h = Harness()
    h.acquire("m1", [(0, 9)])
    write = h.sp.archive_before(5)
    assert write.batches == (StateBatch(0, 4, R.ARCHIVED, 1),) and h.sp.start_offset == 5



def test_the_log_start_moving_past_every_record_seen_moves_the_start_offset_there():
    # Kafka's updateCacheAndOffsets: else the next fetch stays below the log start forever.
    h = Harness()
    h.acquire("m1", [(0, 2)])
    h.ack("m1", 0, 2, A.ACCEPT)
    assert h.sp.start_offset == 3
    h.sp.archive_before(7)
    assert (h.sp.start_offset, h.sp.next_fetch_offset()) == (7, 7)
    assert h.acquire("m1", [(7, 8)]) == [AcquiredRecords(7, 8, 1)]


def test_a_record_released_below_the_start_offset_is_archived_not_redelivered():
    # Held while retention passed it, then its holder went away: Kafka archives it.
    h = Harness()
    h.acquire("m1", [(0, 3)])
    pending = h.ack("m1", 0, 3, A.ACCEPT, commit=None)
    h.sp.archive_before(4)
    h.sp.complete(pending.write.transition, False)  # the write failed: back to ACQUIRED, below 4
    h.sp.release_member("m1")
    assert all(h.state(o) is None or h.state(o)[0] is R.ARCHIVED for o in range(4))  # done, or dropped as done
    assert h.sp.next_fetch_offset() >= 4

@pytest.mark.parametrize("types", [(), (1, 1)])
def test_malformed_acknowledgements_are_invalid_requests(types):
    h = Harness()
    h.acquire("m1", [(0, 4)])
    outcome = h.sp.acknowledge("m1", [AcknowledgementBatch(0, 4, types)])
    assert outcome.error_code == ErrorCode.invalid_request


def test_a_closed_session_gives_back_the_delivery_it_did_not_consume():
    """KAFKA-17541 (Kafka 4.1+): records released because their consumer's session closed get their
    delivery count lowered by one, so a record on its last allowed delivery is not archived."""
    h = Harness(delivery_count_limit=2)
    h.acquire("m1", [(0, 0)])
    h.advance(LOCK)  # the first delivery expired: it counts
    assert h.acquire("m1", [(0, 0)]) == [AcquiredRecords(0, 0, 2)]  # the last allowed delivery
    write = h.sp.release_member("m1")
    assert write == StateWrite(0, (StateBatch(0, 0, R.AVAILABLE, 1),))
    assert h.state(0) == (R.AVAILABLE, 1, "")
    assert h.acquire("m2", [(0, 0)]) == [AcquiredRecords(0, 0, 2)]


def test_acknowledging_offsets_below_the_start_offset_skips_them_and_succeeds():
    """Kafka's SharePartition.acknowledge: a batch wholly below the start offset is done already
    (a retried acknowledgement must not fail); one straddling it acknowledges the rest."""
    h = Harness()
    h.acquire("m1", [(0, 4)])
    h.ack("m1", 0, 4, A.ACCEPT)
    assert h.sp.start_offset == 5
    retried = h.ack("m1", 0, 4, A.ACCEPT)
    assert (retried.error_code, retried.write) == (ErrorCode.none, None)
    h.acquire("m1", [(5, 9)])
    straddling = h.sp.acknowledge("m1", [AcknowledgementBatch(3, 9, (1, 1, 1, 1, 1, 3, 1))])
    assert straddling.error_code == ErrorCode.none
    assert straddling.write.batches == (
        StateBatch(5, 7, R.ACKNOWLEDGED, 1),
        StateBatch(8, 8, R.ARCHIVED, 1),
        StateBatch(9, 9, R.ACKNOWLEDGED, 1),
    )


def test_the_delivery_complete_count_written_counts_what_the_write_completes():
    """DescribeShareGroupOffsets computes lag from it: records this very write completes are done,
    and the count is taken from the start offset written, not the one in memory."""
    h = Harness()
    h.acquire("m1", [(0, 4)])
    outcome = h.ack("m1", 2, 2, A.ACCEPT, commit=None)
    transitions = [outcome.write.transition]
    assert h.sp.persisted_start_offset(transitions) == 0
    assert h.sp.delivery_complete_count(transitions) == 1  # offset 2
    h.sp.complete(outcome.write.transition, True)
    outcome = h.ack("m1", 0, 1, A.ACCEPT, commit=None)
    transitions = [outcome.write.transition]
    assert h.sp.persisted_start_offset(transitions) == 3
    assert h.sp.delivery_complete_count(transitions) == 0  # offset 2 is behind the start offset written
