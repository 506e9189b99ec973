"""`build_report`: run dir -> Spark aggregations -> tables, plots -> `report/index.html`.

pyspark and matplotlib are imported inside `build_report` (through the modules it imports), so
importing this module, and the CLI that does, stays cheap.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from loadtest.experiment import rundir
from loadtest.experiment.rundir import RunDirError
from loadtest.report.facts import RunFacts

if TYPE_CHECKING:
    from rich.console import Console

INDEX = "index.html"
SPARK_LOG = "spark.log"
STEPS = 7


def build_report(run_dir: Path, spark_master: str | None = None, console: Console | None = None) -> Path:
    """Analyse the run directory with Spark and write `RUN_DIR/report/index.html`; returns its path.

    `spark_master` is any Spark master URL (default `local[2]`); on a cluster, the run directory
    must be readable and the report folder writable at the same path on every executor.
    Raises RunDirError when the run directory is missing or lacks run.json or the event log.
    """
    from loadtest.report.analysis import analyse
    from loadtest.report.page import render
    from loadtest.report.progress import Steps
    from loadtest.report.session import report_session
    from loadtest.report.verdicts import load_verdicts

    started = time.monotonic()
    run_dir = rundir.require_run_dir(Path(run_dir))
    info = rundir.load_run_info(run_dir)
    if not isinstance(info, dict):
        raise RunDirError(f"{run_dir / rundir.RUN_JSON}: not a JSON object")
    facts = RunFacts(run_dir, info)
    out = _fresh_report_dir(run_dir)
    steps = Steps(console, STEPS)
    checked = (run_dir / rundir.VERDICTS).is_file()
    with steps.step("reading verdicts.json" if checked else "checking the run (it has no verdicts.json)"):
        verdicts = load_verdicts(run_dir)
    with contextlib.ExitStack() as stack:
        with steps.step("starting Spark"):
            spark = stack.enter_context(report_session(spark_master, out / SPARK_LOG))
        page = analyse(spark, facts, verdicts, out, steps)
        with steps.step("writing the page"):
            tmp = out / f"{INDEX}.tmp"
            tmp.write_text(render(page))
            tmp.rename(out / INDEX)  # a reader never sees half a page
    if console is not None:
        console.print(f"report written in {time.monotonic() - started:.1f} s: {out / INDEX}", highlight=False)
    return out / INDEX


def _fresh_report_dir(run_dir: Path) -> Path:
    """`report/` without the plots and tables of an earlier build (a section may have none now)."""
    out = run_dir / rundir.REPORT
    out.mkdir(exist_ok=True)
    for pattern in ("*.png", "*.svg", INDEX):
        for path in out.glob(pattern):
            path.unlink()
    tables = out / "tables"
    if tables.is_dir():
        shutil.rmtree(tables)
    return out
