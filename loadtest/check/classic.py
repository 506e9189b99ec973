"""Classic groups: deliveries a rebalance does not explain, committed offsets that went back.

A classic consumer reads a partition from the position it fetched (OffsetFetch) when it was
assigned the partition. A record delivered twice to a group is explained only by a rebalance
whose previous owner had not committed past it: the re-reader's start position is at or below
the record, and no commit past it had been acknowledged when the re-reader asked for its
position. Anything else (a second delivery after one position, a delivery below the reader's own
start, a position older than an acknowledged commit) is a duplicate nobody can explain.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from loadtest.check.rundata import RunData
from loadtest.check.verdict import FAIL, NA, PASS, Verdict, evidence

Row = dict[str, Any]


def _positions(run: RunData) -> dict[tuple[str, str, int], list[Row]]:
    by: dict[tuple[str, str, int], list[Row]] = defaultdict(list)
    for row in run.kind("position"):
        by[(row["member"], row["topic"], row["partition"])].append(row)
    return by


def _commits(run: RunData) -> dict[tuple[str, str, int], list[Row]]:
    """Successful commits per (group, topic, partition), by response time."""
    by: dict[tuple[str, str, int], list[Row]] = defaultdict(list)
    for row in run.kind("commit"):
        if row.get("error") == "NONE":
            by[(row["group"], row["topic"], row["partition"])].append(row)
    return by


def _latest_before(rows: list[Row], time_us: int) -> Row | None:
    times = [r["time"] for r in rows]
    i = bisect.bisect_right(times, time_us)
    return rows[i - 1] if i else None


def duplicate(run: RunData) -> Verdict:
    title = "no classic record delivered twice unless a rebalance came before its commit"
    deliveries = [r for r in run.kind("delivery") if r["role"] == "classic"]
    if not deliveries:
        return Verdict("duplicate", title, NA, "no classic group received records")
    by_record: dict[tuple[str, str, int, int], list[Row]] = defaultdict(list)
    for row in deliveries:
        by_record[(row["group"], row["topic"], row["partition"], row["offset"])].append(row)
    positions = _positions(run)
    commits = _commits(run)
    shown: list[Row] = []
    repeated = violations = 0
    for (group, topic, partition, offset), rows in by_record.items():
        for first, second in zip(rows, rows[1:]):
            repeated += 1
            why, extra = _unexplained(first, second, offset, positions, commits.get((group, topic, partition), []))
            if why is None:
                continue
            violations += 1
            if len(shown) < 50:
                shown += evidence(first, second, *extra, note=why)
    if violations:
        return Verdict("duplicate", title, FAIL, f"{violations:,} of {repeated:,} repeated deliveries are not explained "
                       f"by a rebalance before a commit", len(deliveries), violations, shown)
    return Verdict("duplicate", title, PASS, f"{len(deliveries):,} classic deliveries; {repeated:,} repeated, each "
                   f"after a rebalance that came before its commit", len(deliveries))


def _unexplained(first: Row, second: Row, offset: int, positions: dict, commits: list[Row]) -> tuple[str | None, list[Row]]:
    mine = positions.get((second["member"], second["topic"], second["partition"]), [])
    start = _latest_before(mine, second["time"])
    if start is None:
        return "delivered without a start position", []
    if start["offset"] > offset:
        return f"delivered below the member's own start position {start['offset']}", [start]
    if first["member"] == second["member"] and first["generation"] == second["generation"]:
        earlier = _latest_before(mine, first["time"])
        if earlier is start:
            return "delivered twice to one member in one generation from one start position", [start]
    covering = [c for c in commits if c["offset"] > offset and c["time"] < start["request_time"]]
    if covering:
        return "a commit past the record was acknowledged before the re-reader asked where to start", [start, covering[0]]
    return None, []


def nonmonotonic_commit(run: RunData) -> Verdict:
    title = "committed offsets never moved backwards"
    commits = _commits(run)
    if not commits:
        return Verdict("nonmonotonic-commit", title, NA, "no offset was committed")
    shown: list[Row] = []
    checked = violations = 0
    for key, rows in commits.items():
        highest: Row | None = None
        for row in rows:
            checked += 1
            if highest is not None and row["offset"] < highest["offset"]:
                violations += 1
                if len(shown) < 50:
                    shown += evidence(highest, row, note="a later acknowledged commit went back")
            if highest is None or row["offset"] >= highest["offset"]:
                highest = row
    for row in run.kind("position"):
        if (row.get("detail") or {}).get("source") != "committed":
            continue
        checked += 1
        before = [c for c in commits.get((row["group"], row["topic"], row["partition"]), [])
                  if c["time"] < row["request_time"]]
        best = max(before, key=lambda c: c["offset"], default=None)
        if best is not None and row["offset"] < best["offset"]:
            violations += 1
            if len(shown) < 50:
                shown += evidence(best, row, note="the committed offset read back is older than one acknowledged before")
    if violations:
        return Verdict("nonmonotonic-commit", title, FAIL, f"{violations:,} commits or positions went back",
                       checked, violations, shown)
    return Verdict("nonmonotonic-commit", title, PASS,
                   f"{sum(len(r) for r in commits.values()):,} acknowledged commits and every start position read back "
                   f"are monotonic", checked)
