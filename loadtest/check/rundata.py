"""A run directory read once: the event log split by kind, the run's settings, the coordinator records.

A run holds up to a million event rows, most of them deliveries and request/response pairs.
pyarrow reads the log once, keeps per kind only the columns docs/experiments.md says the kind
sets, turns the timestamps into int64 microseconds (integers compare fast in Python and in
Arrow) and sorts each kind by time. The invariants filter and join these tables in Arrow and
turn into Python rows only what they must look at one by one (`rows(kind)` for the small kinds,
a filtered table's `to_pylist()` for the big ones).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from loadtest.check.leadership import LeaderChange
from loadtest.check.runinfo import RunInfo, load_info
from loadtest.experiment import rundir
from loadtest.experiment.eventlog import SCHEMA, read_events
from loadtest.experiment.rundir import RunDirError

Row = dict[str, Any]
T = TypeVar("T")
_BASE = ("time", "kind")
# The columns each kind sets (docs/experiments.md, "Event kinds"); request/response are not checked.
KIND_COLUMNS: dict[str, tuple[str, ...]] = {
    "delivery": ("role", "member", "group", "topic", "partition", "offset", "generation", "request_time",
                 "delivery_count", "leader_epoch"),
    "ack": ("member", "group", "topic", "partition", "offset", "ack_type", "error", "request_time", "delivery_count"),
    "commit": ("member", "group", "generation", "topic", "partition", "offset", "error", "request_time"),
    "position": ("member", "group", "generation", "topic", "partition", "offset", "request_time", "detail"),
    "rebalance_start": ("member", "member_id", "group", "generation", "detail"),
    "rebalance_end": ("member", "member_id", "group", "generation", "detail"),
    "assignment": ("role", "member", "member_id", "group", "generation", "detail"),
    "fenced": ("member", "member_id", "group", "generation", "error"),
    "produce": ("member", "topic", "partition", "offset", "key", "request_time"),
    "member_start": ("role", "member", "group"),
    "member_stop": ("role", "member", "group"),
    "group_state": ("role", "group", "state", "generation", "request_time", "error", "detail"),
    "fault": ("fault_id", "target", "detail"),
    "fault_end": ("fault_id", "target"),
    "recovery": ("fault_id", "target", "latency_ms"),
    "end_offset": ("topic", "partition", "offset"),
    "drained": ("role", "group", "topic", "partition", "offset", "state"),
    "phase": ("state",),
}
_TIME_US = {"time", "request_time"}


@dataclass(slots=True)
class RunData:
    run_dir: Path
    info: RunInfo
    events: dict[str, pa.Table]  # kind -> its rows, by time; times as int64 microseconds
    share_state: pa.Table | None  # records/share_group_state.parquet (None: missing or unreadable)
    share_final: pa.Table | None  # records/share_state_final.parquet
    # leadership.parquet: the leadership changes the cluster made, by time (None: not recorded, an
    # older run or an older cluster; the checks then reason from the fault schedule)
    leadership: list[LeaderChange] | None = None
    notes: list[str] = field(default_factory=list)  # what was missing, for the summaries
    _rows: dict[str, list[Row]] = field(default_factory=dict)
    _derived: dict[str, Any] = field(default_factory=dict)

    def table(self, kind: str) -> pa.Table:
        found = self.events.get(kind)
        return found if found is not None else _empty(kind)

    def rows(self, kind: str) -> list[Row]:
        """The kind's rows as dicts (detail parsed), by time; for the kinds with few rows."""
        if kind not in self._rows:
            rows = self.table(kind).to_pylist()
            if "detail" in KIND_COLUMNS[kind]:
                for row in rows:
                    row["detail"] = _detail(row["detail"])
            self._rows[kind] = rows
        return self._rows[kind]

    def derived(self, name: str, build: Callable[[], T]) -> T:
        """What several invariants derive alike (e.g. the share records delivered twice), built once."""
        if name not in self._derived:
            self._derived[name] = build()
        return self._derived[name]

    def end_offsets(self) -> dict[tuple[str, int], int]:
        return {(r["topic"], r["partition"]): r["offset"] for r in self.rows("end_offset")}


def load_run(run_dir: Path) -> RunData:
    """Read RUN_DIR; RunDirError names what is missing or unreadable when it cannot be judged."""
    run_dir = rundir.require_run_dir(Path(run_dir))
    info = load_info(run_dir)
    try:
        table = read_events(run_dir)
    except (pa.ArrowException, OSError) as exc:
        raise RunDirError(f"{run_dir / rundir.EVENTS}: the event log is unreadable ({exc})") from None
    if table.num_rows == 0:
        raise RunDirError(f"{run_dir / rundir.EVENTS}: the event log holds no events")
    notes: list[str] = []
    share_state = _records(run_dir, rundir.SHARE_STATE_RECORDS, notes)
    share_final = _records(run_dir, rundir.SHARE_STATE_FINAL, notes)
    if not info.share_groups:
        notes = []  # the records matter to share groups only
    leadership = read_leadership(run_dir / rundir.LEADERSHIP)
    return RunData(run_dir, info, split_by_kind(table), share_state, share_final, leadership, notes)


def read_leadership(path: Path) -> list[LeaderChange] | None:
    """The recorded leadership changes, times as int64 microseconds like the event rows."""
    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError):
        return None
    for name in ("time", "released", "loaded"):
        table = table.set_column(table.schema.get_field_index(name), name, pc.cast(table[name], pa.int64()))
    return sorted((LeaderChange(**row) for row in table.to_pylist()), key=lambda c: c.time)


def split_by_kind(table: pa.Table) -> dict[str, pa.Table]:
    for name in _TIME_US:
        table = table.set_column(table.schema.get_field_index(name), name, pc.cast(table[name], pa.int64()))
    kinds = table["kind"]
    out = {}
    for kind, columns in KIND_COLUMNS.items():
        mask = pc.equal(kinds, kind)
        if not pc.any(mask).as_py():
            continue
        subset = table.select([*_BASE, *columns]).filter(mask)  # narrow first: filtering copies
        out[kind] = subset if _sorted(subset["time"]) else subset.sort_by("time")
    return out


def _sorted(times: pa.ChunkedArray) -> bool:
    # sort_by is stable (rows of one instant keep the order they were observed in), but most
    # kinds arrive in order already and need no sort at all.
    values = times.combine_chunks()
    return len(values) < 2 or pc.all(pc.greater_equal(values[1:], values[:-1])).as_py()


def _empty(kind: str) -> pa.Table:
    fields = [SCHEMA.field(c) for c in (*_BASE, *KIND_COLUMNS[kind])]
    return pa.schema([pa.field(f.name, pa.int64()) if f.name in _TIME_US else f for f in fields]).empty_table()


def _detail(text: str | None) -> Any:
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return {"text": text}


def _records(run_dir: Path, name: str, notes: list[str]) -> pa.Table | None:
    """An optional records file: missing or unreadable is not an error; the affected check says so."""
    path = run_dir / name
    problem = None
    table = None
    if not path.is_file():
        problem = f"{name} missing"
    else:
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            problem = f"{name} unreadable ({exc})"
    if problem:
        notes.append(problem)
    return table
