"""Time as the domain sees it: an injected clock, so tests move time by hand.

The domain (coordinator/, sharestate/) never reads the wall clock; cluster/ passes a clock that
does, tests pass a ManualClock and advance it exactly to a session, rebalance or lock deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


@dataclass(slots=True)
class ManualClock:
    """A clock that moves only when told to."""

    now: int = 0

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("time does not run backwards")
        self.now += ms
        return self.now
