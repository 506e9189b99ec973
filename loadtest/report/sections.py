"""The page's sections: for each, its plot (drawn here), its tables as HTML, how to read it, or
what it says when the run has no data for it."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from loadtest.report import plots
from loadtest.report.results import Results
from loadtest.report.faults import marks
from loadtest.report.page import Section, html_table, ms, seconds, table_html

SECTION_TITLES = {
    "latency": "Latency per API",
    "throughput": "Throughput",
    "rebalances": "Rebalances (classic and consumer groups)",
    "recovery": "Recovery after faults",
    "delivery-counts": "Share delivery counts",
    "share-states": "Share records by state",
    "requests": "Requests per API",
    "final": "Final offsets per partition",
}


def sections(results: Results, out: Path) -> list[Section]:
    return [
        _latency(results, out),
        _throughput(results, out),
        _rebalances(results, out),
        _recovery(results, out),
        _delivery_counts(results, out),
        _share_states(results, out),
        _requests(results),
        _final(results),
    ]


def _section(anchor: str, how: str, **kwargs: Any) -> Section:
    return Section(anchor, SECTION_TITLES[anchor], how, **kwargs)


def _latency(r: Results, out: Path) -> Section:
    rows = r.tables["latency"].dicts()
    how = (
        f"Response latency per Kafka API in {r.axis.bucket_s:g}-second buckets: p50 left, p99 right, log scale, "
        "one row of panels per kind of API. "
        "Red dashed lines are faults (shaded until their end), labelled by fault id and action; "
        "timeouts and lost connections count with the time it took to notice them."
    )
    if not rows:
        return _section("latency", how, empty="no responses in the event log", tables=["latency"])
    panels = plots.latency_panels(row["api"] for row in rows)
    how += " Panels: " + "; ".join(f"<i>{name}</i> ({', '.join(apis)})" for name, apis in panels.items()) + "."
    plot = plots.latency_plot(rows, marks(r.faults, r.axis), _api_colors(r), r.axis.bucket_s, out)
    return _section("latency", how, plot=plot, tables=["latency"])


def _api_colors(r: Results) -> dict[str, Any]:
    """One colour per API, the same in the latency and the throughput plot."""
    apis = {row["api"] for row in r.tables["api_summary"].dicts()}
    apis |= {row["series"] for row in r.tables["throughput"].dicts() if row["what"] == "requests"}
    return plots.palette(apis)


def _throughput(r: Results, out: Path) -> Section:
    rows = r.tables["throughput"].dicts()
    how = (
        "Above: requests sent per second per API (log scale). Below: records acknowledged by the cluster "
        "(produced) and handed to consumers (delivered, classic and share; redeliveries count again) per second. "
        "A dip at a fault is the clients waiting; the last bucket may be partial."
    )
    if not rows:
        empty = "no request, produce or delivery rows in the event log"
        return _section("throughput", how, empty=empty, tables=["throughput"])
    plot = plots.throughput_plot(rows, marks(r.faults, r.axis), _api_colors(r), r.axis.bucket_s, out)
    return _section("throughput", how, plot=plot, tables=["throughput"])


def _rebalances(r: Results, out: Path) -> Section:
    table = r.tables["rebalances"]
    rows = table.dicts()
    how = (
        "One point per (group, generation): from the group's first rebalance_start after the previous generation "
        "settled to the generation's last rebalance_end (every member Stable). Reasons are what made members rejoin; "
        "ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID right after a fault mean the failover cost a rebalance. "
        "For a consumer-protocol (KIP-848) group the generation is the member epoch: from the first member given a "
        "new assignment to the last one reconciled at that epoch (reason assignment, join, or fenced after a fencing)."
    )
    timed = [row for row in rows if row["duration_ms"] is not None]
    if not rows:
        empty = "no rebalances in this run" if r.classic_groups else "no classic or consumer groups in this run"
        return _section("rebalances", how, empty=empty, tables=["rebalances"])
    durations = [row["duration_ms"] for row in timed]
    by_protocol: dict[str, list[float]] = defaultdict(list)
    for row in timed:
        by_protocol[row.get("protocol") or "classic"].append(row["duration_ms"])
    compared = ""
    if len(by_protocol) > 1:  # both protocols ran: the comparison the protocols scenario is for
        compared = "; " + ", ".join(f"{p}: median {ms(statistics.median(d))}, slowest {ms(max(d))} ({len(d)})"
                                    for p, d in sorted(by_protocol.items()))
    summary = (
        f'<p class="sub">{len(rows)} rebalances in {len({row["group"] for row in rows})} groups'
        + (f"; median {ms(statistics.median(durations))}, slowest {ms(max(durations))}" if durations else "")
        + compared
        + "</p>"
    )
    body = summary + table_html(table, {"start_s": seconds, "end_s": seconds, "duration_ms": ms})
    plot = plots.rebalance_plot(rows, marks(r.faults, r.axis), r.axis.duration_s, out) if timed else None
    return _section("rebalances", how, plot=plot, body=body, tables=["rebalances"])


def _recovery(r: Results, out: Path) -> Section:
    how = (
        "Per fault: the shaded bar is how long the fault lasted; blue, the slowest fault target (group, partition, "
        "broker) to answer successfully again (recovery rows); green, the slowest group the monitor saw Stable again "
        "after the fault ended. Dots are the individual targets; times count from the fault's start. "
        "In the table, <i>disturbed</i> says whether the monitor saw the group anything but Stable after the fault."
    )
    faults_html = table_html(r.tables["faults"], {"start_s": seconds, "end_s": seconds, "duration_s": seconds})
    if not r.faults:
        return _section("recovery", how, empty="no faults in this run", tables=["faults", "recovery"])
    table = r.tables["recovery"]
    rows = table.dicts()
    if not rows:
        return _section(
            "recovery", how, empty="no recovery or group_state rows after the faults", body=faults_html,
            tables=["faults", "recovery"],
        )
    plot = plots.recovery_plot(rows, marks(r.faults, r.axis), [f.fault_id for f in r.faults], out)
    body = (
        "<h3>Faults</h3>" + faults_html + "<h3>By fault</h3>" + _recovery_summary(rows)
        + "<h3>Every target</h3>" + table_html(table, {"since_fault_ms": ms, "since_fault_end_ms": ms})
    )
    return _section("recovery", how, plot=plot, body=body, tables=["faults", "recovery"])


def _recovery_summary(rows: list[dict[str, Any]]) -> str:
    grouped: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["fault_id"], row["source"])].append(row)
    out = []
    for (fault_id, source), mine in sorted(grouped.items()):
        times = [row["since_fault_ms"] for row in mine if row["since_fault_ms"] is not None]
        out.append(
            [
                f"F{fault_id}", source, len(mine), len(times),
                statistics.median(times) if times else None, max(times) if times else None,
                sum(1 for row in mine if row["disturbed"]) if source == "group Stable" else None,
            ]
        )
    columns = ["fault", "source", "targets", "recovered", "median", "slowest", "disturbed"]
    return html_table(columns, out, {"median": ms, "slowest": ms})


def _no_share(r: Results) -> str | None:
    return None if r.share_groups else "no share groups in this run"


def _delivery_counts(r: Results, out: Path) -> Section:
    limit = r.facts.delivery_count_limit
    how = (
        "Share deliveries by their delivery count (1 = first delivery; log scale). Counts above 1 are redeliveries: "
        f"after a RELEASE, a lock that expired, or a failover. A record is archived at the limit ({limit}), "
        "so no bar should lie right of the dotted line."
    )
    if _no_share(r):
        return _section("delivery-counts", how, empty=_no_share(r))
    table = r.tables["share_delivery_counts"]
    if not len(table):
        return _section("delivery-counts", how, empty="no share deliveries in this run", tables=[table.name])
    plot = plots.delivery_count_plot(table.dicts(), limit, out)
    return _section("delivery-counts", how, plot=plot, body=table_html(table), tables=[table.name])


def _share_states(r: Results, out: Path) -> Section:
    lock_s = r.facts.lock_duration_ms / 1000
    how = (
        "Records of each share group by state at the end of each second, as the clients saw them: AVAILABLE "
        "(produced, or released, or its lock expired), ACQUIRED (delivered, not yet acknowledged), ACKNOWLEDGED "
        "(ACCEPT succeeded), ARCHIVED (REJECT, or released/expired at the delivery-count limit "
        f"{r.facts.delivery_count_limit}). "
        f"An unacknowledged delivery returns to AVAILABLE after the lock duration ({lock_s:g} s). "
        "At the end everything should be ACKNOWLEDGED or ARCHIVED."
    )
    if _no_share(r):
        return _section("share-states", how, empty=_no_share(r))
    table = r.tables["share_states"]
    rows = table.dicts()
    last: dict[str, dict[str, Any]] = {}
    for row in rows:
        last[row["group"]] = row  # rows are ordered by time
    states = ["available", "acquired", "acknowledged", "archived"]
    final = [[g, *[row[s] for s in states], sum(row[s] for s in states)] for g, row in sorted(last.items())]
    body = "<h3>At the end of the run</h3>" + html_table(["group", *states, "records"], final)
    if not any(row[s] for row in rows for s in states):
        return _section("share-states", how, empty="no share records in this run", body=body, tables=[table.name])
    plot = plots.share_state_plot(rows, marks(r.faults, r.axis), out)
    return _section("share-states", how, plot=plot, body=body, tables=[table.name])


def _requests(r: Results) -> Section:
    how = (
        "Every Kafka API the clients used: requests sent, responses (answers and failures), requests per second over "
        "the run, failed responses by error name, and latency percentiles over the whole run."
    )
    summary = r.tables["api_summary"]
    if not len(summary):
        return _section("requests", how, empty="no requests in the event log", tables=["api_summary", "api_errors"])
    errors: dict[str, list[str]] = defaultdict(list)
    for row in r.tables["api_errors"].dicts():
        errors[row["api"]].append(f"{row['error']} {row['responses']:,}")
    columns = ["api", "requests", "responses", "requests/s", "errors", "error names", "p50", "p99", "max"]
    rows = [
        [d["api"], d["requests"], d["responses"], d["requests_per_s"], d["errors"], ", ".join(errors[d["api"]]) or None,
         d["p50_ms"], d["p99_ms"], d["max_ms"]]
        for d in summary.dicts()
    ]
    body = html_table(columns, rows, {"p50": ms, "p99": ms, "max": ms})
    return _section("requests", how, body=body, tables=["api_summary", "api_errors"])


def _final(r: Results) -> Section:
    how = (
        "Where each group ended: per partition, the log end offset after the producers stopped, the group's drained "
        "offset and state (complete / timeout), and what the coordinators' records say (last committed offset in "
        "__consumer_offsets; share start offset and records per state in the final share state). "
        "<i>remaining</i> = end offset − drained offset."
    )
    table = r.tables["final_offsets"]
    rows = table.dicts()
    if not rows:
        return _section("final", how, empty="no end_offset or drained rows, and no coordinator records", tables=[table.name])
    per_group: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        per_group[(row["group"] or "", row["role"] or "")].append(row)
    summary = [
        [
            group, role, len(mine), sum(1 for m in mine if m["drained_state"] == "complete"),
            sum(1 for m in mine if m["drained_state"] == "timeout"),
            sum(m["remaining"] for m in mine if m["remaining"] is not None),
        ]
        for (group, role), mine in sorted(per_group.items())
    ]
    body = (
        "<h3>By group</h3>" + html_table(["group", "role", "partitions", "complete", "timeout", "remaining"], summary)
        + "<h3>By partition</h3>" + table_html(table)
    )
    return _section("final", how, body=body, tables=[table.name])
