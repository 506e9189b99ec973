"""A run's verdicts together, and `verdicts.json` (docs/experiments.md) written from them."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.check.verdict import FAIL, Verdict
from loadtest.experiment import rundir


@dataclass(slots=True)
class CheckResult:
    run_dir: Path
    verdicts: list[Verdict]
    notes: list[str] = field(default_factory=list)  # what the checker lacked (a missing records file)
    checked_at: str = field(default_factory=lambda: datetime.datetime.now(datetime.UTC).isoformat())

    @property
    def ok(self) -> bool:
        return not any(v.status == FAIL for v in self.verdicts)

    def verdict(self, name: str) -> Verdict:
        return next(v for v in self.verdicts if v.name == name)

    def to_json(self) -> dict[str, Any]:
        return {"format": 1, "ok": self.ok, "checked_at": self.checked_at,
                "verdicts": [v.to_json() for v in self.verdicts]}

    def write(self) -> Path:
        path = Path(self.run_dir) / rundir.VERDICTS
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, default=str))
        tmp.rename(path)  # a reader (the report) never sees half a file
        return path
