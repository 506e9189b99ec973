"""What a share partition hands out and takes in, as values: acquired records, acknowledgement
batches, and the state writes bound for the share coordinator (runs of StateBatch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kernel.message import message
from sharestate.inflight import InFlightState
from sharestate.records import StateBatch


@message(flat=True)  # crosses Ray in every ShareFetch answer
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


@message(flat=True)  # crosses Ray in every ShareFetch that acknowledges
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


def append_run(acquired: list[AcquiredRecords], offset: int, delivery_count: int) -> None:
    """Add one acquired offset, extending the last run when it continues it."""
    if acquired and acquired[-1].last_offset == offset - 1 and acquired[-1].delivery_count == delivery_count:
        last = acquired.pop()
        acquired.append(AcquiredRecords(last.first_offset, offset, delivery_count))
    else:
        acquired.append(AcquiredRecords(offset, offset, delivery_count))


def runs(states: Sequence[tuple[int, int, InFlightState]]) -> tuple[StateBatch, ...]:
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
