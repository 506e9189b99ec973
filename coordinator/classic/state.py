"""The classic group state machine (seed 000 §2).

    Empty               -> PreparingRebalance          (a member joins)
    PreparingRebalance  -> CompletingRebalance | Empty (join phase completes, with or without members)
    CompletingRebalance -> Stable | PreparingRebalance (leader's SyncGroup; or a join, leave or expiry)
    Stable              -> PreparingRebalance          (a join, leave or session expiry)
    any                 -> Dead                        (the group is deleted or its offsets expire)
"""

from __future__ import annotations

import enum

from kernel.lifecycle import IllegalTransition, validate_transition


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def validate_transition(self, target: "ClassicGroupState") -> None:
        """Raise, changing nothing, unless self -> target is legal."""
        validate_transition(_VALID_PREVIOUS, self, target, "classic group")


_S = ClassicGroupState
_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
}

__all__ = ["ClassicGroupState", "IllegalTransition"]
