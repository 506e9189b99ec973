"""A partition's armed timers: a shard's `Schedule`/`Cancel` values, applied once their batch is
durable, each expiry handed back to the runtime to run as an operation.

Every arming gets a new sequence number. An expiry carries the number it was armed with, so one
whose key was re-armed or cancelled while it waited in the queue is recognised and skipped, as
Kafka's timer event checks it is still the key's timer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from kernel.timer import Schedule, ShardCall, TimerChange

from cluster.runtime.wakeups import Wakeups

# Kafka's coordinator retries a timer operation whose write failed after this back-off.
TIMER_RETRY_BACKOFF_MS = 500

Fired = tuple[Hashable, int]  # (key, arming) of the timer whose expiry an operation is


@dataclass(slots=True)
class Armed:
    seq: int
    operation: ShardCall
    handle: Any


class TimerTable(dict[Hashable, Armed]):
    """The timers armed now, by key (a dict, so a test can look at it)."""

    def __init__(self, wakeups: Wakeups, on_due: Callable[[Hashable, int], None]) -> None:
        super().__init__()
        self._wakeups = wakeups
        self._on_due = on_due
        self._armings = itertools.count(1)

    def apply(self, changes: Iterable[TimerChange], now: int) -> None:
        for change in changes:
            if isinstance(change, Schedule):
                self.arm(change.key, change.delay_ms, change.operation, now)
            else:
                self.cancel(change.key)

    def arm(self, key: Hashable, delay_ms: int, operation: ShardCall, now: int) -> None:
        self.cancel(key)
        seq = next(self._armings)
        handle = self._wakeups.call_at(now + max(0, delay_ms), lambda: self._on_due(key, seq))
        self[key] = Armed(seq, operation, handle)

    def cancel(self, key: Hashable) -> None:
        armed = self.pop(key, None)
        if armed is not None:
            armed.handle.cancel()

    def is_armed(self, key: Hashable, seq: int) -> bool:
        armed = self.get(key)
        return armed is not None and armed.seq == seq

    def expired(self, fired: Iterable[Fired]) -> None:
        """These expiries ran and their batch is durable: the keys are free (unless re-armed)."""
        for key, seq in fired:
            if self.is_armed(key, seq):
                del self[key]

    def retry(self, fired: Iterable[Fired], now: int) -> None:
        """These expiries were in a batch whose write failed: they run again after a back-off."""
        for key, seq in fired:
            armed = self.get(key)
            if armed is not None and armed.seq == seq:
                self.arm(key, TIMER_RETRY_BACKOFF_MS, armed.operation, now)

    def cancel_all(self) -> None:
        for armed in self.values():
            armed.handle.cancel()
        self.clear()
