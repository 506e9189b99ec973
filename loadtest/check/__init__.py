"""`raygroups check RUN_DIR`: the invariants of docs/experiments.md, each a verdict with evidence.

One module per concept: `rundata` reads the run once (the event log split by kind in Arrow),
`verdict`/`result` are what the checks return and `verdicts.json`, `render` the screen, and each
invariant is one function:

| verdict | function |
|---|---|
| lost-write, incomplete-read | writes.lost_write, writes.incomplete_read |
| duplicate (classic and consumer groups) | classic.duplicate |
| duplicate-share (share) | share_duplicate.duplicate_share |
| nonmonotonic-commit | commits.nonmonotonic_commit |
| double-acquisition | acquisition.double_acquisition |
| delivery-count-exceeded | delivery_count.delivery_count_exceeded |
| unfinished-share-record | unfinished.unfinished_share_record |
| unstable-group | groups.unstable_group |
| failover-rebalance | failover.failover_rebalance |
| double-ownership (consumer groups) | ownership.double_ownership |

The two duplicate invariants are two verdicts, `duplicate` (classic, and consumer-protocol
groups, which read and commit by offset the same way) and `duplicate-share`:
what explains a repeat differs (a rebalance before the commit; an acknowledgement that did not
succeed), and so does the evidence, and a reader of `verdicts.json` sees at once which kind of
group re-read a record. `duplicate` keeps Jepsen's name for the classic case.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from loadtest.check.acquisition import double_acquisition
from loadtest.check.classic import duplicate
from loadtest.check.commits import nonmonotonic_commit
from loadtest.check.delivery_count import delivery_count_exceeded
from loadtest.check.failover import failover_rebalance
from loadtest.check.groups import unstable_group
from loadtest.check.ownership import double_ownership
from loadtest.check.render import render
from loadtest.check.result import CheckResult
from loadtest.check.rundata import RunData, load_run
from loadtest.check.share_duplicate import duplicate_share
from loadtest.check.unfinished import unfinished_share_record
from loadtest.check.verdict import Verdict
from loadtest.check.writes import incomplete_read, lost_write

INVARIANTS: tuple[Callable[[RunData], Verdict], ...] = (
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
    double_ownership,
)


def check_run(run: RunData) -> CheckResult:
    return CheckResult(run.run_dir, [invariant(run) for invariant in INVARIANTS], list(run.notes))


def run_check(run_dir: Path) -> CheckResult:
    """Judge RUN_DIR and write RUN_DIR/verdicts.json; RunDirError when it cannot be judged."""
    result = check_run(load_run(Path(run_dir)))
    result.write()
    return result


__all__ = ["INVARIANTS", "CheckResult", "RunData", "Verdict", "check_run", "load_run", "render", "run_check"]
