"""python -m tests.fuzz --frames N [--seed S] [--bootstrap HOST:PORT]: the fuzz soak.

In-process (default) every frame goes to a fresh KafkaConnection and every property is checked
(exactly one Request or Close, no null reaching a handler, nothing escaping); with --bootstrap
the frames go to a running gateway over several connections, every advertised (API, version) in
turn, and the run fails if the gateway stops accepting connections or if a health probe (a client's
produce and read back, every partition led, every actor alive: tests/fuzz/health.py, every
--health-every seconds and once at the end) fails. Prints a summary table and frames/s.

    raygroups up --data-dir /tmp/fuzz-data        # in one shell: READY 127.0.0.1:9092
    python -m tests.fuzz --frames 1000000 --bootstrap 127.0.0.1:9092 --all-apis"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from cluster.gateway.apis import SUPPORTED
from tests.fuzz.frames import frames
from tests.fuzz.generate import every_api_version
from tests.fuzz.health import HealthWatch
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
    parser.add_argument("--health-every", type=float, default=5.0, help="with --bootstrap: seconds between health probes")
    parser.add_argument("--health-bound", type=float, default=10.0, help="with --bootstrap: seconds a probe may take")
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
            sent: collections.Counter = collections.Counter()

            def on_frame(_outcome: str) -> None:
                counter[0] += 1
                tick(counter[0])

            def counted(stream):
                for frame in stream:
                    sent[(frame.api_key, frame.api_version)] += 1
                    yield frame

            watch = HealthWatch(args.bootstrap, args.health_every, args.health_bound)
            watch.check_once()  # healthy before the first frame, or there is nothing to judge
            watch.start()
            try:
                outcomes = run_remote(args.bootstrap, counted(frames(args.seed, args.frames, apis, NAMES)),
                                      args.connections, args.timeout, on_frame, stop=watch.failed.is_set)
            finally:
                health = watch.stop()
            failures = list(health.failures)
            if counter[0] < args.frames and not failures:
                failures.append(f"only {counter[0]:,} of {args.frames:,} frames were sent")
            pairs = every_api_version(apis)
            missed = [p for p in pairs if not sent[p]]
            if missed and counter[0] >= len(pairs):
                failures.append(f"(API, version) pairs never sent: {missed[:5]}")
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
    if args.bootstrap:
        least = min((sent[p] for p in every_api_version(apis)), default=0)
        out.print(f"{len(sent)} advertised (API, version) pairs, each sent at least {least:,} times; {health.summary()}")
    out.print(f"{args.frames / elapsed:,.0f} frames/s over {elapsed:.1f} s; peak RSS grew {rss_grown:.0f} MiB; "
              f"{len(failures)} failures")
    for failure in failures[:20]:
        out.print(f"[red]FAIL[/red] {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
