"""The run's faults, from its `fault` and `fault_end` rows: what every plot marks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from loadtest.report.facts import TimeAxis


@dataclass(frozen=True)
class Fault:
    fault_id: int
    start: float  # epoch seconds of the `fault` row
    end: float | None  # of its `fault_end` row, if any
    action: str
    target: str
    groups: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"F{self.fault_id} {self.action}"

    @property
    def settled(self) -> float:
        """When the fault is over as far as recovery is measured: its end, else its start."""
        return self.end if self.end is not None else self.start


@dataclass(frozen=True)
class FaultMark:
    """A fault on a plot's time axis (seconds since the first event)."""

    label: str
    start_s: float
    end_s: float | None


def parse_faults(rows: list[Any]) -> list[Fault]:
    """Rows of (kind, fault_id, ts, target, detail), ordered by time."""
    starts: dict[int, Any] = {}
    ends: dict[int, float] = {}
    for row in rows:
        if row["fault_id"] is None:
            continue
        if row["kind"] == "fault":
            starts.setdefault(row["fault_id"], row)
        elif row["kind"] == "fault_end":
            ends.setdefault(row["fault_id"], row["ts"])
    faults = []
    for fault_id, row in sorted(starts.items()):
        detail = _detail(row["detail"])
        faults.append(
            Fault(
                fault_id=fault_id,
                start=row["ts"],
                end=ends.get(fault_id),
                action=str(detail.get("action") or "fault"),
                target=str(row["target"] or detail.get("selector") or ""),
                groups=[str(g) for g in detail.get("groups") or []],
                partitions=[str(p) for p in detail.get("partitions") or []],
            )
        )
    return faults


def marks(faults: list[Fault], axis: TimeAxis) -> list[FaultMark]:
    return [FaultMark(f.label, f.start - axis.t0, None if f.end is None else f.end - axis.t0) for f in faults]


def fault_rows(faults: list[Fault], axis: TimeAxis) -> list[tuple[Any, ...]]:
    """The `faults` table's rows (FAULTS_SCHEMA)."""
    return [
        (
            f.fault_id,
            f.action,
            f.target,
            f.start - axis.t0,
            None if f.end is None else f.end - axis.t0,
            None if f.end is None else f.end - f.start,
            ",".join(f.groups),
            ",".join(f.partitions),
        )
        for f in faults
    ]


FAULTS_SCHEMA = (
    "fault_id INT, action STRING, target STRING, start_s DOUBLE, end_s DOUBLE, duration_s DOUBLE, "
    "groups STRING, partitions STRING"
)


def _detail(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
