"""A run directory read once, into plain rows grouped by kind (times as integer microseconds).

pyarrow filters each kind out of the event log and hands Python only the columns the invariants
use, so a run of a million events loads in seconds.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from loadtest.experiment import rundir
from loadtest.experiment.eventlog import read_events

KINDS = ("delivery", "ack", "commit", "position", "produce", "rebalance_start", "fenced", "member_start",
         "member_stop", "group_state", "fault", "fault_end", "recovery", "end_offset", "drained")
_DROP = ("api", "broker", "correlation", "latency_ms", "bytes")  # request/response detail the invariants skip


@dataclass
class RunData:
    run_dir: Path
    info: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]]
    final_state: list[dict[str, Any]] | None  # records/share_state_final.parquet
    share_records: list[dict[str, Any]] | None  # records/share_group_state.parquet
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.info.get("status", "unknown")

    def kind(self, name: str) -> list[dict[str, Any]]:
        return self.rows.get(name, [])

    @property
    def classic_groups(self) -> dict[str, list[str]]:
        return self.info.get("groups", {}).get("classic", {})

    @property
    def share_groups(self) -> dict[str, list[str]]:
        return self.info.get("groups", {}).get("share", {})

    @property
    def delivery_count_limit(self) -> int:
        return int(self.info.get("cluster", {}).get("settings", {}).get("group.share.delivery.count.limit", 5))

    @property
    def stable_within_us(self) -> int:
        return int(float(self.info.get("scenario", {}).get("checks", {}).get("stable_within_s", 30)) * 1e6)

    def session_timeout_us(self, group: str) -> int:
        """The group's session timeout from the scenario (groups are expanded from their specs)."""
        for spec in self.info.get("scenario", {}).get("groups", []):
            names = [spec["name"]] if spec.get("count", 1) == 1 else [f"{spec['name']}-{i}" for i in range(spec["count"])]
            if group in names:
                return int(spec.get("session_timeout_ms", 10_000)) * 1000
        return 45_000_000

    def end_offsets(self) -> dict[tuple[str, int], int]:
        return {(r["topic"], r["partition"]): r["offset"] for r in self.kind("end_offset")}


def load_run(run_dir: Path) -> RunData:
    run_dir = rundir.require_run_dir(run_dir)
    info = rundir.load_run_info(run_dir)
    table = read_events(run_dir)
    rows = _by_kind(table)
    records = Path(run_dir) / rundir.RECORDS
    final = _parquet(run_dir / rundir.SHARE_STATE_FINAL)
    share_records = _parquet(run_dir / rundir.SHARE_STATE_RECORDS)
    notes = []
    if final is None and info.get("groups", {}).get("share"):
        notes.append(f"{rundir.SHARE_STATE_FINAL} missing: share records are judged from the clients' view")
    del records
    return RunData(run_dir, info, rows, final, share_records, notes)


def _by_kind(table: pa.Table) -> dict[str, list[dict[str, Any]]]:
    table = table.drop_columns([c for c in _DROP if c in table.column_names])
    for name in ("time", "request_time"):
        index = table.column_names.index(name)
        table = table.set_column(index, name, pc.cast(table.column(name), pa.int64()))
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    kinds = table.column("kind")
    for kind in KINDS:
        subset = table.filter(pc.equal(kinds, kind))
        if subset.num_rows:
            rows = subset.to_pylist()
            for row in rows:
                detail = row.get("detail")
                if detail:
                    row["detail"] = json.loads(detail)
            rows.sort(key=lambda r: r["time"])
            out[kind] = rows
    return out


def _parquet(path: Path) -> list[dict[str, Any]] | None:
    if not path.is_file():
        return None
    return pq.read_table(path).to_pylist()
