"""Runs the report must handle: no share groups, no verdicts, a missing or partial run directory."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from loadtest.experiment.eventlog import EventLog
from loadtest.experiment.rundir import RunDirError
from loadtest.report import build_report
from loadtest.report.verdicts import load_verdicts
from tests import synthetic_run as synthetic


@pytest.fixture
def no_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """`from loadtest.check import run_check` fails, whether or not the checker exists yet."""
    monkeypatch.setitem(sys.modules, "loadtest.check", None)


@pytest.fixture(scope="module")
def classic_only(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run without share groups and without verdicts.json, the checker unavailable."""
    run_dir = tmp_path_factory.mktemp("classic-only")
    synthetic.generate(run_dir, synthetic.Config(share=False))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "loadtest.check", None)
        page = build_report(run_dir)
    return {"dir": run_dir, "html": page.read_text()}


@pytest.fixture(scope="module")
def cut_short(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run whose cluster died at once: a producer's one failed request, no groups, no faults."""
    run_dir = tmp_path_factory.mktemp("cut-short")
    log = EventLog(run_dir)
    t = synthetic.T0_MS
    log.extend([
        {"time": t, "kind": "phase", "role": "runner", "state": "start"},
        {"time": t + 100, "kind": "member_start", "role": "producer", "member": "p-0"},
        {"time": t + 200, "kind": "request", "role": "producer", "member": "p-0", "api": "Produce", "correlation": 1},
        {"time": t + 230, "kind": "response", "role": "producer", "member": "p-0", "api": "Produce", "correlation": 1,
         "request_time": t + 200, "latency_ms": 30.0, "error": "NETWORK_EXCEPTION"},
    ])
    log.close()
    (run_dir / "run.json").write_text(json.dumps({"format": 1, "scenario": {"name": "died-early"}, "status": "cluster-died"}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "loadtest.check", None)
        page = build_report(run_dir)
    return {"dir": run_dir, "html": page.read_text()}


def test_a_run_cut_short_still_reports_what_it_saw(cut_short: dict[str, Any]) -> None:
    html = cut_short["html"]
    assert '<span class="badge fail">cluster-died</span>' in html
    for empty in ("no classic or consumer groups in this run", "no faults in this run", "no share groups in this run",
                  "no end_offset or drained rows, and no coordinator records"):
        assert f'class="empty">{empty}' in html
    assert "NETWORK_EXCEPTION 1" in html
    assert (cut_short["dir"] / "report" / "latency.png").stat().st_size > 0


def test_without_share_groups_the_share_sections_say_so(classic_only: dict[str, Any]) -> None:
    html = classic_only["html"]
    assert html.count("no share groups in this run") == 2
    assert "<h2>Share records by state</h2>" in html and "<h2>Share delivery counts</h2>" in html
    images = re.findall(r'<img src="([^"]+)"', html)
    assert "share_states.png" not in images and "delivery_counts.png" not in images
    assert {"latency.png", "throughput.png", "rebalances.png"} <= set(images)
    for name in images:
        assert (classic_only["dir"] / "report" / name).stat().st_size > 0
    tables = classic_only["dir"] / "report" / "tables"
    assert not (tables / "share_states").exists()
    assert pq.read_table(tables / "rebalances").num_rows == 2


def test_without_verdicts_the_page_says_the_run_was_not_checked(classic_only: dict[str, Any]) -> None:
    html = classic_only["html"]
    assert "not checked" in html
    assert "raygroups check RUN_DIR" in html
    assert "badge fail" not in html


def test_missing_run_dir(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no such run directory"):
        build_report(tmp_path / "nowhere")


def test_run_dir_without_events(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(RunDirError, match=r"missing events/part-\*\.parquet"):
        build_report(tmp_path)


def test_run_dir_without_run_json(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.emit({"time": 1.0e12, "kind": "phase", "role": "runner", "state": "start"})
    log.close()
    with pytest.raises(RunDirError, match=r"missing run\.json"):
        build_report(tmp_path)


def test_unreadable_run_json(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.emit({"time": 1.0e12, "kind": "phase", "role": "runner", "state": "start"})
    log.close()
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(RunDirError, match="run.json: unreadable"):
        build_report(tmp_path)


def test_verdicts_without_checker(tmp_path: Path, no_checker: None) -> None:
    verdicts = load_verdicts(tmp_path)
    assert not verdicts.checked
    assert "not checked" in verdicts.source


def test_verdicts_run_the_checker_when_the_run_has_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run_check(run_dir: Path) -> object:
        data = {"format": 1, "ok": True, "verdicts": [{"name": "lost-write", "status": "pass", "summary": "ok"}]}
        (run_dir / "verdicts.json").write_text(json.dumps(data))
        return object()

    monkeypatch.setitem(sys.modules, "loadtest.check", types.SimpleNamespace(run_check=run_check))
    verdicts = load_verdicts(tmp_path)
    assert verdicts.checked and verdicts.ok
    assert [v["name"] for v in verdicts.verdicts] == ["lost-write"]


def test_verdicts_from_a_check_result_that_wrote_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    verdict = types.SimpleNamespace(name="duplicate", status="fail", summary="1 duplicate", evidence=[])
    result = types.SimpleNamespace(ok=False, verdicts=[verdict])
    monkeypatch.setitem(sys.modules, "loadtest.check", types.SimpleNamespace(run_check=lambda run_dir: result))
    verdicts = load_verdicts(tmp_path)
    assert verdicts.checked and verdicts.ok is False
    assert [v["name"] for v in verdicts.failing] == ["duplicate"]


def test_a_failing_checker_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run_check(run_dir: Path) -> object:
        raise ValueError("no events")

    monkeypatch.setitem(sys.modules, "loadtest.check", types.SimpleNamespace(run_check=run_check))
    verdicts = load_verdicts(tmp_path)
    assert not verdicts.checked
    assert "the checker failed: ValueError: no events" in verdicts.source


def test_verdicts_from_the_real_checker(tmp_path: Path) -> None:
    """With loadtest.check installed, a run without verdicts.json is checked (and keeps the verdicts)."""
    pytest.importorskip("loadtest.check")
    synthetic.generate(tmp_path, synthetic.Config(share=False))
    verdicts = load_verdicts(tmp_path)
    assert verdicts.checked, verdicts.source
    assert verdicts.verdicts and all(v["status"] in ("pass", "fail", "n/a") for v in verdicts.verdicts)
    assert (tmp_path / "verdicts.json").is_file()
