"""`build_report` on a synthetic run with everything in it: one build shared by the module's tests."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from loadtest.report import build_report
from loadtest.report.plots import OTHER_PANEL, latency_panels
from loadtest.report.sections import SECTION_TITLES
from tests import synthetic_run as synthetic

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

EXPECTED_COLUMNS = {
    "event_counts": ["kind", "role", "rows", "members", "first_ts", "last_ts"],
    "faults": ["fault_id", "action", "target", "start_s", "end_s", "duration_s", "groups", "partitions"],
    "latency": ["api", "t_s", "responses", "p50_ms", "p99_ms", "max_ms"],
    "throughput": ["t_s", "what", "series", "count", "per_s"],
    "api_summary": ["api", "requests", "responses", "errors", "requests_per_s", "p50_ms", "p99_ms", "max_ms"],
    "api_errors": ["api", "error", "responses"],
    "rebalances": ["group", "protocol", "generation", "start_s", "end_s", "duration_ms", "members", "reasons"],
    "recovery": ["fault_id", "source", "target", "since_fault_ms", "since_fault_end_ms", "disturbed"],
    "share_delivery_counts": ["group", "delivery_count", "deliveries"],
    "share_states": ["group", "t_s", "available", "acquired", "acknowledged", "archived"],
    "final_offsets": [
        "group", "role", "topic", "partition", "end_offset", "drained_offset", "drained_state", "remaining",
        "committed_offset", "share_start_offset", "share_available", "share_acquired", "share_acknowledged",
        "share_archived",
    ],
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run_dir = tmp_path_factory.mktemp("run")
    expected = synthetic.generate(run_dir)
    verdicts = synthetic.write_verdicts(run_dir)
    output = io.StringIO()
    page = build_report(run_dir, console=Console(file=output, width=120))
    return {"dir": run_dir, "expected": expected, "verdicts": verdicts, "page": page, "html": page.read_text(),
            "console": output.getvalue()}


def table(run: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A table read back from its Parquet copy."""
    return pq.read_table(run["dir"] / "report" / "tables" / name).to_pylist()


def test_writes_the_page_in_the_report_folder(run: dict[str, Any]) -> None:
    assert run["page"] == run["dir"] / "report" / "index.html"
    assert run["html"].startswith("<!doctype html>")
    assert "<script" not in run["html"]


def test_progress_is_shown_step_by_step(run: dict[str, Any]) -> None:
    assert "[1/7] reading verdicts.json" in run["console"]
    assert "[7/7] writing the page" in run["console"]
    assert "report written in" in run["console"]


def test_every_plot_the_page_shows_is_a_png_next_to_it(run: dict[str, Any]) -> None:
    images = re.findall(r'<img src="([^"]+)"', run["html"])
    assert {"latency.png", "throughput.png", "rebalances.png", "recovery.png", "delivery_counts.png",
            "share_states.png"} <= set(images)
    for name in images:
        path = run["dir"] / "report" / name
        assert path.read_bytes()[:8] == PNG_SIGNATURE, name
        assert path.stat().st_size > 5_000, name  # a drawn plot, not an empty canvas
        assert path.with_suffix(".svg").stat().st_size > 0


def test_every_linked_table_exists(run: dict[str, Any]) -> None:
    report = run["dir"] / "report"
    links = re.findall(r'href="(tables/[^"]+)"', run["html"])
    assert links
    for link in links:
        assert (report / link).exists(), link


def test_page_has_every_section_heading(run: dict[str, Any]) -> None:
    for title in ["Verdicts", *SECTION_TITLES.values()]:
        assert f"<h2>{title}</h2>" in run["html"].replace("&amp;", "&"), title
    assert run["html"].count('class="how"') >= len(SECTION_TITLES) + 1  # a line on how to read each


def test_header_shows_the_run(run: dict[str, Any]) -> None:
    html = run["html"]
    assert "synthetic-failover" in html
    assert ">complete<" in html
    assert "127.0.0.1:9092,127.0.0.1:9093" in html
    assert f"{run['expected'].produced:,}" in html
    assert "synthetic run: written by" in html  # the runner's notes


def test_verdicts_table_with_coloured_statuses_and_evidence(run: dict[str, Any]) -> None:
    html = run["html"]
    for verdict in run["verdicts"]["verdicts"]:
        assert f"<code>{verdict['name']}</code>" in html
        assert verdict["summary"] in html
    assert '<span class="badge fail">fail</span>' in html
    assert '<span class="badge pass">pass</span>' in html
    assert '<span class="badge na">n/a</span>' in html
    evidence = html.split("Evidence: <code>duplicate</code>")[1].split("</table>")[0]
    assert "2026-11-23T12:00:30.900000+00:00" in evidence and ">17<" in evidence
    assert "Evidence: <code>lost-write</code>" not in html  # only failing verdicts show evidence


def test_faults_are_named_on_the_page(run: dict[str, Any]) -> None:
    html = run["html"]
    for label in ("F0", "F1"):
        assert label in html
    assert "group-coordinator-1" in html and "share-coordinator-0" in html
    rows = table(run, "faults")
    assert [(r["fault_id"], r["action"]) for r in rows] == [(0, "kill"), (1, "pause")]
    assert rows[0]["end_s"] is None
    assert rows[1]["duration_s"] == pytest.approx(5.0)


@pytest.mark.parametrize("name", sorted(EXPECTED_COLUMNS))
def test_tables_as_parquet_and_csv(run: dict[str, Any], name: str) -> None:
    tables = run["dir"] / "report" / "tables"
    parquet = pq.read_table(tables / name)
    assert parquet.column_names == EXPECTED_COLUMNS[name]
    assert parquet.num_rows > 0
    with open(tables / f"{name}.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == EXPECTED_COLUMNS[name]
    assert len(rows) - 1 == parquet.num_rows


def test_event_counts_add_up_to_the_log(run: dict[str, Any]) -> None:
    rows = table(run, "event_counts")
    assert sum(r["rows"] for r in rows) == run["expected"].rows
    assert sum(r["rows"] for r in rows if r["kind"] == "produce") == run["expected"].produced


def test_share_states_end_acknowledged_or_archived(run: dict[str, Any]) -> None:
    expected = run["expected"]
    rows = table(run, "share_states")
    assert {r["group"] for r in rows} == {synthetic.SHARE}
    last = max(rows, key=lambda r: r["t_s"])
    assert last["acknowledged"] == expected.share_acknowledged
    assert last["archived"] == expected.share_archived
    assert last["acknowledged"] + last["archived"] == expected.produced
    assert last["available"] == last["acquired"] == 0
    for row in rows:  # every record is in exactly one state, never fewer than none
        assert min(row["available"], row["acquired"], row["acknowledged"], row["archived"]) >= 0


def test_share_states_show_the_pause(run: dict[str, Any]) -> None:
    """During F1 (40-45 s) nothing is delivered: produced records pile up AVAILABLE."""
    rows = {r["t_s"]: r for r in table(run, "share_states")}
    before, during = rows[40.0], rows[45.0]
    assert during["available"] > before["available"] + 100
    assert during["acknowledged"] == pytest.approx(rows[42.0]["acknowledged"], abs=5)


def test_delivery_counts_histogram(run: dict[str, Any]) -> None:
    counts = {r["delivery_count"]: r["deliveries"] for r in table(run, "share_delivery_counts")}
    assert counts == dict(run["expected"].share_deliveries_by_count)
    assert set(counts) == {1, 2, 3}


def test_rebalances_per_generation(run: dict[str, Any]) -> None:
    rows = sorted(table(run, "rebalances"), key=lambda r: r["generation"])
    assert [r["generation"] for r in rows] == [1, 2]
    first, churn = rows
    assert first["reasons"] == "join" and first["members"] == 3
    assert churn["reasons"] == "REBALANCE_IN_PROGRESS,join"
    # m03's join at 35.06 s opens it; the last SyncGroup answer at 36.28 s closes it.
    assert churn["start_s"] == pytest.approx(synthetic.CHURN_AT + 0.06, abs=0.01)
    assert churn["duration_ms"] == pytest.approx(1220, abs=20)


def test_recovery_from_both_sources(run: dict[str, Any]) -> None:
    rows = {(r["fault_id"], r["source"], r["target"]): r for r in table(run, "recovery")}
    assert rows[(0, "recovery", "billing-0")]["since_fault_ms"] == pytest.approx(2000)
    killed = rows[(0, "group Stable", "billing-0")]
    assert killed["since_fault_ms"] == pytest.approx(2500, abs=1) and killed["disturbed"] is True
    assert rows[(0, "group Stable", "workers")]["disturbed"] is False
    paused = rows[(1, "group Stable", "workers")]
    assert paused["since_fault_end_ms"] == pytest.approx(500, abs=1) and paused["disturbed"] is True
    assert rows[(1, "recovery", "workers:orders-0")]["since_fault_end_ms"] == pytest.approx(400, abs=1)


def test_api_summary_and_errors(run: dict[str, Any]) -> None:
    summary = {r["api"]: r for r in table(run, "api_summary")}
    assert {"Produce", "Fetch", "ShareFetch", "OffsetCommit", "JoinGroup", "SyncGroup", "Heartbeat"} <= set(summary)
    for row in summary.values():
        assert row["requests"] == row["responses"] > 0
        assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
    errors = {(r["api"], r["error"]): r["responses"] for r in table(run, "api_errors")}
    assert errors[("OffsetCommit", "NOT_COORDINATOR")] == summary["OffsetCommit"]["errors"] > 0
    assert ("ShareFetch", "REQUEST_TIMED_OUT") in errors
    assert "NOT_COORDINATOR" in run["html"]


def test_latency_and_throughput_over_time(run: dict[str, Any]) -> None:
    for row in table(run, "latency"):
        assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
        assert 0 <= row["t_s"] <= 60
    throughput = table(run, "throughput")
    assert sum(r["count"] for r in throughput if r["series"] == "produced") == run["expected"].produced
    assert {"delivered (classic)", "delivered (share)", "produced"} <= {r["series"] for r in throughput}


def test_the_latency_panels_hold_every_api_seen_once(run: dict[str, Any]) -> None:
    """One chart of every API could not be read: the latency plot draws a row of panels per kind of
    API, and no API seen may fall out of them (nor be drawn twice)."""
    seen = {row["api"] for row in table(run, "latency")}
    assert {"Heartbeat", "OffsetCommit", "Produce", "ShareFetch"} <= seen
    panels = latency_panels(seen)
    drawn = [api for apis in panels.values() for api in apis]
    assert sorted(drawn) == sorted(seen)
    assert panels["group membership"] and panels["offsets"] and panels["data"]
    how = run["html"].split('id="latency"')[1].split('class="how">')[1].split("</p>")[0]
    for name, apis in panels.items():
        assert f"<i>{name}</i> ({', '.join(apis)})" in how
    # APIs no panel names (admin calls, any API added later) are drawn in the last one.
    later = latency_panels({"JoinGroup", "ConsumerGroupHeartbeat", "SomeFutureApi", "DescribeGroups"})
    assert later == {"group membership": ["ConsumerGroupHeartbeat", "JoinGroup"],
                     OTHER_PANEL: ["DescribeGroups", "SomeFutureApi"]}


def test_final_offsets_join_events_and_coordinator_records(run: dict[str, Any]) -> None:
    rows = table(run, "final_offsets")
    classic = [r for r in rows if r["group"] == synthetic.CLASSIC]
    share = [r for r in rows if r["group"] == synthetic.SHARE]
    assert len(classic) == len(share) == 4
    for row in classic:
        assert row["role"] == "classic" and row["drained_state"] == "complete" and row["remaining"] == 0
        assert row["committed_offset"] == row["end_offset"]  # the later of the two OffsetCommit records
    for row in share:
        assert row["share_start_offset"] == row["end_offset"] - 3
        assert (row["share_acknowledged"], row["share_archived"]) == (2, 1)
