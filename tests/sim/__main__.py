"""The simulation as a command: a soak over many seeds, or one seed replayed with its trace.

    python -m tests.sim --seeds 5000            # seeds 0..4999, a progress bar, a summary table
    python -m tests.sim --seed 1234 -v          # replay one seed exactly, printing every step
    python -m tests.sim --kind share --seeds 2000 [--retention]   # the share side (or --kind all)
    python -m tests.sim --kind coordinator --seeds 2000           # the composed coordinator side
    python -m tests.sim --kind replication --seeds 5000           # replicated partitions (issue 25)
    python -m tests.sim --kind log-replication --seeds 500        # the same on real logs (slower)
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from tests.sim import coordinator_world, harness, log_replication_world, replication_world, share_world, world

DEFAULT_STEPS = {"group": 400, "share": 300, "coordinator": 400, "replication": 1000, "log-replication": 400}
KINDS = tuple(DEFAULT_STEPS)


def _make(kind: str, seed: int, retention: bool):
    if kind == "log-replication":
        return log_replication_world.LogReplicationWorld(seed, Path(tempfile.mkdtemp(prefix="raygroups-sim-")))
    if kind == "replication":
        return replication_world.ReplicationWorld(seed)
    if kind == "coordinator":
        return coordinator_world.CoordinatorWorld(seed)
    return world.World(seed) if kind == "group" else share_world.ShareWorld(seed, retention=retention)


def _run(kind: str, seed: int, steps: int, retention: bool) -> dict[str, int]:
    """One seed; what it saw worth counting (the coordinator side's same-epoch re-initializes, and
    what its consumer-protocol members reached)."""
    if kind == "replication":
        return replication_world.run(seed, steps).counts
    if kind == "log-replication":
        with tempfile.TemporaryDirectory(prefix="raygroups-sim-") as root:
            return log_replication_world.run(seed, Path(root), steps).counts
    if kind == "group":
        world.run(seed, steps)
    elif kind == "share":
        share_world.run(seed, steps, retention=retention)
    else:
        sim = coordinator_world.run(seed, steps)
        return {"assigned worlds": int(sim.assigned() > 0), "same-epoch re-initializes": len(sim.reinitialized),
                **sim.coverage()}
    return {}


def replay(kind: str, seed: int, steps: int, verbose: bool, retention: bool, console: Console) -> int:
    sim = _make(kind, seed, retention)
    try:
        for n in range(steps):
            before = len(sim.trace)
            sim.step()
            if verbose:
                for line in sim.trace[before:]:
                    console.print(f"[dim]{n:4}[/] {line}", highlight=False)
            sim.check()
        if kind in ("replication", "log-replication"):
            before = len(sim.trace)
            sim.heal_and_converge()
            if verbose:
                for line in sim.trace[before:]:
                    console.print(f"[dim]heal[/] {line}", highlight=False)
    except harness.Violation as exc:
        console.print(f"[red]{kind} seed {seed}, step {n}: {exc}")
        return 1
    finally:
        sim.close()
    console.print(f"[green]{kind} seed {seed}: {steps} steps, every invariant held")
    return 0


def soak(kind: str, start: int, seeds: int, steps: int, retention: bool, console: Console) -> int:
    failures: list[tuple[int, str]] = []
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console) as progress:
        task = progress.add_task(f"{kind} seeds", total=seeds)
        for seed in range(start, start + seeds):
            try:
                counts.update(_run(kind, seed, steps, retention))
            except harness.Violation as exc:
                failures.append((seed, str(exc).splitlines()[0]))
            progress.advance(task)
    elapsed = time.perf_counter() - started
    table = Table(title=f"{kind}: {seeds} seeds x {steps} steps in {elapsed:.1f} s ({seeds / elapsed:.1f} seeds/s)")
    table.add_column("seed", justify="right")
    table.add_column("first broken invariant")
    for seed, text in failures[:50]:
        table.add_row(str(seed), text)
    console.print(table if failures else f"[green]{table.title}: every invariant held")
    for what, n in sorted(counts.items()):
        console.print(f"  {what}: {n}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=(*KINDS, "all"), default="group", help="which coordinator side")
    parser.add_argument("--share", action="store_const", const="share", dest="kind", help="same as --kind share")
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to run (from --start)")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--steps", type=int, help="steps per seed (default: 400 group, 300 share, 400 coordinator)")
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument("--retention", action="store_true", help="share: let retention move the log start")
    parser.add_argument("-v", "--verbose", action="store_true", help="with --seed: print every step")
    args = parser.parse_args(argv)
    # Failed share-state writes are expected here by the thousand; their warnings would bury the table.
    # (and failed loads, which the reconciler logs as errors, by the hundred)
    logging.getLogger("cluster").setLevel(logging.CRITICAL)
    console = Console()
    kinds = KINDS if args.kind == "all" else (args.kind,)
    code = 0
    for kind in kinds:
        steps = args.steps or DEFAULT_STEPS[kind]
        if args.seed is not None:
            code |= replay(kind, args.seed, steps, args.verbose, args.retention, console)
        else:
            code |= soak(kind, args.start, args.seeds, steps, args.retention, console)
    return code


if __name__ == "__main__":
    sys.exit(main())
