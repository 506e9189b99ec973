"""The simulation as a command: a soak over many seeds, or one seed replayed with its trace.

    python -m tests.sim --seeds 5000            # seeds 0..4999, a progress bar, a summary table
    python -m tests.sim --seed 1234 -v          # replay one seed exactly, printing every step
"""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from tests.sim.world import Violation, World, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to run (from --start)")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--steps", type=int, default=400, help="steps per seed")
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument("-v", "--verbose", action="store_true", help="with --seed: print every step")
    args = parser.parse_args(argv)
    console = Console()
    if args.seed is not None:
        world = World(args.seed)
        try:
            for n in range(args.steps):
                before = len(world.trace)
                world.step()
                if args.verbose:
                    for line in world.trace[before:]:
                        console.print(f"[dim]{n:4}[/] {line}", highlight=False)
                world.check()
        except Violation as exc:
            console.print(f"[red]seed {args.seed}, step {n}: {exc}")
            return 1
        finally:
            world.close()
        console.print(f"[green]seed {args.seed}: {args.steps} steps, every invariant held")
        return 0
    failures: list[tuple[int, str]] = []
    started = time.perf_counter()
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console) as progress:
        task = progress.add_task("seeds", total=args.seeds)
        for seed in range(args.start, args.start + args.seeds):
            try:
                run(seed, args.steps)
            except Violation as exc:
                failures.append((seed, str(exc).splitlines()[0]))
            progress.advance(task)
    elapsed = time.perf_counter() - started
    table = Table(title=f"{args.seeds} seeds x {args.steps} steps in {elapsed:.1f} s ({args.seeds / elapsed:.1f} seeds/s)")
    table.add_column("seed", justify="right")
    table.add_column("first broken invariant")
    for seed, text in failures[:50]:
        table.add_row(str(seed), text)
    console.print(table if failures else f"[green]{table.title}: every invariant held")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
