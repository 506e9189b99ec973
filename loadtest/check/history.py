"""Per-partition histories of a classic group: its successful commits and its members' start positions.

Both invariants that judge classic groups ask "what had been committed, at most, before this
instant?" and "where did this member start reading this partition?"; bisecting time-sorted
lists answers each in O(log n), which keeps the checks linear in the run's size.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from loadtest.check.rundata import RunData

Row = dict[str, Any]
Partition = tuple[str, str, int]  # group, topic, partition


@dataclass(slots=True)
class Commits:
    """One partition's successful commits, by response time (a commit row's `time`)."""

    times: list[int] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    best: list[int] = field(default_factory=list)  # best[i]: index of the highest offset in rows[: i + 1]

    def add(self, row: Row) -> None:
        self.times.append(row["time"])
        self.rows.append(row)
        i = len(self.rows) - 1
        self.best.append(i if i == 0 or row["offset"] >= self.rows[self.best[-1]]["offset"] else self.best[-1])

    def highest_before(self, instant: int) -> Row | None:
        """The highest commit answered strictly before `instant`."""
        i = bisect.bisect_left(self.times, instant)
        return self.rows[self.best[i - 1]] if i else None


def successful_commits(run: RunData) -> dict[Partition, Commits]:
    out: dict[Partition, Commits] = defaultdict(Commits)
    for row in run.rows("commit"):  # by time
        if row["error"] == "NONE":
            out[(row["group"], row["topic"], row["partition"])].add(row)
    return out


@dataclass(slots=True)
class Positions:
    """One member's `position` rows for one partition, by time."""

    times: list[int] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def latest_at(self, instant: int) -> int:
        """Index of the latest position at or before `instant` (-1: none)."""
        return bisect.bisect_right(self.times, instant) - 1


def member_positions(run: RunData) -> dict[tuple[str, str, str, int], Positions]:
    """(group, member, topic, partition) -> its start positions."""
    out: dict[tuple[str, str, str, int], Positions] = defaultdict(Positions)
    for row in run.rows("position"):
        found = out[(row["group"], row["member"], row["topic"], row["partition"])]
        found.times.append(row["time"])
        found.rows.append(row)
    return out


def asked_at(row: Row) -> int:
    """When the request behind a row was sent (its own time where the log lacks it)."""
    return row["request_time"] if row.get("request_time") is not None else row["time"]
