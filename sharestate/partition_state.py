"""A share partition's lifecycle on its leader (Kafka's SharePartitionState), as a transition table.

    INITIALIZING --durable state read--> ACTIVE --a newer leader or state epoch--> FENCED
         |  \\--the read failed--> FAILED        \\--moved away, reloaded, evicted--> DROPPED
         \\--moved away while reading--> DROPPED

FAILED, FENCED and DROPPED are final: the leader forgets that copy, and the next fetch starts a
new one that reads the durable state again.
"""

from __future__ import annotations

import enum

from kernel.lifecycle import TransitionTable, validate_transition


class SharePartitionState(enum.Enum):
    INITIALIZING = "initializing"
    ACTIVE = "active"
    FAILED = "failed"
    FENCED = "fenced"
    DROPPED = "dropped"

    @property
    def final(self) -> bool:
        return self in _FINAL


_FINAL = frozenset({SharePartitionState.FAILED, SharePartitionState.FENCED, SharePartitionState.DROPPED})

S = SharePartitionState
TRANSITIONS: TransitionTable[SharePartitionState] = {
    S.ACTIVE: frozenset({S.INITIALIZING}),
    S.FAILED: frozenset({S.INITIALIZING}),
    S.FENCED: frozenset({S.ACTIVE}),
    S.DROPPED: frozenset({S.INITIALIZING, S.ACTIVE}),
}


def check_transition(current: SharePartitionState, target: SharePartitionState) -> None:
    validate_transition(TRANSITIONS, current, target, "a share partition")
