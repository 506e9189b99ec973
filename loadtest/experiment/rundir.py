"""The run directory's layout (docs/experiments.md) and the clear errors when part of it is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN_JSON = "run.json"
SCENARIO_COPY = "scenario.toml"
EVENTS = "events"
RECORDS = "records"
CONSUMER_OFFSETS_RECORDS = "records/consumer_offsets.parquet"
SHARE_STATE_RECORDS = "records/share_group_state.parquet"
SHARE_STATE_FINAL = "records/share_state_final.parquet"
CLUSTER_LOG = "cluster.log"
LEADERSHIP = "leadership.parquet"
VERDICTS = "verdicts.json"
REPORT = "report"


class RunDirError(Exception):
    """A run directory that is missing or lacks what a command needs; the message says what."""


def require_run_dir(run_dir: Path) -> Path:
    """The run directory, checked to hold run.json and at least one event-log part."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory (`raygroups experiment ... --out {run_dir}` makes one)")
    missing = []
    if not (run_dir / RUN_JSON).is_file():
        missing.append(RUN_JSON)
    if not any((run_dir / EVENTS).glob("part-*.parquet")):
        missing.append(f"{EVENTS}/part-*.parquet (the event log)")
    if missing:
        raise RunDirError(f"{run_dir} is not a complete run directory: missing {', '.join(missing)}")
    return run_dir


def load_run_info(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / RUN_JSON
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDirError(f"{path}: missing") from None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: unreadable ({exc})") from None


def write_run_info(run_dir: Path, info: dict[str, Any]) -> None:
    path = Path(run_dir) / RUN_JSON
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=2, sort_keys=True, default=str))
    tmp.rename(path)
