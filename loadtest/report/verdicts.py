"""The checker's verdicts for the page: `verdicts.json` if the run has one, else the checker's
answer now, else a note that the run was not checked. Never fatal: a report without verdicts is
still a report."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.experiment import rundir


@dataclass
class Verdicts:
    checked: bool
    source: str  # where they came from, or why there are none
    ok: bool | None = None
    checked_at: str | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [v for v in self.verdicts if v.get("status") == "fail"]


def load_verdicts(run_dir: Path, run_checker: bool = True) -> Verdicts:
    path = Path(run_dir) / rundir.VERDICTS
    if path.is_file():
        return _from_file(path)
    if not run_checker:
        return Verdicts(False, "not checked: the run has no verdicts.json")
    try:
        from loadtest.check import run_check
    except ImportError as exc:
        return Verdicts(False, f"not checked: the run has no verdicts.json and the checker is not available ({exc})")
    try:
        result = run_check(Path(run_dir))
    except Exception as exc:  # the checker's failure is news for the page, not the end of the report
        return Verdicts(False, f"not checked: the checker failed: {type(exc).__name__}: {exc}")
    if path.is_file():
        return _from_file(path, "checked now (no verdicts.json before)")
    return _from_result(result)


def _from_file(path: Path, source: str | None = None) -> Verdicts:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return Verdicts(False, f"not checked: {path.name} is unreadable ({exc})")
    return _from_dict(data, source or f"from {path.name}")


def _from_dict(data: Any, source: str) -> Verdicts:
    if not isinstance(data, dict):
        return Verdicts(False, "not checked: the verdicts are not in the documented format")
    verdicts = [v for v in data.get("verdicts") or [] if isinstance(v, dict)]
    ok = data.get("ok")
    if ok is None and verdicts:
        ok = all(v.get("status") != "fail" for v in verdicts)
    return Verdicts(True, source, ok, data.get("checked_at"), verdicts)


def _from_result(result: Any) -> Verdicts:
    """A CheckResult that did not write verdicts.json: read it by its documented fields."""
    for method in ("as_json", "to_json", "to_dict", "as_dict"):
        convert = getattr(result, method, None)
        if callable(convert):
            data = convert()
            return _from_dict(json.loads(data) if isinstance(data, str) else data, "checked now")
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return _from_dict(dataclasses.asdict(result), "checked now")
    verdicts = getattr(result, "verdicts", None)
    if verdicts is None:
        return Verdicts(False, "not checked: the checker's answer has no verdicts")
    rows = [_as_dict(v) for v in verdicts]
    return _from_dict({"ok": getattr(result, "ok", None), "verdicts": rows}, "checked now")


def _as_dict(verdict: Any) -> dict[str, Any]:
    if isinstance(verdict, dict):
        return verdict
    if dataclasses.is_dataclass(verdict) and not isinstance(verdict, type):
        return dataclasses.asdict(verdict)
    return dict(vars(verdict))
