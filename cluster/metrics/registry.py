"""One process's counters and histograms: plain dict and list adds on the hot path.

Every actor is a process of its own (Ray), and its asyncio loop is its only writer, so there is no
lock: a scrape asks the actor for `snapshot()`, which copies the numbers into plain lists that
pickle cheaply. Gauges are not kept here: they are state (how many groups, records in flight),
computed by the actor from its objects when a snapshot is asked for, and passed in.

Labels are a tuple of (name, value) pairs, so that a caller on the hot path builds its key once.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

Labels = tuple[tuple[str, str], ...]

# Milliseconds: a heartbeat answers in about one, a parked JoinGroup or a long-poll fetch in seconds.
LATENCY_BUCKETS_MS: tuple[float, ...] = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class Histogram:
    """Counts per bucket (not cumulative: Prometheus' cumulative counts are built at scrape time)."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1


class Registry:
    def __init__(self) -> None:
        self.counters: dict[tuple[str, Labels], float] = {}
        self.histograms: dict[tuple[str, Labels], Histogram] = {}

    def inc(self, name: str, labels: Labels = (), amount: float = 1) -> None:
        key = (name, labels)
        counters = self.counters
        counters[key] = counters.get(key, 0) + amount

    def observe(self, name: str, value: float, labels: Labels = (), bounds: tuple[float, ...] = LATENCY_BUCKETS_MS) -> None:
        self.histogram(name, labels, bounds).observe(value)

    def histogram(self, name: str, labels: Labels = (), bounds: tuple[float, ...] = LATENCY_BUCKETS_MS) -> Histogram:
        """The histogram itself, for a hot path that keeps it rather than look it up each time."""
        key = (name, labels)
        histogram = self.histograms.get(key)
        if histogram is None:
            histogram = self.histograms[key] = Histogram(bounds)
        return histogram

    def snapshot(self, gauges: list[tuple[str, dict[str, str], float]] | None = None) -> dict[str, Any]:
        """The numbers now, as plain lists and dicts (msgpack- and pickle-friendly)."""
        return {
            "counters": [(name, dict(labels), value) for (name, labels), value in self.counters.items()],
            "histograms": [
                (name, dict(labels), list(h.bounds), list(h.counts), h.sum, h.count)
                for (name, labels), h in self.histograms.items()
            ],
            "gauges": list(gauges or ()),
        }


# This process's registry: every actor of the process records into it.
REGISTRY = Registry()


# Ray actor classes (@ray.remote) are pickled by value, and with them the globals their own methods
# name: REGISTRY named there would be a copy. Their methods call these functions instead, which
# are pickled by reference and so reach the process's one registry.
def inc(name: str, labels: Labels = (), amount: float = 1) -> None:
    REGISTRY.inc(name, labels, amount)


def snapshot(gauges: list[tuple[str, dict[str, str], float]] | None = None) -> dict[str, Any]:
    return REGISTRY.snapshot(gauges)


def observe(name: str, value: float, labels: Labels = ()) -> None:
    REGISTRY.observe(name, value, labels)
