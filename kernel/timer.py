"""Timers whose expiry is an operation like any other (Kafka's CoordinatorTimer), as values.

An operation does not arm a timer: it returns `Schedule(key, delay_ms, operation)` or `Cancel(key)`
in its Result, and the runtime applies them once the operation's records are durable (never for a
failed write). The operation is a value too, `ShardCall` (a shard method's name and arguments), not
a closure over a shard object: it runs on whatever state the partition holds when it falls due.
Scheduling a key again replaces the earlier timer, so "reset this member's session deadline" is
one Schedule. An expired operation must re-check the state it acts on: that may have moved on.

Share partitions (sharestate/partition.py) hand out their acquisition locks the same way: their
pending `Schedule` values, which their host arms with `arm`. `ManualTimer` keeps timers by hand for
tests and simulations; `apply` feeds it a Result's timer changes.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernel.clock import ManualClock

TimerOperation = Callable[[], Any]  # returns a coordinator Result


@dataclass(frozen=True, slots=True)
class ShardCall:
    """A shard operation as a value: `shard.<method>(*args)`, returning a Result."""

    method: str
    args: tuple[Any, ...] = ()

    def __call__(self, shard: Any) -> Any:
        return getattr(shard, self.method)(*self.args)


@dataclass(frozen=True, slots=True)
class Schedule:
    key: Hashable
    delay_ms: int
    operation: ShardCall
    # Kafka's schedule(..., overwrite=false): leave a timer already armed under the key as it is
    # (a deadline that repeated requests must not push back, like a classic member's join timeout).
    if_absent: bool = False


@dataclass(frozen=True, slots=True)
class Cancel:
    key: Hashable


TimerChange = Schedule | Cancel


class Timer(Protocol):
    def schedule(self, key: Hashable, delay_ms: int, operation: TimerOperation) -> None: ...
    def cancel(self, key: Hashable) -> None: ...
    def is_scheduled(self, key: Hashable) -> bool: ...


def arm(timer: Timer, changes: Iterable[TimerChange], target: Any) -> None:
    """Apply timer changes to a Timer: a Schedule's operation will run on `target` when it expires."""
    for change in changes:
        if isinstance(change, Schedule):
            if change.if_absent and timer.is_scheduled(change.key):
                continue
            timer.schedule(change.key, change.delay_ms, functools.partial(change.operation, target))
        else:
            timer.cancel(change.key)


@dataclass(slots=True)
class _Entry:
    deadline: int
    seq: int
    key: Hashable
    operation: TimerOperation
    cancelled: bool = False


@dataclass(slots=True)
class ManualTimer:
    """Deterministic timer for tests and simulations: fires only from `expired()`."""

    clock: ManualClock
    _heap: list[tuple[int, int, _Entry]] = field(default_factory=list)
    _live: dict[Hashable, _Entry] = field(default_factory=dict)
    _seq: itertools.count = field(default_factory=itertools.count)

    def schedule(self, key: Hashable, delay_ms: int, operation: TimerOperation) -> None:
        self.cancel(key)
        entry = _Entry(self.clock.now_ms() + max(0, delay_ms), next(self._seq), key, operation)
        self._live[key] = entry
        heapq.heappush(self._heap, (entry.deadline, entry.seq, entry))

    def cancel(self, key: Hashable) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            entry.cancelled = True

    def apply(self, changes: Iterable[TimerChange], shard: Any) -> None:
        """Arm a Result's timer changes; a Schedule's operation will run on `shard`."""
        arm(self, changes, shard)

    def cancel_all(self) -> None:
        for entry in self._live.values():
            entry.cancelled = True
        self._live.clear()
        self._heap.clear()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return entry.deadline if entry else None

    def next_deadline(self) -> int | None:
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self) -> tuple[Hashable, TimerOperation] | None:
        """The earliest due timer (deadline, then scheduling order), removed; None if none is due."""
        self._drop_cancelled()
        if not self._heap or self._heap[0][0] > self.clock.now_ms():
            return None
        _, _, entry = heapq.heappop(self._heap)
        del self._live[entry.key]
        return entry.key, entry.operation

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)

    @property
    def keys(self) -> set[Hashable]:
        return set(self._live)
