"""`raygroups check RUN_DIR`: the invariants of docs/experiments.md, each a verdict with evidence.

Anomaly names follow Jepsen's Kafka workload where one applies (lost-write, duplicate). The
classic and the share duplicate checks are two verdicts, `duplicate` and `duplicate-share`,
because what explains a repeat differs: a rebalance before a commit, or an acknowledgement that
did not become durable.
"""

from __future__ import annotations

from pathlib import Path

from loadtest.check.classic import duplicate, nonmonotonic_commit
from loadtest.check.groups import failover_rebalance, unstable_group
from loadtest.check.render import render
from loadtest.check.rundata import RunData, load_run
from loadtest.check.share import delivery_count_exceeded, double_acquisition, duplicate_share, unfinished_share_record
from loadtest.check.verdict import CheckResult, Verdict
from loadtest.check.writes import incomplete_read, lost_write

INVARIANTS = (
    lost_write,
    duplicate,
    duplicate_share,
    nonmonotonic_commit,
    double_acquisition,
    delivery_count_exceeded,
    unfinished_share_record,
    unstable_group,
    failover_rebalance,
    incomplete_read,
)


def check_run(run: RunData) -> CheckResult:
    return CheckResult(run.run_dir, [invariant(run) for invariant in INVARIANTS])


def run_check(run_dir: Path) -> CheckResult:
    """Judge a run and write RUN_DIR/verdicts.json; RunDirError when the directory cannot be judged."""
    result = check_run(load_run(Path(run_dir)))
    result.write()
    return result


__all__ = ["CheckResult", "Verdict", "check_run", "render", "run_check", "INVARIANTS"]
