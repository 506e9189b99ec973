"""The verdicts on screen: one table for a passing run, the first evidence under each failure."""

from __future__ import annotations

from rich.console import Console

from loadtest.check import render
from tests.unit.check.runbuilder import CLASSIC, judge


def shown(result) -> str:
    console = Console(record=True, width=160, color_system=None)
    render(result, console)
    return console.export_text()


def test_a_passing_run_is_one_short_table(builder, tmp_path):
    text = shown(judge(builder, tmp_path))
    for name in ("lost-write", "duplicate-share", "failover-rebalance", "incomplete-read"):
        assert name in text
    assert "FAIL" not in text and "evidence" not in text
    assert len(text.splitlines()) <= 24  # one screen


def test_a_failing_verdict_shows_its_first_evidence_rows(builder, tmp_path):
    builder.remove(lambda r: r["kind"] == "delivery" and r["group"] == CLASSIC and r["partition"] == 1)
    text = shown(judge(builder, tmp_path))
    assert "FAIL" in text and "lost-write: first evidence" in text
    assert "acknowledged, never delivered to billing-0" in text
    assert "6 more evidence rows in verdicts.json" in text  # 14 lost, 8 shown
