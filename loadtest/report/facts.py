"""What the report needs to know about a run besides its events: run.json, and the time axis."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

# Kafka's defaults, used when run.json does not name the settings.
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_LOCK_DURATION_MS = 30_000.0
# At most this many time buckets per plot: enough to see a fault, few enough to plot quickly.
MAX_BUCKETS = 600
_BUCKET_SIZES_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600)


@dataclass(frozen=True)
class RunFacts:
    """run.json, read leniently: a report of a run cut short should still show what it can."""

    run_dir: Path
    info: dict[str, Any]

    @property
    def scenario(self) -> dict[str, Any]:
        return self.info.get("scenario") or {}

    @property
    def name(self) -> str:
        return str(self.scenario.get("name") or self.run_dir.name)

    @property
    def status(self) -> str:
        return str(self.info.get("status") or "unknown")

    @property
    def cluster(self) -> dict[str, Any]:
        return self.info.get("cluster") or {}

    @property
    def bootstrap(self) -> str:
        return str(self.cluster.get("bootstrap") or "?")

    @property
    def settings(self) -> dict[str, Any]:
        return self.cluster.get("settings") or {}

    @property
    def delivery_count_limit(self) -> int:
        return int(self.settings.get("group.share.delivery.count.limit", DEFAULT_DELIVERY_COUNT_LIMIT))

    @property
    def lock_duration_ms(self) -> float:
        return float(self.settings.get("group.share.record.lock.duration.ms", DEFAULT_LOCK_DURATION_MS))

    @property
    def stable_within_s(self) -> float | None:
        value = (self.scenario.get("checks") or {}).get("stable_within_s")
        return None if value is None else float(value)

    def groups(self, kind: str) -> dict[str, list[str]]:
        """Group name -> topics, for kind `classic` or `share`, as run.json lists them."""
        return {str(g): [str(t) for t in topics] for g, topics in ((self.info.get("groups") or {}).get(kind) or {}).items()}

    @property
    def topics(self) -> list[dict[str, Any]]:
        return list(self.info.get("topics") or [])

    @property
    def notes(self) -> list[str]:
        return [str(n) for n in self.info.get("notes") or []]

    def time(self, key: str) -> datetime | None:
        value = self.info.get(key)
        try:
            return datetime.fromisoformat(value) if value else None
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class TimeAxis:
    """Seconds since the first event; events are counted in buckets of `bucket_s` seconds."""

    t0: float  # epoch seconds of the first event
    end: float  # epoch seconds of the last event
    bucket_s: float

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end - self.t0)

    @property
    def buckets(self) -> int:
        return int(self.duration_s // self.bucket_s) + 1

    def rel(self, epoch_s: float | None) -> float | None:
        return None if epoch_s is None else epoch_s - self.t0


def time_axis(first: float, last: float) -> TimeAxis:
    """1-second buckets, or coarser ones for long runs so a plot has at most MAX_BUCKETS points."""
    duration = max(0.0, last - first)
    size = next((s for s in _BUCKET_SIZES_S if math.ceil(duration / s) <= MAX_BUCKETS), _BUCKET_SIZES_S[-1])
    return TimeAxis(first, last, float(size))
