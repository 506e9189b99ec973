"""Acknowledging records (seed 001 §6-2-3; Kafka's SharePartition.acknowledge).

A member's acknowledgements apply as one transition, all of them or none: ACCEPT ->
ACKNOWLEDGED, REJECT and GAP -> ARCHIVED, RELEASE -> AVAILABLE (ARCHIVED at the delivery limit);
RENEW restarts the acquisition lock and needs no write. The returned StateWrite must reach the
share coordinator; `complete` then makes the change final or rolls it back (write before success).

An acknowledgement covers the in-flight batches it reaches, as Kafka 4.2's
fetchSubMapForAcknowledgementBatch and acknowledgeBatchRecords find them: offsets between them,
never fetched, are skipped; offsets past the last of them are INVALID_REQUEST; with no in-flight
batch at or before its first offset it is INVALID_RECORD_STATE.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from sharestate.inflight import NO_MEMBER, AcknowledgeType, DeliveryCountOps, InFlightBatch, InFlightState, RecordState
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
    the start offset are done already and skipped: a retried acknowledgement succeeds (Kafka).
    Offsets between in-flight batches, never fetched, are skipped too (_batches_for)."""
    if sp.state is not SharePartitionState.ACTIVE:
        return AckOutcome(ErrorCode.unknown_server_error, message="share partition is not active")
    touched: list[tuple[int, int, InFlightState]] = []
    renewed: list[InFlightState] = []
    try:
        for ack in batches:
            _validate(ack)
            if ack.last_offset < sp.start_offset:
                continue
            for batch in _batches_for(sp, ack):
                _acknowledge_batch(sp, member_id, ack, batch, touched, renewed)
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


def _validate(ack: AcknowledgementBatch) -> None:
    if ack.last_offset < ack.first_offset:
        raise ValueError(f"acknowledgement batch {ack.first_offset}-{ack.last_offset} ends before it starts")
    count = ack.last_offset - ack.first_offset + 1
    if len(ack.acknowledge_types) not in (1, count):
        raise ValueError("acknowledge types must be one for the batch or one per offset")
    if any(t not in AcknowledgeType._value2member_map_ for t in ack.acknowledge_types):
        raise ValueError(f"unknown acknowledge type in {ack.acknowledge_types}")


def _batches_for(sp: PartitionView, ack: AcknowledgementBatch) -> list[InFlightBatch]:
    """Kafka's fetchSubMapForAcknowledgementBatch: the in-flight batches from the one at or before
    the first offset (when the start offset lies inside the acknowledgement, the one at or before
    the start offset) to the last offset. Offsets between them were never fetched and are skipped.

    Nothing in flight at or before the first offset: INVALID_RECORD_STATE. Offsets past the last
    of those batches were never acquired: INVALID_REQUEST (a ValueError here)."""
    floor = sp.floor_batch(ack.first_offset)
    if floor is None and ack.first_offset < sp.start_offset <= ack.last_offset:
        floor = sp.floor_batch(sp.start_offset)
    if floor is None:  # (Kafka fails on a null floor entry here, a gap at the start offset)
        raise InvalidRecordState(f"offsets {ack.first_offset}-{ack.last_offset} are not in the cached state")
    sub = [sp.cached_state[first] for first in sp.firsts_overlapping(floor.first_offset, ack.last_offset)]
    if ack.last_offset > sub[-1].last_offset:
        raise ValueError(
            f"offsets {ack.first_offset}-{ack.last_offset} go past the acquired records (to {sub[-1].last_offset})"
        )
    return sub


def _acknowledge_batch(
    sp: PartitionView, member_id: str, ack: AcknowledgementBatch, batch: InFlightBatch,
    touched: list[tuple[int, int, InFlightState]], renewed: list[InFlightState],
) -> None:
    """Kafka's acknowledgeBatchRecords for one in-flight batch: whole when the acknowledgement
    covers it with one type and the start offset is not inside it, else per offset."""
    if batch.last_offset < sp.start_offset:
        return  # done already
    if batch.offset_state is None:
        # Checked even when the acknowledgement starts after it (the floor batch before a gap).
        _check_held(batch.batch_state, member_id, batch.first_offset, batch.last_offset)
    whole = (
        batch.offset_state is None
        and batch.first_offset >= max(ack.first_offset, sp.start_offset)
        and batch.last_offset <= ack.last_offset
        and len(ack.acknowledge_types) == 1
    )
    if whole:
        assert batch.batch_state is not None
        _apply(sp, ack.acknowledge_types[0], batch.first_offset, batch.last_offset, batch.batch_state, touched, renewed)
        return
    sp.split(batch)
    assert batch.offset_state is not None
    per_offset = len(ack.acknowledge_types) > 1
    for offset, state in batch.offset_state.items():
        if offset < ack.first_offset or offset < sp.start_offset:
            continue
        if offset > ack.last_offset:
            break
        _check_held(state, member_id, offset, offset)
        kind = ack.acknowledge_types[offset - ack.first_offset if per_offset else 0]
        _apply(sp, kind, offset, offset, state, touched, renewed)


def _check_held(state: InFlightState | None, member_id: str, first: int, last: int) -> None:
    assert state is not None
    if state.state is not RecordState.ACQUIRED or state.member_id != member_id or state.in_transition:
        raise InvalidRecordState(
            f"offsets {first}-{last} are {state.state.name}"
            + ("" if state.member_id in (member_id, NO_MEMBER) else " by another member")
            + (" mid-transition" if state.in_transition else "")
        )


def _apply(
    sp: PartitionView, kind: int, first: int, last: int, state: InFlightState,
    touched: list[tuple[int, int, InFlightState]], renewed: list[InFlightState],
) -> None:
    if kind == AcknowledgeType.RENEW:
        renewed.append(state)
        return
    target = _TARGET[AcknowledgeType(kind)]
    if not state.start_transition(target, DeliveryCountOps.NONE, sp.config.delivery_count_limit, NO_MEMBER):
        raise InvalidRecordState(f"offsets {first}-{last} cannot be acknowledged from {state.state.name}")
    touched.append((first, last, state))


def _renew(sp: PartitionView, member_id: str, states: list[InFlightState]) -> None:
    """RENEW: a fresh acquisition lock for these records; the old lock, when it fires, finds
    them no longer its own."""
    lock_id = next(sp.lock_ids)
    for state in states:
        state.lock_id = lock_id
    sp.schedule_lock(lock_id, member_id, sp.start_offset, sp.end_offset)
