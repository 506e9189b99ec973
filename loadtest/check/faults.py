"""The faults of a run as the checks need them: when each was over, whose leadership it moved
(from the cluster's recorded leadership changes where the run has them, loadtest/check/leadership.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtest.check.leadership import LeaderChange, by_partition
from loadtest.check.rundata import RunData
from loadtest.experiment.fault_kinds import MOVES_LEADERSHIP

Row = dict[str, Any]


def over_at(run: RunData) -> dict[int, int]:
    """fault id -> when it was over: its `fault_end` (a pause, a restart), else its injection."""
    ends = {f["fault_id"]: f["time"] for f in run.rows("fault")}
    for row in run.rows("fault_end"):
        ends[row["fault_id"]] = max(ends.get(row["fault_id"], row["time"]), row["time"])
    return ends


def recovered_at(run: RunData) -> dict[tuple[int, str], int]:
    """(fault id, target) -> when the target first worked again."""
    out: dict[tuple[int, str], int] = {}
    for row in run.rows("recovery"):
        out.setdefault((row["fault_id"], row["target"]), row["time"])
    return out


@dataclass(slots=True)
class Move:
    """A fault that moved a partition's leadership, and when the partition served again."""

    fault: Row
    recovered: int | None  # None: its recovery was never seen

    def straddles(self, first_asked: int, second_arrived: int) -> bool:
        """Injected before the second delivery arrived, and not over when the first was asked for:
        the two deliveries may come from the old and the new leader."""
        return self.fault["time"] <= second_arrived and (self.recovered is None or first_asked < self.recovered)


def leadership_moves(run: RunData) -> dict[str, list[Move | LeaderChange]]:
    """"topic-partition" -> when its leadership moved: the changes the cluster recorded, or, for a
    run without them (an older run directory or cluster), the faults that moved it."""
    if run.leadership is not None:
        return by_partition(run.leadership)  # type: ignore[return-value]
    recovered = recovered_at(run)
    out: dict[str, list[Move]] = {}
    for fault in run.rows("fault"):
        detail = fault["detail"]
        if detail.get("action") not in MOVES_LEADERSHIP:
            continue
        for tp in detail.get("partitions") or ():
            out.setdefault(tp, []).append(Move(fault, recovered.get((fault["fault_id"], tp))))
    return out
