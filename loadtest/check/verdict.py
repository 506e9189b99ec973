"""A verdict per invariant, with the event rows that show a violation (docs/experiments.md)."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PASS, FAIL, NA = "pass", "fail", "n/a"
MAX_EVIDENCE = 50


@dataclass(slots=True)
class Verdict:
    name: str
    title: str
    status: str
    summary: str
    checked: int = 0
    violations: int = 0
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "status": self.status, "summary": self.summary,
                "checked": self.checked, "violations": self.violations,
                "evidence": [_jsonable(row) for row in self.evidence[:MAX_EVIDENCE]]}


@dataclass(slots=True)
class CheckResult:
    run_dir: Path
    verdicts: list[Verdict]

    @property
    def ok(self) -> bool:
        return all(v.status != FAIL for v in self.verdicts)

    def as_json(self) -> dict[str, Any]:
        return {"format": 1, "ok": self.ok, "checked_at": datetime.datetime.now(datetime.UTC).isoformat(),
                "verdicts": [v.as_json() for v in self.verdicts]}

    def write(self) -> Path:
        path = Path(self.run_dir) / "verdicts.json"
        path.write_text(json.dumps(self.as_json(), indent=2))
        return path


def evidence(*rows: dict[str, Any] | None, note: str | None = None) -> list[dict[str, Any]]:
    """Event rows for a verdict, without their empty columns; `note` says what the rows show."""
    out = []
    for row in rows:
        if row is None:
            continue
        kept = {k: v for k, v in row.items() if v is not None}
        if note:
            kept["why"] = note
        out.append(kept)
    return out


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in row.items():
        if key in ("time", "request_time") and isinstance(value, int):
            value = datetime.datetime.fromtimestamp(value / 1e6, datetime.UTC).isoformat()
        out[key] = value
    return out
