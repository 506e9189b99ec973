"""`python -m loadtest.report RUN_DIR [--spark-master URL]`: the report without the CLI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from loadtest.experiment.rundir import RunDirError
from loadtest.report.build import build_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.report", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--spark-master", default=None, help="a Spark master URL (default local[2])")
    args = parser.parse_args(argv)
    console = Console()
    try:
        page = build_report(args.run_dir, args.spark_master, console)
    except RunDirError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2
    console.print(f"report: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
