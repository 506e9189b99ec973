"""A partition's armed timers: a shard's `Schedule`/`Cancel` values, applied once their batch is
durable, each expiry handed back to the runtime to run as an operation.

Every arming gets a new sequence number. An expiry carries the number it was armed with, so one
whose key was re-armed or cancelled while it waited in the queue is recognised and skipped, as
Kafka's timer event checks it is still the key's timer.

Every heartbeat re-arms its member's session timer, so arming must be cheap: a deadline goes into
the key's entry and a heap, and the partition keeps one wakeup, at its earliest deadline. A
re-arming or a cancellation leaves the old heap entry behind (recognised by its sequence number
when it comes up), rather than cancelling and creating an event-loop handle per heartbeat.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from kernel.timer import Schedule, ShardCall, TimerChange

from cluster.runtime.wakeups import Wakeups

# Kafka's coordinator retries a timer operation whose write failed after this back-off.
TIMER_RETRY_BACKOFF_MS = 500
# Stale heap entries are dropped in one pass once they outnumber half the live ones by this much:
# each holds its key and two ints (about 190 bytes), so at one stale per live timer they were a
# sixth of an idle member's memory; a pass every live/2 armings still costs O(1) per arming.
_STALE_SLACK = 1024

Fired = tuple[Hashable, int]  # (key, arming) of the timer whose expiry an operation is


@dataclass(slots=True)
class Armed:
    seq: int
    operation: ShardCall
    deadline: int
    due: bool = False  # handed to the runtime; no longer in the heap


class TimerTable(dict[Hashable, Armed]):
    """The timers armed now, by key (a dict, so a test can look at it)."""

    def __init__(self, wakeups: Wakeups, on_due: Callable[[Hashable, int], None]) -> None:
        super().__init__()
        self._wakeups = wakeups
        self._on_due = on_due
        self._armings = itertools.count(1)
        self._heap: list[tuple[int, int, Hashable]] = []  # (deadline, seq, key), stale ones included
        self._wakeup: Any = None
        self._wakeup_at: int | None = None

    def apply(self, changes: Iterable[TimerChange], now: int) -> None:
        for change in changes:
            if isinstance(change, Schedule):
                if change.if_absent and change.key in self:
                    continue
                self.arm(change.key, change.delay_ms, change.operation, now)
            else:
                self.cancel(change.key)

    def arm(self, key: Hashable, delay_ms: int, operation: ShardCall, now: int) -> None:
        seq = next(self._armings)
        deadline = now + max(0, delay_ms)
        self[key] = Armed(seq, operation, deadline)
        heapq.heappush(self._heap, (deadline, seq, key))
        if len(self._heap) > len(self) + len(self) // 2 + _STALE_SLACK:
            self._drop_stale()
        if self._wakeup_at is None or deadline < self._wakeup_at:
            self._wake_at(deadline)

    def cancel(self, key: Hashable) -> None:
        self.pop(key, None)

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
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup = self._wakeup_at = None
        self._heap.clear()
        self.clear()

    def _live(self, seq: int, key: Hashable) -> bool:
        armed = self.get(key)
        return armed is not None and armed.seq == seq

    def _wake_at(self, deadline: int) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup_at = deadline
        self._wakeup = self._wakeups.call_at(deadline, self._fire)

    def _fire(self) -> None:
        # Everything due by the deadline this wakeup was set for, in deadline order; the wakeup for
        # the next deadline is set before the callbacks run, so one that arms a timer finds it.
        due_by = self._wakeup_at
        self._wakeup = self._wakeup_at = None
        heap = self._heap
        due: list[Fired] = []
        while heap and due_by is not None and heap[0][0] <= due_by:
            _deadline, seq, key = heapq.heappop(heap)
            if self._live(seq, key):
                self[key].due = True
                due.append((key, seq))
        while heap and not self._live(heap[0][1], heap[0][2]):
            heapq.heappop(heap)
        if heap:
            self._wake_at(heap[0][0])
        for key, seq in due:
            self._on_due(key, seq)

    def _drop_stale(self) -> None:
        self._heap = [(a.deadline, a.seq, key) for key, a in self.items() if not a.due]
        heapq.heapify(self._heap)
