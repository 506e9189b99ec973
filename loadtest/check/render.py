"""The checker's verdicts on one screen (rich), with the first evidence rows of each violation."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from loadtest.check.verdict import FAIL, PASS, CheckResult, _jsonable

_STYLE = {PASS: "[green]pass[/]", FAIL: "[bold red]FAIL[/]"}
_SHOWN = ("why", "kind", "time", "member", "group", "topic", "partition", "offset", "generation", "delivery_count",
          "ack_type", "error", "target")


def render(result: CheckResult, console: Console) -> None:
    table = Table(title="invariants" + ("" if result.ok else " [bold red](violations)[/]"), title_justify="left")
    for col in ("invariant", "verdict", "checked", "violations", "summary"):
        table.add_column(col, justify="right" if col in ("checked", "violations") else "left")
    for v in result.verdicts:
        table.add_row(v.name, _STYLE.get(v.status, f"[dim]{v.status}[/]"), f"{v.checked:,}",
                      f"{v.violations:,}" if v.violations else "", v.summary)
    console.print(table)
    for v in result.verdicts:
        if v.status != FAIL:
            continue
        rows = [_jsonable(r) for r in v.evidence[:6]]
        columns = [c for c in _SHOWN if any(c in r for r in rows)]
        evidence = Table(title=f"{v.name}: first evidence", title_justify="left")
        for c in columns:
            evidence.add_column(c)
        for r in rows:
            evidence.add_row(*("" if r.get(c) is None else str(r[c])[11:23] if c == "time" else str(r[c])
                               for c in columns))
        console.print(evidence)
