"""Lifecycles as enums with transition tables: one way to say which state may follow which.

A table maps each target state to the states it may be entered from (Kafka writes its group
states the same way: `validPreviousStates`). `validate_transition` raises, changing nothing,
unless the move is in the table; every lifecycle in raygroups (classic and share groups, share
partitions, runtime partitions, cluster actors) checks its moves through it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

E = TypeVar("E", bound=enum.Enum)

TransitionTable = Mapping[E, frozenset[E]]  # target -> the states it may follow


class IllegalTransition(RuntimeError):
    pass


def validate_transition(table: TransitionTable, current: E, target: E, what: str, *, stay: bool = False) -> None:
    """Raise IllegalTransition unless current -> target is in table (or is staying put, when `stay`)."""
    if stay and target is current:
        return
    if current not in table.get(target, frozenset()):
        raise IllegalTransition(f"{what} cannot go from {_name(current)} to {_name(target)}")


def _name(state: enum.Enum) -> str:
    return state.value if isinstance(state.value, str) else state.name
