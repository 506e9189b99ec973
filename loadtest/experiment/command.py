"""`raygroups experiment` end to end: scenario -> run -> check -> report -> one-screen summary."""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

import uvloop
from rich.console import Console
from rich.table import Table

from loadtest.experiment import rundir
from loadtest.experiment.runner import Experiment, RunOutcome
from loadtest.experiment.scenario import Scenario, load_scenario


def default_run_dir(name: str) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{name}-{stamp}"


def run_experiment(scenario_path: Path, out: Path | None, bootstrap: str | None, duration: float | None,
                   console: Console, report: bool = True) -> int:
    """Exit code: 0 every invariant held, 1 a violation (or the run could not be completed)."""
    text = Path(scenario_path).read_text() if Path(scenario_path).is_file() else None
    scenario = load_scenario(scenario_path, external_cluster=bootstrap is not None)
    if duration is not None:
        scenario = _with_duration(scenario, text or "", duration, str(scenario_path), bootstrap is not None)
    return run_scenario(scenario, text or "", out or default_run_dir(scenario.name), bootstrap, console, report)


def _with_duration(scenario: Scenario, text: str, duration: float, source: str, external: bool) -> Scenario:
    """The scenario with another duration: faults keep their place relative to it."""
    import msgspec

    from loadtest.experiment.scenario import ScenarioError, validate

    data = msgspec.to_builtins(scenario)
    scale = duration / scenario.duration_s
    data["duration_s"] = duration
    data["ramp_s"] = min(scenario.ramp_s, duration / 4)
    for fault in data["faults"]:
        fault["at_s"] = round(fault["at_s"] * scale, 3)
    shorter = msgspec.convert(data, type=Scenario)
    problem = validate(shorter, external)
    if problem:
        raise ScenarioError(f"{source} (--duration {duration:g}): {problem}")
    return shorter


def run_scenario(scenario: Scenario, text: str, run_dir: Path, bootstrap: str | None, console: Console,
                 report: bool = True) -> int:
    console.print(f"[bold]{scenario.name}[/]: {scenario.duration_s:g} s of load, {len(scenario.faults)} fault(s); "
                  f"run directory [bold]{run_dir}[/]")
    experiment = Experiment(scenario, run_dir, text, bootstrap, console)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        try:
            outcome = runner.run(experiment.run())
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]: what was recorded is in the run directory")
            return 1
    ok = finish(outcome, console, report)
    return 0 if ok else 1


def finish(outcome: RunOutcome, console: Console, report: bool) -> bool:
    """Check the run, build its report, print the summary; True when everything held."""
    from loadtest.check import render, run_check

    result = None
    try:
        result = run_check(outcome.run_dir)
    except rundir.RunDirError as exc:
        outcome.notes.append(f"not checked: {exc}")
    page = None
    if report:
        try:
            from loadtest.report import build_report

            page = build_report(outcome.run_dir, console=console)
        except Exception as exc:  # the verdict stands without the report; say why it is missing
            outcome.notes.append(f"report not written: {str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}")
    print_summary(outcome, console)
    if result is not None:
        render(result, console)
    for note in outcome.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if page is not None:
        console.print(f"report: [bold]{page}[/]")
    console.print(f"run directory: [bold]{outcome.run_dir}[/]")
    return outcome.status == "complete" and not outcome.crashes and result is not None and result.ok


def print_summary(outcome: RunOutcome, console: Console) -> None:
    stats = outcome.stats
    table = Table(title=f"run: {outcome.status}, {outcome.wall_s:.0f} s", show_header=False, title_justify="left")
    table.add_column(style="dim")
    table.add_column()
    if stats is not None:
        consumer = stats.counts["delivery:consumer"]
        table.add_row("records", f"produced {stats.counts['produce']:,}; delivered to classic members "
                      f"{stats.counts['delivery:classic']:,}, "
                      + (f"to consumer-protocol members {consumer:,}, " if consumer else "")
                      + f"to share members {stats.counts['delivery:share']:,}")
        total = sum(stats.responses.values())
        retriable = sum(stats.retriable.values())
        transport = sum(stats.transport.values())
        failures = sum(stats.failures.values())
        table.add_row("requests", f"{total:,}; {retriable:,} answered with a retriable code, {transport:,} lost with "
                      f"their connection or timed out, {failures:,} failed"
                      + (f" ({', '.join(f'{k} {v}' for k, v in stats.failures.most_common(3))})" if failures else ""))
        table.add_row("rebalances", f"{stats.counts['rebalance_end']:,} member rebalances ended; "
                      f"{stats.counts['fenced']:,} share or consumer-protocol members fenced")
    for f in outcome.faults:
        recovered = outcome.recovered_ms.get(f.fault_id)
        groups = f" ({len(f.groups)} group(s) moved)" if f.groups else ""
        table.add_row(f"fault #{f.fault_id}",
                      f"{f.spec.action} {f.target}{groups}; "
                      + (f"everything it hit worked again after {recovered / 1000:.2f} s" if recovered is not None
                         else "no recovery observed"))
    console.print(table)


def load_info(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / rundir.RUN_JSON).read_text())
