"""In-flight records of a share partition (seed 001 §6-2-1; Kafka's RecordState, InFlightState, InFlightBatch).

A record's delivery state:

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED          (terminal)
                                    --REJECT / GAP--> ARCHIVED        (terminal)
                                    --RELEASE / lock expiry--> AVAILABLE, or ARCHIVED once
                                      delivered group.share.delivery.count.limit times
    AVAILABLE --archive (start offset moved past it)--> ARCHIVED

A batch of offsets shares one state while it is handled as a whole; the first acknowledgement or
acquisition that touches only part of it splits it into one state per offset.

A change that must be persisted first is a *transition*: the new state is applied with the old one
kept aside, and once the share coordinator has the write the transition is committed (or, if the
write failed, rolled back). While a transition is pending the state cannot be acquired again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)

    def validate_transition(self, target: "RecordState") -> None:
        """Raise, changing nothing, unless self -> target is legal (Kafka's RecordState.validateTransition)."""
        if target == self:
            raise IllegalStateTransition(f"{self.name} -> {target.name}: already in that state")
        if self.terminal:
            raise IllegalStateTransition(f"{self.name} is terminal")
        if self is RecordState.AVAILABLE and target is not RecordState.ACQUIRED:
            raise IllegalStateTransition(f"AVAILABLE can only become ACQUIRED, not {target.name}")


class IllegalStateTransition(RuntimeError):
    pass


class AcknowledgeType(enum.IntEnum):
    """Wire values of ShareFetch/ShareAcknowledge acknowledge types (KIP-932)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class DeliveryCountOps(enum.Enum):
    INCREASE = 1
    DECREASE = -1
    NONE = 0


NO_MEMBER = ""


@dataclass(slots=True)
class InFlightState:
    state: RecordState
    delivery_count: int
    member_id: str = NO_MEMBER
    lock_id: int | None = None  # the acquisition lock holding it (see SharePartition)
    rollback: tuple[RecordState, int, str, int | None] | None = None

    @property
    def in_transition(self) -> bool:
        return self.rollback is not None

    def try_update(self, target: RecordState, ops: DeliveryCountOps, max_delivery_count: int, member_id: str) -> bool:
        """Kafka's tryUpdateState: a release past the delivery limit archives instead."""
        if target is RecordState.AVAILABLE and ops is not DeliveryCountOps.DECREASE and self.delivery_count >= max_delivery_count:
            target = RecordState.ARCHIVED
        try:
            self.state.validate_transition(target)
        except IllegalStateTransition:
            return False
        if target is not RecordState.ARCHIVED:
            self.delivery_count += ops.value
        self.state = target
        self.member_id = member_id
        return True

    def archive(self) -> None:
        """Straight to ARCHIVED (the start offset moved past it): no transition, nothing to undo."""
        self.state = RecordState.ARCHIVED
        self.member_id = NO_MEMBER
        self.lock_id = None

    def start_transition(self, target: RecordState, ops: DeliveryCountOps, max_delivery_count: int, member_id: str) -> bool:
        saved = (self.state, self.delivery_count, self.member_id, self.lock_id)
        if not self.try_update(target, ops, max_delivery_count, member_id):
            return False
        self.rollback = saved
        return True

    def complete_transition(self, commit: bool) -> None:
        if self.rollback is None:
            return
        if not commit:
            self.state, self.delivery_count, self.member_id, self.lock_id = self.rollback
        elif self.state is not RecordState.ACQUIRED:
            self.lock_id = None  # acknowledged, released or archived: its lock is gone
        self.rollback = None

    def copy(self) -> "InFlightState":
        return InFlightState(self.state, self.delivery_count, self.member_id, self.lock_id, self.rollback)


@dataclass(slots=True)
class InFlightBatch:
    first_offset: int
    last_offset: int
    batch_state: InFlightState | None
    offset_state: dict[int, InFlightState] | None = field(default=None)

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    def states(self) -> list[tuple[int, int, InFlightState]]:
        """(first, last, state) runs of this batch: one for a whole batch, one per offset once split."""
        if self.offset_state is None:
            assert self.batch_state is not None
            return [(self.first_offset, self.last_offset, self.batch_state)]
        return [(offset, offset, state) for offset, state in self.offset_state.items()]

    def split(self) -> None:
        """Track each offset on its own from now on (Kafka's maybeInitializeOffsetStateUpdate)."""
        if self.offset_state is None:
            assert self.batch_state is not None
            self.offset_state = {o: self.batch_state.copy() for o in range(self.first_offset, self.last_offset + 1)}
            self.batch_state = None

    def is_terminal(self) -> bool:
        return all(state.state.terminal and not state.in_transition for _, _, state in self.states())

