"""The report page: one static HTML file, its CSS inline, plots by relative path, no JavaScript."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from loadtest.experiment.eventlog import COLUMNS as EVENT_COLUMNS
from loadtest.report.facts import RunFacts, TimeAxis
from loadtest.report.faults import Fault
from loadtest.report.tables import TABLES_DIR, Table
from loadtest.report.verdicts import Verdicts

MAX_TABLE_ROWS = 40
EVIDENCE_ROWS = 5


@dataclass
class Section:
    anchor: str
    title: str
    how: str  # one line: how to read it
    plot: str | None = None  # PNG file name in the report folder
    empty: str | None = None  # said instead of a plot when there is no data
    body: str = ""  # tables, as HTML
    tables: list[str] = field(default_factory=list)  # names of the tables it was made from


@dataclass
class Page:
    facts: RunFacts
    axis: TimeAxis | None
    counts: dict[str, Any]
    verdicts: Verdicts
    faults: list[Fault]
    sections: list[Section]
    spark_master: str


def render(page: Page) -> str:
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(page.facts.name)}: raygroups run report</title>",
        f"<style>{CSS}</style></head><body><main>",
        _header(page),
        _contents(page.sections),
        _verdicts(page.verdicts),
        *[_section(s) for s in page.sections],
        _footer(page),
        "</main></body></html>",
    ]
    return "\n".join(parts)


# -- header ---------------------------------------------------------------------------------------


def _header(page: Page) -> str:
    facts, counts = page.facts, page.counts
    started, ended = facts.time("started"), facts.time("ended")
    duration = (ended - started).total_seconds() if started and ended else (page.axis.duration_s if page.axis else None)
    meta = [
        ("status", f'<span class="badge {_status_class(facts.status)}">{esc(facts.status)}</span>'),
        ("duration", esc(_duration(duration))),
        ("started", esc(_when(started))),
        ("ended", esc(_when(ended))),
        ("cluster", f"<code>{esc(facts.bootstrap)}</code>"),
        ("checked", esc(_verdict_line(page.verdicts))),
    ]
    # Consumer-protocol (KIP-848) cards only when the run has such members: a run of the other
    # kinds reads as it always did.
    consumer = bool(counts.get("members_consumer") or counts.get("delivered_consumer"))
    cards = [
        ("classic members", counts.get("members_classic", 0)),
        *([("consumer-protocol members", counts.get("members_consumer", 0))] if consumer else []),
        ("share members", counts.get("members_share", 0)),
        ("producers", counts.get("members_producer", 0)),
        ("records produced", counts.get("produced", 0)),
        ("produce failed", counts.get("produce_failed", 0)),
        ("delivered (classic)", counts.get("delivered_classic", 0)),
        *([("delivered (consumer)", counts.get("delivered_consumer", 0))] if consumer else []),
        ("delivered (share)", counts.get("delivered_share", 0)),
        ("faults", len(page.faults)),
        ("event rows", counts.get("events", 0)),
    ]
    kinds = (("classic", facts.groups("classic")), ("consumer", facts.groups("consumer")),
             ("share", facts.groups("share")))
    groups = ", ".join(f"{kind}: {esc(', '.join(sorted(names)))}" for kind, names in kinds if names)
    notes = "".join(f"<li>{esc(n)}</li>" for n in facts.notes)
    return (
        f'<header><p class="kicker">raygroups experiment report</p><h1 id="run">{esc(facts.name)}</h1>'
        f'<dl class="meta">{"".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in meta)}</dl>'
        f'<div class="cards">{"".join(_card(k, v) for k, v in cards)}</div>'
        + (f'<p class="groups">groups — {groups}</p>' if groups else "")
        + (f'<div class="notes"><b>Runner notes</b><ul>{notes}</ul></div>' if notes else "")
        + "</header>"
    )


def _card(label: str, value: Any) -> str:
    return f"<div class=card><b>{_num(value)}</b><span>{esc(label)}</span></div>"


def _contents(sections: list[Section]) -> str:
    links = [('verdicts', 'Verdicts')] + [(s.anchor, s.title) for s in sections]
    return '<nav>' + " · ".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in links) + "</nav>"


def _verdict_line(verdicts: Verdicts) -> str:
    if not verdicts.checked:
        return "not checked"
    failing = len(verdicts.failing)
    when = f" ({verdicts.checked_at})" if verdicts.checked_at else ""
    return f"{len(verdicts.verdicts)} verdicts, {failing} failing{when}"


def _verdicts(verdicts: Verdicts) -> str:
    head = (
        '<section id="verdicts"><h2>Verdicts</h2>'
        '<p class="how">The checker\'s invariants (docs/experiments.md): <b>pass</b>, <b>fail</b> (with the first '
        "event rows that show it) or <b>n/a</b> (nothing to judge, with the reason).</p>"
    )
    if not verdicts.checked:
        return head + f'<p class="empty">{esc(verdicts.source)}. Run <code>raygroups check RUN_DIR</code>.</p></section>'
    rows = "".join(
        f"<tr><td><code>{esc(v.get('name', '?'))}</code><div class=sub>{esc(v.get('title', ''))}</div></td>"
        f'<td><span class="badge {_status_class(v.get("status"))}">{esc(v.get("status", "?"))}</span></td>'
        f"<td>{esc(v.get('summary', ''))}</td></tr>"
        for v in verdicts.verdicts
    )
    table = f"<table><thead><tr><th>invariant</th><th>status</th><th>summary</th></tr></thead><tbody>{rows}</tbody></table>"
    evidence = "".join(_evidence(v) for v in verdicts.failing)
    source = f'<p class="sub">{esc(verdicts.source)}</p>'
    return head + table + evidence + source + "</section>"


def _evidence(verdict: dict[str, Any]) -> str:
    rows = [r for r in verdict.get("evidence") or [] if isinstance(r, dict)][:EVIDENCE_ROWS]
    title = f'<h3>Evidence: <code>{esc(verdict.get("name", "?"))}</code></h3>'
    if not rows:
        return title + '<p class="empty">no evidence rows given</p>'
    present = {k for r in rows for k, v in r.items() if v is not None}
    columns = [c for c in EVENT_COLUMNS if c in present] + sorted(present - set(EVENT_COLUMNS))
    total = len(verdict.get("evidence") or [])
    more = f'<p class="sub">first {len(rows)} of {total} rows (all in verdicts.json)</p>' if total > len(rows) else ""
    return title + html_table(columns, [[r.get(c) for c in columns] for r in rows], cls="evidence") + more


# -- sections --------------------------------------------------------------------------------------


def _section(section: Section) -> str:
    parts = [f'<section id="{section.anchor}"><h2>{esc(section.title)}</h2>', f'<p class="how">{section.how}</p>']
    if section.plot:
        stem = section.plot.rsplit(".", 1)[0]
        parts.append(
            f'<figure><a href="{esc(stem)}.svg"><img src="{esc(section.plot)}" alt="{esc(section.title)}"></a></figure>'
        )
    if section.empty:
        parts.append(f'<p class="empty">{esc(section.empty)}</p>')
    parts.append(section.body)
    if section.tables:
        links = " · ".join(
            f'<code>{esc(t)}</code> (<a href="{TABLES_DIR}/{esc(t)}/">Parquet</a>, '
            f'<a href="{TABLES_DIR}/{esc(t)}.csv">CSV</a>)'
            for t in section.tables
        )
        parts.append(f'<p class="tables">tables: {links}</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _footer(page: Page) -> str:
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    bucket = f"time buckets of {page.axis.bucket_s:g} s; " if page.axis else ""
    return (
        f'<footer>Generated {generated} by <code>raygroups report</code> on Spark <code>{esc(page.spark_master)}</code>; '
        f"{bucket}times are seconds since the run's first event. Every table is in <code>{TABLES_DIR}/</code> "
        "as Parquet (a folder) and CSV.</footer>"
    )


# -- tables ----------------------------------------------------------------------------------------


Formatter = Callable[[Any], str]


def html_table(
    columns: list[str],
    rows: Iterable[Iterable[Any]],
    formats: dict[str, Formatter] | None = None,
    cls: str = "",
    limit: int = MAX_TABLE_ROWS,
    more_hint: str = "",
) -> str:
    formats = formats or {}
    rows = [list(r) for r in rows]
    numeric = {c for i, c in enumerate(columns) if any(_is_number(r[i]) for r in rows)}
    head = "".join(f'<th class="{"num" if c in numeric else ""}">{esc(c)}</th>' for c in columns)
    body = []
    for row in rows[:limit]:
        cells = []
        for column, value in zip(columns, row):
            text = formats[column](value) if column in formats and value is not None else _cell(value)
            cells.append(f'<td class="{"num" if column in numeric else ""}">{text}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = ""
    if len(rows) > limit:
        more = f'<p class="sub">first {limit} of {len(rows):,} rows{esc(more_hint)}</p>'
    table = f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return f'<div class="scroll">{table}</div>{more}'


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def table_html(table: Table, formats: dict[str, Formatter] | None = None, columns: list[str] | None = None) -> str:
    columns = columns or table.columns
    rows = [[d[c] for c in columns] for d in table.dicts()]
    return html_table(columns, rows, formats, more_hint=f"; all of them in {TABLES_DIR}/{table.name}.csv")


def _cell(value: Any) -> str:
    if value is None:
        return '<span class="null">—</span>'
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _num(value)
    return esc(str(value))


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return esc(str(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"
    return f"{value:,}"


def ms(value: Any) -> str:
    """A duration in ms, readable: 3.2 ms, 412 ms, 2.35 s."""
    value = float(value)
    if abs(value) >= 1000:
        return f"{value / 1000:,.2f} s"
    return f"{value:.1f} ms" if abs(value) < 10 else f"{value:,.0f} ms"


def seconds(value: Any) -> str:
    return f"{float(value):,.1f} s"


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _status_class(status: Any) -> str:
    return {"pass": "pass", "complete": "pass", "fail": "fail", "cluster-died": "fail", "interrupted": "warn"}.get(
        str(status), "na"
    )


def _duration(value: float | None) -> str:
    if value is None:
        return "?"
    minutes, secs = divmod(value, 60)
    return f"{int(minutes)} min {secs:.0f} s" if minutes else f"{secs:.1f} s"


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip() if value else "?"


CSS = """
:root { --ink:#1f2328; --muted:#59636e; --line:#d8dee4; --bg:#ffffff; --soft:#f6f8fa;
        --pass:#1a7f37; --fail:#cf222e; --warn:#9a6700; --na:#6e7781; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font:15px/1.5 -apple-system, "Segoe UI", "Helvetica Neue", Arial, "DejaVu Sans", sans-serif; }
main { max-width:1180px; margin:0 auto; padding:28px 32px 48px; }
h1 { font-size:28px; margin:0 0 12px; }
h2 { font-size:21px; margin:0 0 4px; padding-top:8px; }
h3 { font-size:16px; margin:18px 0 6px; }
.kicker { margin:0; color:var(--muted); text-transform:uppercase; letter-spacing:.08em; font-size:12px; }
header { border-bottom:1px solid var(--line); padding-bottom:16px; }
.meta { display:flex; flex-wrap:wrap; gap:8px 28px; margin:0 0 16px; }
.meta div { min-width:120px; }
.meta dt { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.05em; }
.meta dd { margin:0; font-weight:600; }
.cards { display:grid; grid-template-columns:repeat(auto-fit, minmax(104px, 1fr)); gap:10px; }
.card { background:var(--soft); border:1px solid var(--line); border-radius:8px; padding:10px 12px; }
.card b { display:block; font-size:20px; font-variant-numeric:tabular-nums; }
.card span { color:var(--muted); font-size:12.5px; }
.groups, .sub, .tables { color:var(--muted); font-size:13px; }
.notes { margin-top:12px; background:#fff8c5; border:1px solid #d4a72c66; border-radius:8px;
         padding:8px 14px; font-size:14px; }
.notes ul { margin:4px 0 0; padding-left:18px; }
nav { margin:14px 0 6px; font-size:14px; line-height:1.9; }
nav a { color:#0969da; text-decoration:none; white-space:nowrap; }
section { margin:30px 0 0; padding-top:14px; border-top:1px solid var(--line); }
.how { color:var(--muted); margin:0 0 12px; max-width:900px; }
figure { margin:8px 0 12px; }
figure img { max-width:100%; height:auto; border:1px solid var(--line); border-radius:6px; }
.empty { background:var(--soft); border:1px dashed var(--line); border-radius:8px; padding:14px 16px; color:var(--muted); }
.scroll { overflow-x:auto; }
table { border-collapse:collapse; font-size:13.5px; margin:6px 0; }
th, td { padding:5px 10px; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
th { background:var(--soft); font-weight:600; white-space:nowrap; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
tbody tr:nth-child(even) { background:#fbfcfd; }
table.evidence { font-size:12.5px; }
code { font-family:ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size:.92em; }
.badge { display:inline-block; padding:1px 9px; border-radius:999px; font-size:12.5px; font-weight:700; color:#fff; }
.badge.pass { background:var(--pass); } .badge.fail { background:var(--fail); }
.badge.warn { background:var(--warn); } .badge.na { background:var(--na); }
.null { color:#b0b7be; }
a { color:#0969da; }
footer { margin-top:36px; padding-top:12px; border-top:1px solid var(--line); color:var(--muted); font-size:12.5px; }
"""
