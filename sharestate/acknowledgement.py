"""Acknowledging records (seed 001 §6-2-3; Kafka's SharePartition.acknowledge).

A member's acknowledgements apply as one transition, all of them or none: ACCEPT ->
ACKNOWLEDGED, REJECT and GAP -> ARCHIVED, RELEASE -> AVAILABLE (ARCHIVED at the delivery limit);
RENEW restarts the acquisition lock and needs no write. The returned StateWrite must reach the
share coordinator; `complete` then makes the change final or rolls it back (write before success).
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from sharestate.inflight import NO_MEMBER, AcknowledgeType, DeliveryCountOps, InFlightState, RecordState
from sharestate.partition_state import SharePartitionState
from sharestate.partition_view import PartitionView
from sharestate.state_batches import AcknowledgementBatch, AckOutcome, StateWrite, runs



class InvalidRecordState(Exception):
    pass


_TARGET = {
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.GAP: RecordState.ARCHIVED,
}


def acknowledge(sp: PartitionView, member_id: str, batches: Sequence[AcknowledgementBatch]) -> AckOutcome:
    """A record the member does not hold (not ACQUIRED, another member's, or mid-transition)
    fails the whole acknowledgement with INVALID_RECORD_STATE and changes nothing. Offsets below
    the start offset are done already and skipped: a retried acknowledgement succeeds (Kafka)."""
    if sp.state is not SharePartitionState.ACTIVE:
        return AckOutcome(ErrorCode.unknown_server_error, message="share partition is not active")
    touched: list[tuple[int, int, InFlightState]] = []
    renewed: list[InFlightState] = []
    limit = sp.config.delivery_count_limit
    try:
        for ack in batches:
            _validate(sp, ack)
            if ack.last_offset < sp.start_offset:
                continue
            lo = max(ack.first_offset, sp.start_offset)
            per_offset = len(ack.acknowledge_types) > 1
            for first, last, state in _states_for(sp, lo, ack.last_offset, per_offset):
                kind = AcknowledgeType(ack.acknowledge_types[first - ack.first_offset if per_offset else 0])
                if state.state is not RecordState.ACQUIRED or state.member_id != member_id or state.in_transition:
                    raise InvalidRecordState(
                        f"offsets {first}-{last} are {state.state.name}"
                        + ("" if state.member_id in (member_id, NO_MEMBER) else " by another member")
                    )
                if kind is AcknowledgeType.RENEW:
                    renewed.append(state)
                    continue
                if not state.start_transition(_TARGET[kind], DeliveryCountOps.NONE, limit, NO_MEMBER):
                    raise InvalidRecordState(f"offsets {first}-{last} cannot be acknowledged from {state.state.name}")
                touched.append((first, last, state))
    except (InvalidRecordState, ValueError) as exc:
        for _, _, state in touched:
            state.complete_transition(commit=False)
        code = ErrorCode.invalid_record_state if isinstance(exc, InvalidRecordState) else ErrorCode.invalid_request
        return AckOutcome(code, message=str(exc))
    if renewed:
        _renew(sp, member_id, renewed)
    if not touched:
        return AckOutcome(ErrorCode.none)
    transition = next(sp.transition_ids)
    sp.pending[transition] = [state for _, _, state in touched]
    own = {id(state) for _, _, state in touched}
    return AckOutcome(ErrorCode.none, StateWrite(sp.start_offset_if_committed(own), runs(touched), transition))


def complete(sp: PartitionView, transition: int, committed: bool) -> StateWrite | None:
    """The share coordinator answered the write of `transition`: make it final, or undo it.

    A lock that expired while its records were mid-transition releases them now, if the
    transition was undone; the returned write (if any) must be sent like any other.
    """
    states = sp.pending.pop(transition, [])
    for state in states:
        state.complete_transition(committed)
    if committed:
        if any(s.state is RecordState.AVAILABLE for s in states):
            sp.find_next = True
        sp.advance_start_offset()
        return None
    expired = [s for s in states if s.state is RecordState.ACQUIRED and s.lock_id in sp.expired_locks]
    return sp.release(expired) if expired else None


def _validate(sp: PartitionView, ack: AcknowledgementBatch) -> None:
    if ack.last_offset < ack.first_offset:
        raise ValueError(f"acknowledgement batch {ack.first_offset}-{ack.last_offset} ends before it starts")
    count = ack.last_offset - ack.first_offset + 1
    if len(ack.acknowledge_types) not in (1, count):
        raise ValueError("acknowledge types must be one for the batch or one per offset")
    if any(t not in AcknowledgeType._value2member_map_ for t in ack.acknowledge_types):
        raise ValueError(f"unknown acknowledge type in {ack.acknowledge_types}")
    if ack.last_offset > sp.end_offset:  # never delivered: Kafka calls that a bad request
        raise ValueError(f"offsets {ack.first_offset}-{ack.last_offset} go past the last acquired offset {sp.end_offset}")


def _states_for(sp: PartitionView, lo: int, hi: int, per_offset: bool) -> list[tuple[int, int, InFlightState]]:
    """The states covering [lo, hi] exactly, splitting batches the range cuts; a hole is invalid."""
    out: list[tuple[int, int, InFlightState]] = []
    expected = lo
    for first in sp.firsts_overlapping(lo, hi):
        batch = sp.cached_state[first]
        if batch.first_offset > expected:
            raise InvalidRecordState(f"offset {expected} is not in flight")
        if batch.offset_state is None and (per_offset or batch.first_offset < lo or batch.last_offset > hi):
            sp.split(batch)
        for f, l, state in batch.states():
            if l >= lo and f <= hi:
                out.append((f, l, state))
        expected = batch.last_offset + 1
    if expected <= hi:
        raise InvalidRecordState(f"offset {expected} is not in flight")
    return out


def _renew(sp: PartitionView, member_id: str, states: list[InFlightState]) -> None:
    """RENEW: a fresh acquisition lock for these records; the old lock, when it fires, finds
    them no longer its own."""
    lock_id = next(sp.lock_ids)
    for state in states:
        state.lock_id = lock_id
    sp.schedule_lock(lock_id, member_id, sp.start_offset, sp.end_offset)
