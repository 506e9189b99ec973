"""The verdicts on one screen (rich): one line per invariant, then the first evidence of each failure."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from loadtest.check.result import CheckResult
from loadtest.check.verdict import FAIL, NA, PASS, Verdict

STATUS = {PASS: "[green]pass[/]", FAIL: "[bold red]FAIL[/]", NA: "[dim]n/a[/]"}
EVIDENCE_ROWS = 8
# The evidence columns worth a glance, in this order; whichever the rows have are shown.
EVIDENCE_COLUMNS = ("kind", "time", "member", "group", "topic", "partition", "offset", "generation",
                    "delivery_count", "ack_type", "error", "state", "fault_id", "target", "detail", "why")
DETAIL_KEYS = ("action", "reason", "source", "members")  # what a glance at `detail` needs


def render(result: CheckResult, console: Console) -> None:
    failing = [v for v in result.verdicts if v.status == FAIL]
    title = f"invariants of {result.run_dir}" + (f" — [bold red]{len(failing)} failing[/]" if failing else "")
    table = Table(title=title, title_justify="left")
    table.add_column("invariant", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("checked", justify="right")
    table.add_column("violations", justify="right")
    table.add_column("summary")
    for v in result.verdicts:
        table.add_row(v.name, STATUS.get(v.status, v.status), f"{v.checked:,}",
                      f"[red]{v.violations:,}[/]" if v.violations else "", v.summary)
    console.print(table)
    for note in result.notes:
        console.print(f"[dim]note: {note}[/]")
    for v in failing:
        console.print(evidence_table(v))


def evidence_table(verdict: Verdict) -> Table:
    rows = verdict.evidence[:EVIDENCE_ROWS]
    columns = [c for c in EVIDENCE_COLUMNS if any(c in r for r in rows)]
    more = len(verdict.evidence) - len(rows)
    caption = f"{more} more evidence rows in verdicts.json" if more > 0 else None
    table = Table(title=f"{verdict.name}: first evidence", title_justify="left", caption=caption,
                  caption_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold", no_wrap=c != "why")
    for r in rows:
        table.add_row(*(_cell(c, r.get(c)) for c in columns))
    return table


def _cell(column: str, value: object) -> str:
    if value is None:
        return ""
    if column == "time" and isinstance(value, str):
        return value[11:23]  # HH:MM:SS.mmm of the ISO time: one run spans hours at most
    if column == "detail" and isinstance(value, dict):
        return " ".join(f"{k}={value[k]}" for k in DETAIL_KEYS if k in value)
    return str(value)
