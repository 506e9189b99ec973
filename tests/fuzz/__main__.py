"""python -m tests.fuzz --frames N [--seed S] [--bootstrap HOST:PORT]: the fuzz soak.

In-process (default) every frame goes to a fresh KafkaConnection and every property is checked
(exactly one Request or Close, no null reaching a handler, nothing escaping); with --bootstrap
the frames go to a running gateway over several connections and the run fails if the gateway
stops accepting connections. Prints a summary table and frames/s."""

from __future__ import annotations

import argparse
import resource
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from cluster.gateway.apis import SUPPORTED
from tests.fuzz.frames import frames
from tests.fuzz.outcomes import Tally, feed
from tests.fuzz.remote import BOMBS, NAMES, run_remote


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", help="HOST:PORT of a running gateway (default: in-process)")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=1.0, help="seconds to wait for each answer")
    parser.add_argument("--all-apis", action="store_true", help="with --bootstrap, include CreateTopics/CreatePartitions")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]fuzz"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]} frames/s"),
        TimeRemainingColumn(), console=console,
    )
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with progress:
        task = progress.add_task("fuzz", total=args.frames, rate="-")

        def tick(done: int) -> None:
            if done % 1000 == 0 or done == args.frames:
                rate = done / max(time.monotonic() - started, 1e-9)
                progress.update(task, completed=done, rate=f"{rate:,.0f}")

        if args.bootstrap:
            apis = None if args.all_apis else set(SUPPORTED) - BOMBS
            counter = [0]

            def on_frame(_outcome: str) -> None:
                counter[0] += 1
                tick(counter[0])

            outcomes = run_remote(
                args.bootstrap, frames(args.seed, args.frames, apis, NAMES), args.connections, args.timeout, on_frame
            )
            failures: list[str] = []
        else:
            tally = Tally()
            for i, frame in enumerate(frames(args.seed, args.frames), 1):
                feed(frame, tally)
                tick(i)
            outcomes, failures = tally.outcomes, tally.failures
    elapsed = time.monotonic() - started
    table = Table(title=f"{args.frames:,} frames, seed {args.seed}, "
                        f"{'gateway ' + args.bootstrap if args.bootstrap else 'in-process'}")
    table.add_column("outcome")
    table.add_column("frames", justify="right")
    table.add_column("share", justify="right")
    total = sum(outcomes.values()) or 1
    for outcome, n in outcomes.most_common():
        table.add_row(outcome, f"{n:,}", f"{100 * n / total:.1f}%")
    out = Console()
    out.print(table)
    rss_grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    out.print(f"{args.frames / elapsed:,.0f} frames/s over {elapsed:.1f} s; peak RSS grew {rss_grown:.0f} MiB; "
              f"{len(failures)} failures")
    for failure in failures[:20]:
        out.print(f"[red]FAIL[/red] {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
