"""SharePartition: a share group's in-flight records on one partition's leader (seed 001 §6-§7).

Offsets of the partition, as a share group sees them:

    ... done ... | start_offset ...... cached_state (in flight) ...... end_offset | never fetched ...
                   (SPSO)                                               (SPEO)

- `start_offset`: the first offset not yet done (acknowledged or archived); everything before it
  is done. `end_offset`: the last offset ever acquired (start_offset - 1 when nothing is in flight).
- `cached_state`: in-flight batches keyed by first offset, each with one state for the whole batch
  or one per offset.
- After recovery from the durable state, offsets between start_offset and end_offset that no
  stored batch covers are the *gap window* (seed §6-2-2): they were delivered but never
  acknowledged durably, so they are available again, and fetching resumes from the gap first.

Fetching carries no offset: the leader picks `next_fetch_offset()`, reads the log there, and
`acquire()` hands the member the available records (sharestate/acquisition.py).
Acknowledgements change states as transitions (sharestate/acknowledgement.py). This module holds
the cached state, releasing (lock expiry, a member gone, the log start moving) and the start
offset's bookkeeping. Pure and deterministic: time comes from the injected clock; writes and
acquisition locks (`Schedule` values) are returned for the caller to send and arm.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from kernel.clock import Clock
from kernel.timer import Schedule, ShardCall, TimerChange
from sharestate import acknowledgement, acquisition
from sharestate.acknowledgement import InvalidRecordState
from sharestate.config import SharePartitionConfig
from sharestate.inflight import NO_MEMBER, DeliveryCountOps, InFlightBatch, InFlightState, RecordState
from sharestate.partition_state import SharePartitionState, check_transition
from sharestate.records import StateBatch
from sharestate.state_batches import AckOutcome, AcknowledgementBatch, AcquiredRecords, StateWrite, runs

__all__ = [
    "AckOutcome",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "InvalidRecordState",
    "SharePartition",
    "SharePartitionConfig",
    "SharePartitionState",
    "StateWrite",
]


class SharePartition:
    def __init__(
        self,
        group_id: str,
        topic_id: Any,
        partition: int,
        *,
        clock: Clock,
        config: SharePartitionConfig = SharePartitionConfig(),
    ) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.clock = clock
        # Acquisition locks to arm, as values (kernel/timer.py): the host takes and arms them after
        # each operation (`take_timers`), as the runtime arms a coordinator Result's.
        self.timers: list[TimerChange] = []
        self.config = config
        self.state = SharePartitionState.INITIALIZING
        self.state_epoch = 0
        self.start_offset = 0
        self.end_offset = -1
        self.firsts: list[int] = []  # sorted first offsets of cached_state
        self.cached_state: dict[int, InFlightBatch] = {}
        self.find_next = False  # something before end_offset may be available again
        self.pending: dict[int, list[InFlightState]] = {}  # transition -> its states
        self.transition_ids = itertools.count(1)
        self.lock_ids = itertools.count(1)
        self.expired_locks: set[int] = set()

    # -- lifecycle -------------------------------------------------------------------------------------

    def initialize(
        self, start_offset: int, state_epoch: int, batches: Iterable[StateBatch], reset_offset: int
    ) -> None:
        """Load ReadShareGroupState's answer; start offset -1 means none yet: use `reset_offset`
        (share.auto.offset.reset, resolved against the log by the caller)."""
        check_transition(self.state, SharePartitionState.ACTIVE)
        self.state_epoch = state_epoch
        self.start_offset = reset_offset if start_offset < 0 else start_offset
        self.end_offset = self.start_offset - 1
        self.cached_state.clear()
        self.firsts.clear()
        for b in sorted(batches, key=lambda b: b.first_offset):
            first = max(b.first_offset, self.start_offset)
            if b.last_offset < first:
                continue  # wholly before the start offset: done
            state = RecordState(b.delivery_state)
            if state is RecordState.ACQUIRED:  # a lock does not survive its leader
                state = RecordState.AVAILABLE
            self.insert(InFlightBatch(first, b.last_offset, InFlightState(state, b.delivery_count)))
            self.end_offset = max(self.end_offset, b.last_offset)
        self.find_next = bool(self.cached_state)
        self.state = SharePartitionState.ACTIVE
        self.advance_start_offset()

    def end(self, target: SharePartitionState) -> None:
        """FAILED, FENCED or DROPPED: this copy serves no more; its locks die with it."""
        if self.state.final:
            return
        check_transition(self.state, target)
        self.state = target

    # -- where to fetch ---------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first offset that can be delivered: a gap left by recovery, then released records,
        then the first offset never fetched (seed §6-2-2)."""
        if not self.find_next:
            return self.end_offset + 1
        expected = self.start_offset
        for first in self.firsts:
            if first > expected:
                return expected  # the gap window: delivered before, never acknowledged durably
            batch = self.cached_state[first]
            for f, _, state in batch.states():
                if state.state is RecordState.AVAILABLE and not state.in_transition:
                    return f
            # max: batches below the start offset, still mid-transition, must not pull it back
            expected = max(expected, batch.last_offset + 1)
        if expected <= self.end_offset:
            return expected
        self.find_next = False
        return self.end_offset + 1

    def gap_window(self) -> tuple[int, int] | None:
        """(first uncovered offset, end offset) while a recovered gap is still undelivered."""
        expected = self.start_offset
        for first in self.firsts:
            if first > expected:
                return expected, self.end_offset
            expected = max(expected, self.cached_state[first].last_offset + 1)
        return None

    def in_flight_records(self) -> int:
        return max(0, self.end_offset - self.start_offset + 1)

    def can_acquire_records(self) -> bool:
        return self.next_fetch_offset() <= self.end_offset or self.in_flight_records() < self.config.max_inflight_records

    # -- acquiring and acknowledging (their own modules) -------------------------------------------

    def acquire(
        self, member_id: str, max_records: int, fetch_offset: int, log_batches: Sequence[tuple[int, int]],
        record_limit: bool = False,
    ) -> list[AcquiredRecords]:
        return acquisition.acquire(self, member_id, max_records, fetch_offset, log_batches, record_limit)

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> AckOutcome:
        return acknowledgement.acknowledge(self, member_id, batches)

    def complete(self, transition: int, committed: bool) -> StateWrite | None:
        return acknowledgement.complete(self, transition, committed)

    def schedule_lock(self, lock_id: int, member_id: str, first: int, last: int) -> None:
        """The acquisition lock of [first, last]: when it expires its records are released."""
        key = ("lock", self.group_id, self.topic_id, self.partition, lock_id)
        self.timers.append(Schedule(
            key, self.config.record_lock_duration_ms,
            ShardCall("release_on_lock_timeout", (lock_id, member_id, first, last)),
        ))

    def take_timers(self) -> list[TimerChange]:
        """The timer changes of the operations since the last call, for the host to arm."""
        timers, self.timers = self.timers, []
        return timers

    # -- releasing -------------------------------------------------------------------------------------

    def release_on_lock_timeout(self, lock_id: int, member_id: str, first: int, last: int) -> StateWrite | None:
        """The acquisition lock expired: its records are released (seed §6-2-4), final at once."""
        expired: list[InFlightState] = []
        for f in self.firsts_overlapping(first, last):
            for _, _, state in self.cached_state[f].states():
                if state.lock_id != lock_id:
                    continue
                if state.in_transition:
                    self.expired_locks.add(lock_id)  # decided when its transition completes
                elif state.state is RecordState.ACQUIRED:
                    expired.append(state)
        return self.release(expired) if expired else None

    def release_member(self, member_id: str) -> StateWrite | None:
        """A member's share session closed or it left: what it holds becomes available again."""
        held = [
            state
            for first in self.firsts
            for _, _, state in self.cached_state[first].states()
            if state.state is RecordState.ACQUIRED and state.member_id == member_id and not state.in_transition
        ]
        # The consumer never processed them: the delivery is given back (KAFKA-17541), so a record on
        # its last allowed delivery is not archived just because its consumer went away.
        return self.release(held, DeliveryCountOps.DECREASE) if held else None

    def release(self, states: list[InFlightState], ops: DeliveryCountOps = DeliveryCountOps.NONE) -> StateWrite:
        wanted = {id(s) for s in states}
        released = [
            (f, l, s) for first in self.firsts for f, l, s in self.cached_state[first].states() if id(s) in wanted
        ]
        for _first, last, state in released:
            if last < self.start_offset:
                # Retention moved the start past it while it was held: nothing is left to redeliver,
                # so it is archived, as Kafka's release and lock timeout do below the start offset.
                state.archive()
            else:
                state.try_update(RecordState.AVAILABLE, ops, self.config.delivery_count_limit, NO_MEMBER)
                state.lock_id = None
        self.find_next = True
        self.advance_start_offset()
        return StateWrite(self.start_offset, runs(released))

    def archive_before(self, log_start_offset: int) -> StateWrite | None:
        """The log's start moved past records still in flight (retention): archive them."""
        if log_start_offset <= self.start_offset:
            return None
        archived = []
        for first in list(self.firsts):
            batch = self.cached_state[first]
            if batch.first_offset >= log_start_offset:
                break
            if batch.last_offset >= log_start_offset:
                self.split(batch)
            for f, l, state in batch.states():
                if l < log_start_offset and not state.state.terminal and not state.in_transition:
                    state.archive()
                    archived.append((f, l, state))
        # Kafka's updateCacheAndOffsets: the start follows the log start, even past every record
        # this share partition has seen (else every later read is out of range).
        self.start_offset = max(self.start_offset, log_start_offset)
        self.end_offset = max(self.end_offset, self.start_offset - 1)
        self.advance_start_offset()
        return StateWrite(self.start_offset, runs(archived))

    # -- the start offset and the counts written ------------------------------------------------------

    def advance_start_offset(self) -> None:
        """Drop done batches at the front and move the start offset past every done record."""
        self._archive_available_below_start()
        i = 0
        while i < len(self.firsts):
            first = self.firsts[i]
            if first > self.start_offset:
                return  # a gap: those offsets are still to be delivered
            batch = self.cached_state[first]
            kept = False
            for f, l, state in batch.states():
                if state.state.terminal and not state.in_transition:
                    continue
                if l < self.start_offset:
                    kept = True  # below the start, still mid-transition: kept until it completes
                    continue
                self.start_offset = max(self.start_offset, f)
                return
            self.start_offset = max(self.start_offset, batch.last_offset + 1)
            if kept:
                i += 1
            else:
                del self.cached_state[first]
                self.firsts.pop(i)
        self.start_offset = max(self.start_offset, self.end_offset + 1)

    def _archive_available_below_start(self) -> None:
        """Records the start offset passed while they were mid-transition, and that came back
        AVAILABLE (a RELEASE written, a failed write undone), are archived: the log no longer holds
        them, so they can never be delivered again (Kafka archives below the start offset)."""
        for first in self.firsts:
            if first >= self.start_offset:
                return
            batch = self.cached_state[first]
            for f, l, state in list(batch.states()):
                if f >= self.start_offset or state.state is not RecordState.AVAILABLE or state.in_transition:
                    continue
                if l >= self.start_offset:
                    self.split(batch)
                    for g, m, part in batch.states():
                        if m < self.start_offset and part.state is RecordState.AVAILABLE and not part.in_transition:
                            part.archive()
                    break
                state.archive()

    def persisted_start_offset(self, transitions: Iterable[int]) -> int:
        """The start offset to write along with `transitions`, computed when the write is sent.

        Writes of one share partition go out one after another; computed at send time, every
        earlier write has been answered, so the start offsets written never move backwards.
        """
        return self.start_offset_if_committed(self._states_of(transitions))

    def delivery_complete_count(self, transitions: Iterable[int] = ()) -> int:
        """Records done (ACKNOWLEDGED or ARCHIVED) from the start offset written along with
        `transitions` on, counting what those transitions complete: Kafka's deliveryCompleteCount,
        from which DescribeShareGroupOffsets computes lag."""
        own = self._states_of(transitions)
        start = self.start_offset_if_committed(own)
        return sum(
            max(0, l - max(f, start) + 1)
            for first in self.firsts
            for f, l, state in self.cached_state[first].states()
            if state.state.terminal and (not state.in_transition or id(state) in own)
        )

    def start_offset_if_committed(self, own: set[int]) -> int:
        """The start offset once this transition (the states in `own`) commits: what is persisted.

        Other transitions still pending may yet be rolled back, so their records count as not done.
        """
        start = self.start_offset
        for first in self.firsts:
            if first > start:
                return start
            for f, l, state in self.cached_state[first].states():
                done = state.state.terminal and (not state.in_transition or id(state) in own)
                if not done and l >= start:  # below the start it is archived whatever it becomes
                    return max(start, f)
            start = max(start, self.cached_state[first].last_offset + 1)
        return max(start, self.end_offset + 1)

    def _states_of(self, transitions: Iterable[int]) -> set[int]:
        return {id(state) for t in transitions for state in self.pending.get(t, ())}

    # -- the cached state ----------------------------------------------------------------------------

    def split(self, batch: InFlightBatch) -> None:
        """Track a batch per offset; a transition pending on the whole batch follows its offsets."""
        whole = batch.batch_state
        batch.split()
        if whole is not None and whole.in_transition:
            assert batch.offset_state is not None
            for states in self.pending.values():
                for i, state in enumerate(states):
                    if state is whole:
                        states[i : i + 1] = list(batch.offset_state.values())
                        return

    def insert(self, batch: InFlightBatch) -> None:
        bisect.insort(self.firsts, batch.first_offset)
        self.cached_state[batch.first_offset] = batch

    def floor_batch(self, offset: int) -> InFlightBatch | None:
        """The in-flight batch with the greatest first offset at or before `offset`, whether or not
        it reaches it (Kafka's cachedState.floorEntry)."""
        i = bisect.bisect_right(self.firsts, offset) - 1
        return self.cached_state[self.firsts[i]] if i >= 0 else None

    def batch_at(self, offset: int) -> InFlightBatch | None:
        batch = self.floor_batch(offset)
        return batch if batch is not None and batch.last_offset >= offset else None

    def next_first_after(self, offset: int) -> int | None:
        i = bisect.bisect_right(self.firsts, offset)
        return self.firsts[i] if i < len(self.firsts) else None

    def firsts_overlapping(self, lo: int, hi: int) -> list[int]:
        i = max(bisect.bisect_right(self.firsts, lo) - 1, 0)
        out = []
        for first in self.firsts[i:]:
            if first > hi:
                break
            if self.cached_state[first].last_offset >= lo:
                out.append(first)
        return out

    # -- views ------------------------------------------------------------------------------------------

    def offsets(self) -> dict[int, tuple[RecordState, int, str]]:
        """Every in-flight offset from the start offset: (state, delivery count, member)."""
        out = {}
        for first in self.firsts:
            for f, l, state in self.cached_state[first].states():
                for offset in range(max(f, self.start_offset), l + 1):
                    out[offset] = (state.state, state.delivery_count, state.member_id)
        return out

    def counts(self) -> dict[str, int]:
        """Records available / acquired / done in flight, for `raygroups status` (KIP-1226 direction)."""
        totals = {s.name.lower(): 0 for s in RecordState}
        for first in self.firsts:
            for f, l, state in self.cached_state[first].states():
                totals[state.state.name.lower()] += max(0, l - max(f, self.start_offset) + 1)
        return totals
