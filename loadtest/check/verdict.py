"""A verdict per invariant, with the event rows that show its first violations (docs/experiments.md).

Evidence rows are event-log rows as the checker read them (times in integer microseconds,
`detail` parsed), turned here into what `verdicts.json` holds: only the columns that are set,
times as ISO-8601 strings, and a `why` saying what the row shows.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, NA = "pass", "fail", "n/a"
MAX_EVIDENCE = 50
TIME_COLUMNS = ("time", "request_time")
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

Row = dict[str, Any]


@dataclass(slots=True)
class Verdict:
    name: str
    title: str
    status: str  # PASS, FAIL or NA
    summary: str  # one human line with the counts (the reason, for n/a)
    checked: int = 0
    violations: int = 0
    evidence: list[Row] = field(default_factory=list)  # at most MAX_EVIDENCE rows, times as ISO strings

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "status": self.status, "summary": self.summary,
                "checked": self.checked, "violations": self.violations, "evidence": self.evidence[:MAX_EVIDENCE]}


@dataclass(slots=True)
class Evidence:
    """Collects the rows of the first violations, up to MAX_EVIDENCE rows (the counts go on
    regardless). A violation's rows go in together or not at all, so each one shown is whole."""

    rows: list[Row] = field(default_factory=list)
    full: bool = False

    def add(self, why: str, *rows: Row | None) -> None:
        shown = [evidence_row(row, why) for row in rows if row is not None] if not self.full else []
        if len(self.rows) + len(shown) > MAX_EVIDENCE:
            self.full = True
        else:
            self.rows += shown
            self.full = len(self.rows) == MAX_EVIDENCE


def judged(name: str, title: str, checked: int, violations: int, evidence: Evidence, summary: str) -> Verdict:
    return Verdict(name, title, FAIL if violations else PASS, summary, checked, violations, evidence.rows)


def not_applicable(name: str, title: str, reason: str) -> Verdict:
    return Verdict(name, title, NA, reason)


def evidence_row(row: Row, why: str | None = None) -> Row:
    out: Row = {}
    for key, value in row.items():
        if value is None:
            continue
        out[key] = iso(value) if key in TIME_COLUMNS and isinstance(value, int) else value
    if why:
        out["why"] = why
    return out


def iso(micros: int) -> str:
    # Exact to the microsecond (a float division may be off by one at today's epoch).
    return (EPOCH + datetime.timedelta(microseconds=micros)).isoformat()


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else many or word + 's'}"
