"""`raygroups report RUN_DIR`: a PySpark analysis of an experiment's run directory as one HTML page.

The page (`RUN_DIR/report/index.html`), its plots and the aggregated tables it is made from are
described in docs/experiments.md. This package imports neither pyspark nor matplotlib until
`build_report` runs, so the CLI pays for them only when it reports.
"""

from __future__ import annotations

from loadtest.report.build import build_report

__all__ = ["build_report"]
