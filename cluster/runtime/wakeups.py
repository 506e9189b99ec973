"""Time for the runtime: the wall clock, and when a timer's callback runs (the event loop in
production, a ManualClock a test or the simulation advances by hand)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from kernel.clock import ManualClock
from kernel.timer import ManualTimer, TimerOperation


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class Wakeups(Protocol):
    """When to run a timer's expiry: real time in production, a ManualClock in tests."""

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> Any: ...  # returns a handle with cancel()


class LoopWakeups:
    def __init__(self, clock: Any) -> None:
        self._clock = clock

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        delay = max(0, deadline_ms - self._clock.now_ms()) / 1000
        return asyncio.get_running_loop().call_later(delay, callback)


class ManualWakeups:
    """Fires due callbacks only when a test advances the ManualClock (in deadline order)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._timer = ManualTimer(clock)
        self._ids = itertools.count()

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> "_ManualHandle":
        key = next(self._ids)
        self._timer.schedule(key, deadline_ms - self.clock.now_ms(), callback)
        return _ManualHandle(self._timer, key)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        while (due := self._timer.pop_expired()) is not None:
            due[1]()


@dataclass(slots=True)
class _ManualHandle:
    timer: ManualTimer
    key: int

    def cancel(self) -> None:
        self.timer.cancel(self.key)


class WakeupTimer:
    """A domain Timer over Wakeups: when a key's deadline passes, `on_expiry(operation)` runs
    (share partitions use it; coordinator shards get their timers through the runtime)."""

    def __init__(self, clock: Any, wakeups: Wakeups, on_expiry: Callable[[TimerOperation], None]) -> None:
        self._clock = clock
        self._wakeups = wakeups
        self._on_expiry = on_expiry
        self._handles: dict[Hashable, Any] = {}
        self._armed_at: dict[Hashable, int] = {}  # when each key was armed: a lock's age (metrics)

    def schedule(self, key: Hashable, delay_ms: int, operation: TimerOperation) -> None:
        self.cancel(key)
        now = self._clock.now_ms()
        deadline = now + max(0, delay_ms)
        self._handles[key] = self._wakeups.call_at(deadline, lambda: self._fire(key, operation))
        self._armed_at[key] = now

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()
            del self._armed_at[key]

    def armed_at(self, key: Hashable) -> int | None:
        """When the timer of `key` was armed (clock ms), if it still is."""
        return self._armed_at.get(key)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        self._armed_at.clear()

    def _fire(self, key: Hashable, operation: TimerOperation) -> None:
        self._handles.pop(key, None)
        self._armed_at.pop(key, None)
        self._on_expiry(operation)
