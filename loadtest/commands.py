"""The user's jobs as `raygroups` commands: experiment, check, report, demo (PROTOCOL.md §3).

`cluster.cli` finds this module through the `raygroups.commands` entry point, so the cluster
package never imports the load-test package (ARCHITECTURE.md's layers). Heavy imports (Ray,
pyarrow, PySpark) happen inside the commands, so `raygroups --help` stays quick.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

console = Console() if sys.stdout.isatty() else Console(width=160)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=160)


def fail(message: str, code: int = 2) -> None:
    # The message is text, not markup: "[dashboard]" or "[::1]:9092" must print as given.
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


# What each extra brings (pyproject.toml); a node that only runs the cluster has none of them.
EXTRAS = {
    "loadtest": ("pyarrow", "locust"),
    "report": ("pyspark", "matplotlib", "pyarrow"),
    "demo": ("pyarrow", "locust", "pyspark", "matplotlib"),
}


def require(command: str, extra: str) -> None:
    """Refuse a command whose extra is not installed, saying how to install it (rather than fail
    on an import deep inside it)."""
    missing = [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
    if missing:
        fail(f"`raygroups {command}` needs the '{extra}' extra ({', '.join(missing)} missing): "
             f"pip install 'raygroups[{extra}]'")


def register(app: typer.Typer) -> None:
    app.command()(experiment)
    app.command()(check)
    app.command()(report)
    app.command()(demo)


def experiment(
    scenario: Path = typer.Argument(..., help="the scenario file (TOML; examples/demo.toml shows every key)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", envvar="RAYGROUPS_OUT", help="run directory (default: runs/<scenario>-<time>)"),
    bootstrap: Optional[str] = typer.Option(None, "--bootstrap", "-b", envvar="RAYGROUPS_BOOTSTRAP",
                                            help="use this running cluster instead of starting one"),
    duration: Optional[float] = typer.Option(None, "--duration", envvar="RAYGROUPS_DURATION", help="override the scenario's duration_s"),
    no_report: bool = typer.Option(False, "--no-report", envvar="RAYGROUPS_NO_REPORT", help="skip the PySpark report at the end"),
) -> None:
    """Run a scenario's load with its faults, write RUN_DIR, check it and report on it (exit 1 on a violation)."""
    require("experiment", "loadtest" if no_report else "demo")
    from loadtest.experiment.command import run_experiment
    from loadtest.experiment.scenario import ScenarioError

    try:
        code = run_experiment(scenario, out, bootstrap, duration, console, report=not no_report)
    except ScenarioError as exc:
        fail(str(exc))
    raise typer.Exit(code)


def check(run_dir: Path = typer.Argument(..., help="a run directory written by `raygroups experiment`")) -> None:
    """Judge a run against the invariants (lost writes, duplicates, ...); exit 1 on any violation."""
    require("check", "loadtest")
    from loadtest.check import render, run_check
    from loadtest.experiment.rundir import RunDirError

    try:
        result = run_check(run_dir)
    except RunDirError as exc:
        fail(str(exc))
    render(result, console)
    raise typer.Exit(0 if result.ok else 1)


def report(
    run_dir: Path = typer.Argument(..., help="a run directory written by `raygroups experiment`"),
    spark_master: Optional[str] = typer.Option(None, "--spark-master", envvar="RAYGROUPS_SPARK_MASTER", help="a Spark master URL (default: local)"),
) -> None:
    """Analyse a run with PySpark: RUN_DIR/report/index.html with plots, verdicts and tables."""
    require("report", "report")
    from loadtest.experiment.rundir import RunDirError
    from loadtest.report import build_report

    try:
        page = build_report(run_dir, spark_master=spark_master, console=console)
    except RunDirError as exc:
        fail(str(exc))
    console.print(f"report: [bold]{page}[/]")


def demo(
    duration: Optional[float] = typer.Option(None, "--duration", envvar="RAYGROUPS_DURATION", help="seconds of load (default 90)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", envvar="RAYGROUPS_OUT", help="run directory (default: a new temporary one)"),
) -> None:
    """The main job: a mixed classic + share load on an embedded cluster, four faults, the check and the report."""
    require("demo", "demo")
    from loadtest.demo import run_demo
    from loadtest.experiment.scenario import ScenarioError

    try:
        code = run_demo(duration=duration, out=out, console=console)
    except ScenarioError as exc:
        fail(str(exc))
    raise typer.Exit(code)
