"""Unloaded round trips (latency.py measures; this pins and prints): raygroups against a peer in
the same run, each system on the server's cores and the client on the others."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from loadtest.bench import pinning
from loadtest.bench.app import JSON, ROUNDS, app
from loadtest.bench.compare import Figure, best_of, report
from loadtest.bench.systems import NO_INITIAL_DELAY, console, peers, starter

SERVER_CPUS = typer.Option(None, "--server-cpus", help="CPUs for the system under test, e.g. 0 (default: the first half)")
CLIENT_CPUS = typer.Option(None, "--client-cpus", help="CPUs for the client, e.g. 1 (default: the rest)")
APIS = {"api_versions": "ApiVersions", "metadata": "Metadata (1 topic)", "heartbeat": "Heartbeat",
        "produce": "Produce, 1 record, acks=all (raygroups fsyncs)", "commit": "OffsetCommit (raygroups fsyncs)",
        "share_fetch": "ShareFetch of 1 record, accepting the previous one", "join": "JoinGroup-to-Stable, 1 member"}


def _pinned(placement: Any, workload: Any) -> Any:
    """The workload with the system (every process this one started) on the server's cores and
    this process, the client, on the client's (Placement.pin); its own cores back afterwards."""
    def run(name: str, bootstrap: str) -> dict[str, float]:
        mine = os.sched_getaffinity(0)
        placement.pin()
        try:
            return workload(bootstrap)
        finally:
            if placement.cores is not None:
                pinning.pin(os.getpid(), frozenset(mine))
    return run


@app.command("latency")
def latency(
    samples: int = typer.Option(2000, help="timed round trips of each API (after 200 untimed; JoinGroup-to-Stable "
                                "a tenth of them)"),
    peer: str = typer.Option("tansu", "--peer", help="tansu, responder, both, none"),
    rounds: int = ROUNDS,
    gap_ms: float = typer.Option(0.0, "--gap-ms", help="wait this long before each request (sparse requests: "
                                 "every process has gone idle; use fewer --samples)"),
    server_cpus: str | None = SERVER_CPUS,
    client_cpus: str | None = CLIENT_CPUS,
    json_out: Path | None = JSON,
) -> None:
    """Unloaded round trips (one connection, one request at a time): p50/p99/p999 of ApiVersions,
    Metadata, Heartbeat, Produce (acks=all), OffsetCommit, ShareFetch with acknowledgements and
    JoinGroup-to-Stable, raygroups against a peer, the system pinned to the server's cores and the
    client to its own."""
    from loadtest.bench.latency import QUANTILES, unloaded_round_trips
    from loadtest.bench.protocols import Placement

    placement = Placement(pinning.split(server_cpus, client_cpus))
    chosen = [] if peer == "none" else peers(peer)
    systems = {name: starter(name, 1, **NO_INITIAL_DELAY) for name in [*chosen, "raygroups"]}
    figures = [Figure(f"{api}_{q}_ms", f"{label} {q}", higher_is_better=False, unit=" ms")
               for api, label in APIS.items() for q in QUANTILES]
    results = best_of(systems, _pinned(placement, lambda b: unloaded_round_trips(b, samples, gap_s=gap_ms / 1000)),
                      figures, rounds)
    spacing = f", {gap_ms:g} ms apart" if gap_ms else ""
    report(f"unloaded round trips, {samples:,} of each API (JoinGroup-to-Stable {max(20, samples // 10):,}) on one "
           f"connection{spacing}, best of {rounds}; "
           f"{placement.describe()}",
           results, figures, json_out, placement=placement.describe(), samples=samples)
    console.print("p50/p99/p999: nearest-rank quantiles of one request's round trip, its last byte sent to its "
                  "answer's last byte read (lower is better). ShareFetch fails where the broker serves no share "
                  "groups (tansu 0.6); JoinGroup-to-Stable where it holds a Stable member's JoinGroup past 10 s "
                  "(tansu 0.6 holds it for over a minute)")


@app.command("latency-at-load")
def latency_at_load(
    members: int = typer.Option(2000, help="Stable classic members (light clients)"),
    groups: int = typer.Option(200, help="the groups they are in"),
    heartbeat_ms: int = typer.Option(3000, help="each member's heartbeat interval"),
    commit_ms: int = typer.Option(5000, help="each member's commit interval (its position)"),
    seconds: float = typer.Option(30.0, help="the measured window, after every member is Stable"),
    peer: str = typer.Option("tansu", "--peer", help="tansu, none"),
    rounds: int = ROUNDS,
    processes: int = typer.Option(1, "--processes", help="client processes the members run in"),
    server_cpus: str | None = SERVER_CPUS,
    client_cpus: str | None = CLIENT_CPUS,
    json_out: Path | None = JSON,
) -> None:
    """p50/p99/p999 of Heartbeat and OffsetCommit at a fixed offered load (2,000 members heartbeating
    every 3 s and committing every 5 s by default), raygroups against a peer in the same run, the
    system pinned to the server's cores and the client to its own."""
    import asyncio

    from loadtest.bench.groups import latency_at_load as measure
    from loadtest.bench.latency import QUANTILES
    from loadtest.bench.protocols import Placement

    placement = Placement(None if server_cpus == "none" else pinning.split(server_cpus, client_cpus))
    chosen = [] if peer == "none" else peers(peer)
    systems = {name: starter(name, 10, **NO_INITIAL_DELAY) for name in [*chosen, "raygroups"]}
    figures = [Figure(f"{api}_{q}_ms", f"{label} {q}", higher_is_better=False, unit=" ms")
               for api, label in (("heartbeat", "Heartbeat"), ("commit", "OffsetCommit (raygroups fsyncs)"))
               for q in QUANTILES]
    figures += [Figure("heartbeat_rps", "heartbeats/s answered"), Figure("commit_rps", "OffsetCommits/s answered"),
                Figure("server_cores", "server cores busy", higher_is_better=False),
                Figure("client_cores", "client cores busy", higher_is_better=False)]
    results = best_of(systems, lambda _n, b: asyncio.run(
        measure(b, members, groups, seconds, heartbeat_ms, commit_ms, processes, placement)), figures, rounds)
    client_limit = 0.8 * (len(placement.cores.client) if placement.cores else processes)
    bound = [name for name, got in results.items() if got.get("client_cores", 0) > client_limit]
    report(f"latency at a fixed load: {members:,} members in {groups} groups, a heartbeat every {heartbeat_ms} ms and a "
           f"commit every {commit_ms} ms each, {seconds:g} s measured, best of {rounds}; {placement.describe()}",
           results, figures, json_out, placement=placement.describe(), client_bound=bound)
    console.print("quantiles: nearest rank over every round trip in the window, request sent to answer read, "
                  "as the members saw them (lower is better)")
    if bound:
        console.print(f"[yellow]client-bound (the client above 80% of its cores):[/] {', '.join(bound)}")
