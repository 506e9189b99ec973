"""How many classic members locust workers sustain, against raygroups and the do-nothing responder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from loadtest.bench.app import JSON, app
from loadtest.bench.systems import NO_INITIAL_DELAY, console, raygroups, responder


@app.command("locust-capacity")
def locust_capacity(
    steps: str = typer.Option("250,500,1000,2000,3000", help="classic members per step, comma-separated"),
    workers: str = typer.Option("1,2", help="locust worker processes per step (1: a single process)"),
    seconds: float = typer.Option(30.0, help="steady-state seconds measured per step, after spawning"),
    json_out: Path | None = JSON,
) -> None:
    """Classic members (heartbeats every 3 s) that locust workers sustain with Heartbeat p99 < 100 ms,
    against raygroups and against the do-nothing responder (the locust processes' own limit)."""
    from loadtest.bench.locust_steps import MEMBERS_PER_GROUP, PARTITIONS, run_step

    results: list[dict[str, Any]] = []
    targets = (("responder", lambda: responder(PARTITIONS, group_size=MEMBERS_PER_GROUP)),
               ("raygroups", lambda: raygroups(**NO_INITIAL_DELAY)))
    for target, start in targets:
        with start() as bootstrap:
            for n_workers in (int(w) for w in workers.split(",")):
                for users in (int(u) for u in steps.split(",")):
                    with console.status(f"{target}: {users} members on {n_workers} locust worker(s)…"):
                        step = run_step(bootstrap, users, n_workers, seconds, prefix=f"cap-{target}-{n_workers}-{users}")
                    step["target"] = target
                    results.append(step)
                    console.print(f"{target}, {n_workers} worker(s), {users} members: heartbeat p99 "
                                  f"{step['heartbeat_p99_ms']:.0f} ms, {step['heartbeats_per_s']:.0f}/s, "
                                  f"{step['failures']} failures")
                    if step["heartbeat_p99_ms"] >= 100:
                        break  # past the bound: larger steps only get worse
    table = Table(title="classic members sustained with Heartbeat p99 < 100 ms (heartbeats every 3 s)")
    for col in ("locust workers", "responder (limit)", "raygroups", "raygroups / responder"):
        table.add_column(col, justify="right")
    for n_workers in sorted({r["workers"] for r in results}):
        best = {t: max((r["users"] for r in results if r["target"] == t and r["workers"] == n_workers
                        and r["heartbeat_p99_ms"] < 100 and r["failures"] == 0), default=0) for t, _ in targets}
        ratio = best["raygroups"] / best["responder"] if best["responder"] else float("nan")
        table.add_row(str(n_workers), f"{best['responder']:,}", f"{best['raygroups']:,}", f"{ratio:.2f}")
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))


