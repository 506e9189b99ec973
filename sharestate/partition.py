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
`acquire()` hands the member the available records (ACQUIRED, delivery count + 1, an acquisition
lock). Acknowledgements change states as *transitions*: the returned `StateWrite` must reach the
share coordinator, then `complete(transition, committed)` makes the change final or rolls it back
(write before success). Lock expiry acts as RELEASE. Pure and deterministic: time comes from the
injected clock and timer; writes are returned as values for the caller to send.
"""

from __future__ import annotations

import bisect
import enum
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kernel.clock import Clock
from kernel.timer import Timer
from sharestate.inflight import (
    NO_MEMBER,
    AcknowledgeType,
    DeliveryCountOps,
    InFlightBatch,
    InFlightState,
    RecordState,
)
from sharestate.records import StateBatch


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_inflight_records: int = 2000  # group.share.partition.max.record.locks


class SharePartitionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    ACTIVE = "active"
    FENCED = "fenced"


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]  # one for the whole range, or one per offset


@dataclass(frozen=True, slots=True)
class StateWrite:
    """A change the share coordinator must store (WriteShareGroupState for this partition).

    `transition` names the pending change to commit or roll back once the write is answered;
    None for changes that are final already (lock expiry, as in Kafka).
    """

    start_offset: int
    batches: tuple[StateBatch, ...]
    transition: int | None = None


@dataclass(frozen=True, slots=True)
class AckOutcome:
    error_code: ErrorCode
    write: StateWrite | None = None
    message: str = ""


class InvalidRecordState(Exception):
    pass


_TARGET = {
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.GAP: RecordState.ARCHIVED,
}


class SharePartition:
    def __init__(
        self,
        group_id: str,
        topic_id: Any,
        partition: int,
        *,
        clock: Clock,
        timer: Timer,
        config: SharePartitionConfig = SharePartitionConfig(),
    ) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.clock = clock
        self.timer = timer
        self.config = config
        self.state = SharePartitionState.UNINITIALIZED
        self.state_epoch = 0
        self.start_offset = 0
        self.end_offset = -1
        self._firsts: list[int] = []  # sorted first offsets of cached_state
        self.cached_state: dict[int, InFlightBatch] = {}
        self._find_next = False
        self._pending: dict[int, list[InFlightState]] = {}
        self._transitions = itertools.count(1)
        self._locks = itertools.count(1)
        self._expired_locks: set[int] = set()

    # -- initialization from the durable state ------------------------------------------------------

    def initialize(
        self, start_offset: int, state_epoch: int, batches: Iterable[StateBatch], reset_offset: int
    ) -> None:
        """Load ReadShareGroupState's answer; start offset -1 means none yet: use `reset_offset`
        (share.auto.offset.reset, resolved against the log by the caller)."""
        self.state_epoch = state_epoch
        self.start_offset = reset_offset if start_offset < 0 else start_offset
        self.end_offset = self.start_offset - 1
        self.cached_state.clear()
        self._firsts.clear()
        for b in sorted(batches, key=lambda b: b.first_offset):
            first = max(b.first_offset, self.start_offset)
            if b.last_offset < first:
                continue  # wholly before the start offset: done
            state = RecordState(b.delivery_state)
            if state is RecordState.ACQUIRED:  # a lock does not survive its leader
                state = RecordState.AVAILABLE
            self._insert(InFlightBatch(first, b.last_offset, InFlightState(state, b.delivery_count)))
            self.end_offset = max(self.end_offset, b.last_offset)
        self._find_next = bool(self.cached_state)
        self.state = SharePartitionState.ACTIVE
        self._advance_start_offset()

    # -- where to fetch ---------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first offset that can be delivered: a gap left by recovery, then released records,
        then the first offset never fetched (seed §6-2-2)."""
        if not self._find_next:
            return self.end_offset + 1
        expected = self.start_offset
        for first in self._firsts:
            if first > expected:
                return expected  # the gap window: delivered before, never acknowledged durably
            batch = self.cached_state[first]
            for f, _, state in batch.states():
                if state.state is RecordState.AVAILABLE and not state.in_transition:
                    return f
            expected = batch.last_offset + 1
        if expected <= self.end_offset:
            return expected
        self._find_next = False
        return self.end_offset + 1

    def gap_window(self) -> tuple[int, int] | None:
        """(first uncovered offset, end offset) while a recovered gap is still undelivered."""
        expected = self.start_offset
        for first in self._firsts:
            if first > expected:
                return expected, self.end_offset
            expected = self.cached_state[first].last_offset + 1
        return None

    def in_flight_records(self) -> int:
        return max(0, self.end_offset - self.start_offset + 1)

    def can_acquire_records(self) -> bool:
        return self.next_fetch_offset() <= self.end_offset or self.in_flight_records() < self.config.max_inflight_records

    # -- acquiring ----------------------------------------------------------------------------------

    def acquire(
        self, member_id: str, max_records: int, fetch_offset: int, log_batches: Sequence[tuple[int, int]]
    ) -> list[AcquiredRecords]:
        """Acquire what is available from fetch_offset in the batches read from the log.

        log_batches: (base offset, last offset) of each batch read, in order. New records are
        acquired in whole log batches (max_records may be exceeded to keep batch boundaries, as
        Kafka does), and only while group.share.partition.max.record.locks allows.
        """
        if self.state is not SharePartitionState.ACTIVE or not log_batches:
            return []
        last_log = log_batches[-1][1]
        lock_id = next(self._locks)
        acquired: list[AcquiredRecords] = []
        budget = max_records
        pos = max(fetch_offset, self.start_offset)
        while pos <= last_log and budget > 0:
            batch = self._batch_at(pos)
            if batch is not None:
                budget -= self._acquire_cached(batch, pos, last_log, budget, member_id, lock_id, acquired)
                pos = batch.last_offset + 1
                continue
            following = self._next_first_after(pos)
            hi = last_log if following is None else min(following - 1, last_log)
            limit = budget
            if pos > self.end_offset:
                limit = min(budget, self.config.max_inflight_records - self.in_flight_records())
                if limit <= 0:
                    break
            taken = self._acquire_new(pos, hi, limit, log_batches, member_id, lock_id, acquired)
            if taken == 0:
                pos = hi + 1
                continue
            budget -= taken
            pos = acquired[-1].last_offset + 1
        if acquired:
            first, last = acquired[0].first_offset, acquired[-1].last_offset
            shard_key = ("lock", self.group_id, self.topic_id, self.partition, lock_id)
            self.timer.schedule(
                shard_key,
                self.config.record_lock_duration_ms,
                lambda: self.release_on_lock_timeout(lock_id, member_id, first, last),
            )
        return acquired

    def _acquire_cached(
        self, batch: InFlightBatch, pos: int, last_log: int, budget: int, member_id: str, lock_id: int,
        acquired: list[AcquiredRecords],
    ) -> int:
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
            state.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, self.config.delivery_count_limit, member_id)
            state.lock_id = lock_id
            acquired.append(AcquiredRecords(batch.first_offset, batch.last_offset, state.delivery_count))
            return batch.size
        if batch.offset_state is None and (batch.batch_state is None or batch.batch_state.state is not RecordState.AVAILABLE):
            return 0  # nothing available in it: no need to split it
        self._split(batch)
        assert batch.offset_state is not None
        taken = 0
        for offset in range(max(pos, batch.first_offset), min(batch.last_offset, last_log) + 1):
            if taken >= budget:
                break
            state = batch.offset_state[offset]
            if state.state is not RecordState.AVAILABLE or state.in_transition:
                continue
            state.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, self.config.delivery_count_limit, member_id)
            state.lock_id = lock_id
            _append_run(acquired, offset, state.delivery_count)
            taken += 1
        return taken

    def _acquire_new(
        self, lo: int, hi: int, limit: int, log_batches: Sequence[tuple[int, int]], member_id: str, lock_id: int,
        acquired: list[AcquiredRecords],
    ) -> int:
        """New in-flight batches over [lo, hi], cut at log batch boundaries."""
        taken = 0
        for base, last in log_batches:
            if last < lo or taken >= limit:
                continue
            if base > hi:
                break
            first, end = max(base, lo), min(last, hi)
            state = InFlightState(RecordState.ACQUIRED, 1, member_id, lock_id)
            self._insert(InFlightBatch(first, end, state))
            acquired.append(AcquiredRecords(first, end, 1))
            taken += end - first + 1
            self.end_offset = max(self.end_offset, end)
        return taken

    # -- acknowledging ----------------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> AckOutcome:
        """Apply a member's acknowledgements as one transition: all of them, or none.

        ACCEPT -> ACKNOWLEDGED, REJECT and GAP -> ARCHIVED, RELEASE -> AVAILABLE (ARCHIVED at the
        delivery limit); RENEW restarts the acquisition lock and needs no write. A record the
        member does not hold (not ACQUIRED, another member's, or mid-transition) fails the whole
        acknowledgement with INVALID_RECORD_STATE and changes nothing.
        """
        if self.state is not SharePartitionState.ACTIVE:
            return AckOutcome(ErrorCode.unknown_server_error, message="share partition is not active")
        touched: list[tuple[int, int, InFlightState]] = []
        renewed: list[InFlightState] = []
        try:
            for ack in batches:
                self._validate(ack)
                if ack.last_offset < self.start_offset:
                    continue  # done already: a retried acknowledgement succeeds (as in Kafka)
                lo = max(ack.first_offset, self.start_offset)
                for first, last, state in self._states_for(lo, ack.last_offset, len(ack.acknowledge_types) > 1):
                    kind = AcknowledgeType(
                        ack.acknowledge_types[0] if len(ack.acknowledge_types) == 1 else ack.acknowledge_types[first - ack.first_offset]
                    )
                    if state.state is not RecordState.ACQUIRED or state.member_id != member_id or state.in_transition:
                        raise InvalidRecordState(
                            f"offsets {first}-{last} are {state.state.name}"
                            + ("" if state.member_id in (member_id, NO_MEMBER) else " by another member")
                        )
                    if kind is AcknowledgeType.RENEW:
                        renewed.append(state)
                        continue
                    if not state.start_transition(_TARGET[kind], DeliveryCountOps.NONE, self.config.delivery_count_limit, NO_MEMBER):
                        raise InvalidRecordState(f"offsets {first}-{last} cannot be acknowledged from {state.state.name}")
                    touched.append((first, last, state))
        except (InvalidRecordState, ValueError) as exc:
            for _, _, state in touched:
                state.complete_transition(commit=False)
            code = ErrorCode.invalid_record_state if isinstance(exc, InvalidRecordState) else ErrorCode.invalid_request
            return AckOutcome(code, message=str(exc))
        if renewed:
            self._renew(member_id, renewed)
        if not touched:
            return AckOutcome(ErrorCode.none)
        transition = next(self._transitions)
        self._pending[transition] = [state for _, _, state in touched]
        own = {id(state) for _, _, state in touched}
        write = StateWrite(self._start_offset_if_committed(own), _runs(touched), transition)
        return AckOutcome(ErrorCode.none, write)

    def complete(self, transition: int, committed: bool) -> StateWrite | None:
        """The share coordinator answered the write of `transition`: make it final, or undo it.

        A lock that expired while its records were mid-transition releases them now, if the
        transition was undone; the returned write (if any) must be sent like any other.
        """
        states = self._pending.pop(transition, [])
        for state in states:
            state.complete_transition(committed)
        if committed:
            if any(s.state is RecordState.AVAILABLE for s in states):
                self._find_next = True
            self._advance_start_offset()
            return None
        expired = [s for s in states if s.state is RecordState.ACQUIRED and s.lock_id in self._expired_locks]
        return self._release(expired) if expired else None

    def _validate(self, ack: AcknowledgementBatch) -> None:
        if ack.last_offset < ack.first_offset:
            raise ValueError(f"acknowledgement batch {ack.first_offset}-{ack.last_offset} ends before it starts")
        count = ack.last_offset - ack.first_offset + 1
        if len(ack.acknowledge_types) not in (1, count):
            raise ValueError("acknowledge types must be one for the batch or one per offset")
        if any(t not in AcknowledgeType._value2member_map_ for t in ack.acknowledge_types):
            raise ValueError(f"unknown acknowledge type in {ack.acknowledge_types}")
        if ack.last_offset > self.end_offset:  # never delivered: Kafka calls that a bad request
            raise ValueError(f"offsets {ack.first_offset}-{ack.last_offset} go past the last acquired offset {self.end_offset}")

    def _states_for(self, lo: int, hi: int, per_offset: bool) -> list[tuple[int, int, InFlightState]]:
        """The states covering [lo, hi] exactly, splitting batches the range cuts; a hole is invalid."""
        out: list[tuple[int, int, InFlightState]] = []
        expected = lo
        for first in self._firsts_overlapping(lo, hi):
            batch = self.cached_state[first]
            if batch.first_offset > expected:
                raise InvalidRecordState(f"offset {expected} is not in flight")
            if batch.offset_state is None and (per_offset or batch.first_offset < lo or batch.last_offset > hi):
                self._split(batch)
            for f, l, state in batch.states():
                if l >= lo and f <= hi:
                    out.append((f, l, state))
            expected = batch.last_offset + 1
        if expected <= hi:
            raise InvalidRecordState(f"offset {expected} is not in flight")
        return out

    def _renew(self, member_id: str, states: list[InFlightState]) -> None:
        """RENEW: a fresh acquisition lock for these records; the old lock, when it fires, finds
        them no longer its own."""
        lock_id = next(self._locks)
        for state in states:
            state.lock_id = lock_id
        key = ("lock", self.group_id, self.topic_id, self.partition, lock_id)
        self.timer.schedule(
            key, self.config.record_lock_duration_ms, lambda: self.release_on_lock_timeout(lock_id, member_id, self.start_offset, self.end_offset)
        )

    # -- releasing -------------------------------------------------------------------------------------

    def release_on_lock_timeout(self, lock_id: int, member_id: str, first: int, last: int) -> StateWrite | None:
        """The acquisition lock expired: its records are released (seed §6-2-4), final at once."""
        expired: list[InFlightState] = []
        for f in self._firsts_overlapping(first, last):
            for _, _, state in self.cached_state[f].states():
                if state.lock_id != lock_id:
                    continue
                if state.in_transition:
                    self._expired_locks.add(lock_id)  # decided when its transition completes
                elif state.state is RecordState.ACQUIRED:
                    expired.append(state)
        return self._release(expired) if expired else None

    def release_member(self, member_id: str) -> StateWrite | None:
        """A member's share session closed or it left: what it holds becomes available again."""
        held = [
            state
            for first in self._firsts
            for _, _, state in self.cached_state[first].states()
            if state.state is RecordState.ACQUIRED and state.member_id == member_id and not state.in_transition
        ]
        # The consumer never processed them: the delivery is given back (KAFKA-17541), so a record on
        # its last allowed delivery is not archived just because its consumer went away.
        return self._release(held, DeliveryCountOps.DECREASE) if held else None

    def _release(self, states: list[InFlightState], ops: DeliveryCountOps = DeliveryCountOps.NONE) -> StateWrite:
        wanted = {id(s) for s in states}
        for state in states:
            state.try_update(RecordState.AVAILABLE, ops, self.config.delivery_count_limit, NO_MEMBER)
            state.lock_id = None
        self._find_next = True
        runs = [
            (f, l, s) for first in self._firsts for f, l, s in self.cached_state[first].states() if id(s) in wanted
        ]
        self._advance_start_offset()
        return StateWrite(self.start_offset, _runs(runs))

    def archive_before(self, log_start_offset: int) -> StateWrite | None:
        """The log's start moved past records still in flight (retention): archive them."""
        if log_start_offset <= self.start_offset:
            return None
        runs = []
        for first in list(self._firsts):
            batch = self.cached_state[first]
            if batch.first_offset >= log_start_offset:
                break
            if batch.last_offset >= log_start_offset:
                self._split(batch)
            for f, l, state in batch.states():
                if l < log_start_offset and not state.state.terminal and not state.in_transition:
                    state.archive()
                    runs.append((f, l, state))
        self.start_offset = max(self.start_offset, min(log_start_offset, self.end_offset + 1))
        self.end_offset = max(self.end_offset, self.start_offset - 1)
        self._advance_start_offset()
        return StateWrite(self.start_offset, _runs(runs))

    # -- bookkeeping -----------------------------------------------------------------------------------

    def _advance_start_offset(self) -> None:
        """Drop done batches at the front and move the start offset past every done record."""
        while self._firsts:
            first = self._firsts[0]
            if first > self.start_offset:
                return  # a gap: those offsets are still to be delivered
            batch = self.cached_state[first]
            for f, l, state in batch.states():
                if not (state.state.terminal and not state.in_transition):
                    self.start_offset = max(self.start_offset, f)
                    return
            self.start_offset = batch.last_offset + 1
            del self.cached_state[first]
            self._firsts.pop(0)
        self.start_offset = max(self.start_offset, self.end_offset + 1)

    def persisted_start_offset(self, transitions: Iterable[int]) -> int:
        """The start offset to write along with `transitions`, computed when the write is sent.

        Writes of one share partition go out one after another; computed at send time, every
        earlier write has been answered, so the start offsets written never move backwards.
        """
        own = {id(state) for t in transitions for state in self._pending.get(t, ())}
        return self._start_offset_if_committed(own)

    def delivery_complete_count(self, transitions: Iterable[int] = ()) -> int:
        """Records done (ACKNOWLEDGED or ARCHIVED) from the start offset written along with
        `transitions` on, counting what those transitions complete: Kafka's deliveryCompleteCount,
        from which DescribeShareGroupOffsets computes lag."""
        own = {id(state) for t in transitions for state in self._pending.get(t, ())}
        start = self._start_offset_if_committed(own)
        return sum(
            max(0, l - max(f, start) + 1)
            for first in self._firsts
            for f, l, state in self.cached_state[first].states()
            if state.state.terminal and (not state.in_transition or id(state) in own)
        )

    def _start_offset_if_committed(self, own: set[int]) -> int:
        """The start offset once this transition (the states in `own`) commits: what is persisted.

        Other transitions still pending may yet be rolled back, so their records count as not done.
        """
        start = self.start_offset
        for first in self._firsts:
            if first > start:
                return start
            for f, l, state in self.cached_state[first].states():
                done = state.state.terminal and (not state.in_transition or id(state) in own)
                if not done:
                    return max(start, f)
            start = self.cached_state[first].last_offset + 1
        return max(start, self.end_offset + 1)

    def _split(self, batch: InFlightBatch) -> None:
        """Track a batch per offset; a transition pending on the whole batch follows its offsets."""
        whole = batch.batch_state
        batch.split()
        if whole is not None and whole.in_transition:
            assert batch.offset_state is not None
            for states in self._pending.values():
                for i, state in enumerate(states):
                    if state is whole:
                        states[i : i + 1] = list(batch.offset_state.values())
                        return

    def _insert(self, batch: InFlightBatch) -> None:
        bisect.insort(self._firsts, batch.first_offset)
        self.cached_state[batch.first_offset] = batch

    def _batch_at(self, offset: int) -> InFlightBatch | None:
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i >= 0:
            batch = self.cached_state[self._firsts[i]]
            if batch.last_offset >= offset:
                return batch
        return None

    def _next_first_after(self, offset: int) -> int | None:
        i = bisect.bisect_right(self._firsts, offset)
        return self._firsts[i] if i < len(self._firsts) else None

    def _firsts_overlapping(self, lo: int, hi: int) -> list[int]:
        i = max(bisect.bisect_right(self._firsts, lo) - 1, 0)
        out = []
        for first in self._firsts[i:]:
            if first > hi:
                break
            if self.cached_state[first].last_offset >= lo:
                out.append(first)
        return out

    # -- views ------------------------------------------------------------------------------------------

    def offsets(self) -> dict[int, tuple[RecordState, int, str]]:
        """Every in-flight offset from the start offset: (state, delivery count, member)."""
        out = {}
        for first in self._firsts:
            for f, l, state in self.cached_state[first].states():
                for offset in range(max(f, self.start_offset), l + 1):
                    out[offset] = (state.state, state.delivery_count, state.member_id)
        return out

    def counts(self) -> dict[str, int]:
        """Records available / acquired / done in flight, for `raygroups status` (KIP-1226 direction)."""
        totals = {s.name.lower(): 0 for s in RecordState}
        for first in self._firsts:
            for f, l, state in self.cached_state[first].states():
                totals[state.state.name.lower()] += max(0, l - max(f, self.start_offset) + 1)
        return totals


def _append_run(acquired: list[AcquiredRecords], offset: int, delivery_count: int) -> None:
    if acquired and acquired[-1].last_offset == offset - 1 and acquired[-1].delivery_count == delivery_count:
        last = acquired.pop()
        acquired.append(AcquiredRecords(last.first_offset, offset, delivery_count))
    else:
        acquired.append(AcquiredRecords(offset, offset, delivery_count))


def _runs(states: Sequence[tuple[int, int, InFlightState]]) -> tuple[StateBatch, ...]:
    """Adjacent offsets in the same state and delivery count, merged into state batches."""
    out: list[StateBatch] = []
    for first, last, state in sorted(states, key=lambda t: t[0]):
        if (
            out
            and out[-1].last_offset == first - 1
            and out[-1].delivery_state == state.state.value
            and out[-1].delivery_count == state.delivery_count
        ):
            out[-1] = StateBatch(out[-1].first_offset, last, state.state.value, state.delivery_count)
        else:
            out.append(StateBatch(first, last, state.state.value, state.delivery_count))
    return tuple(out)
