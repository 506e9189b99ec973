"""Produce, fetch, round trips and classic groups: raygroups against its peers in the same run."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import typer
from rich.table import Table

from loadtest.bench.app import JSON, PEER, ROUNDS, app
from loadtest.bench.compare import Figure, best_of, report
from loadtest.bench.systems import NO_INITIAL_DELAY, console, peers, starter

PROCESSES = typer.Option(1, "--processes", help="client processes the light members run in (spawned; rates summed)")


def _systems(peer: str, partitions: int = 10, **settings: object) -> dict:
    chosen = [] if peer == "none" else peers(peer)
    return {name: starter(name, partitions, **settings) for name in [*chosen, "raygroups"]}


@app.command("produce-fetch")
def produce_fetch(
    records: int = typer.Option(60_000, help="records per run (a multiple of 100 per partition)"),
    partitions: int = 6,
    value_bytes: int = 100,
    peer: str = PEER,
    rounds: int = ROUNDS,
    client: str = typer.Option("confluent", "--client", help="confluent (confluent-kafka, Python), kcat "
                               "(librdkafka's C client) or light (pre-encoded requests, pipelined: a client "
                               "that is not the limit)"),
    server_cpus: str | None = typer.Option(None, "--server-cpus", help="CPUs for the system under test (default: "
                                           "the first half); `none`: nothing pinned"),
    client_cpus: str | None = typer.Option(None, "--client-cpus", help="CPUs for the load client (default: the rest)"),
    json_out: Path | None = JSON,
) -> None:
    """Records/s produced (acks=all) and fetched (assign()) by confluent-kafka, kcat or the light
    client, raygroups vs a peer, each system pinned to the server's cores and the client to its own."""
    from loadtest.bench import kcat, pinning, pipelined
    from loadtest.bench.clients import produce_fetch_rates
    from loadtest.bench.protocols import Placement

    if client not in ("confluent", "kcat", "light"):
        raise typer.BadParameter("--client is confluent, kcat or light")
    if client == "kcat" and kcat.available() is None:
        console.print(f"[yellow]{kcat.MISSING}[/]")
        raise typer.Exit(2)
    records -= records % (100 * partitions)
    placement = Placement(None if server_cpus == "none" else pinning.split(server_cpus, client_cpus))
    figures = [Figure("produce_rps", "produced records/s (acks=all)"), Figure("fetch_rps", "fetched records/s (assign())"),
               Figure("produce_client_cores", "client cores busy (produce)", higher_is_better=False),
               Figure("fetch_client_cores", "client cores busy (fetch)", higher_is_better=False)]
    if client in ("kcat", "light"):
        figures += [Figure("produce_server_cores", "server cores busy (produce)", higher_is_better=False),
                    Figure("fetch_server_cores", "server cores busy (fetch)", higher_is_better=False),
                    Figure("produce_per_server_core", "produced records per server CPU second"),
                    Figure("fetch_per_server_core", "fetched records per server CPU second")]

    def run(_name: str, bootstrap: str) -> dict[str, float]:
        placement.pin()
        if client == "kcat":
            return kcat.produce_fetch_rates(bootstrap, f"bench-{time.monotonic_ns()}", records, partitions, value_bytes,
                                            placement.cores.client if placement.cores else None,
                                            placement.server_pids())
        if client == "light":
            return pipelined.produce_fetch_rates(bootstrap, f"bench-{time.monotonic_ns()}", records, partitions,
                                                 value_bytes, placement.server_pids())
        return produce_fetch_rates(bootstrap, "bench", records, partitions, value_bytes)

    results = best_of(_systems(peer, partitions), run, figures, rounds)
    _report_per_core(f"produce/fetch with {client}, {records:,} records of {value_bytes} B over {partitions} "
                     f"partitions, best of {rounds}", results, figures, json_out, placement, ("produce", "fetch"), 1)


@app.command("api-roundtrips")
def api_roundtrips(
    seconds: float = 5.0,
    connections: int = 8,
    peer: str = PEER,
    rounds: int = ROUNDS,
    json_out: Path | None = JSON,
) -> None:
    """ApiVersions and Metadata round trips per second (sequential per connection), raygroups vs a peer."""
    from loadtest.bench.clients import api_rates

    figures = [Figure("api_versions_rps", "ApiVersions/s"), Figure("metadata_rps", "Metadata (1 topic)/s")]
    results = best_of(_systems(peer, 6), lambda _n, b: api_rates(b, seconds, connections), figures, rounds)
    report(f"request round trips, {connections} connections × {seconds:g} s, best of {rounds}", results, figures, json_out)


@app.command("group-requests")
def group_requests(
    members: int = 1000,
    groups: int = 100,
    seconds: float = 5.0,
    peer: str = PEER,
    rounds: int = ROUNDS,
    processes: int = PROCESSES,
    server_cpus: str | None = typer.Option(None, "--server-cpus", help="CPUs for the system under test (default: "
                                           "the first half); `none`: nothing pinned"),
    client_cpus: str | None = typer.Option(None, "--client-cpus", help="CPUs for the load client (default: the rest)"),
    json_out: Path | None = JSON,
) -> None:
    """Heartbeats/s and OffsetCommits/s from light members in Stable groups, raygroups vs a peer,
    per core: each system pinned to the server's cores, the client to its own."""
    from loadtest.bench import pinning
    from loadtest.bench.groups import group_request_rates
    from loadtest.bench.protocols import Placement

    placement = Placement(None if server_cpus == "none" else pinning.split(server_cpus, client_cpus))
    figures = [Figure("heartbeat_rps", "heartbeats/s"), Figure("commit_rps", "OffsetCommits/s"),
               # the client's own cost: rate × this / 1e6 is the cores it spends; near --processes, the client is the limit
               Figure("heartbeat_client_us", "client CPU µs per heartbeat", higher_is_better=False),
               Figure("commit_client_us", "client CPU µs per OffsetCommit", higher_is_better=False),
               Figure("heartbeat_client_cores", "client cores busy (heartbeats)", higher_is_better=False),
               Figure("commit_client_cores", "client cores busy (commits)", higher_is_better=False),
               Figure("heartbeat_server_cores", "server cores busy (heartbeats)", higher_is_better=False),
               Figure("commit_server_cores", "server cores busy (commits)", higher_is_better=False)]
    results = best_of(_systems(peer, **NO_INITIAL_DELAY),
                      lambda _n, b: asyncio.run(group_request_rates(b, members, groups, seconds, processes, placement)),
                      figures, rounds)
    _report_per_core(f"group requests, {members} members in {groups} groups, closed loop, {seconds:g} s each, "
                     f"{processes} client process(es), best of {rounds}", results, figures, json_out, placement,
                     ("heartbeat", "commit"), processes)


def _report_per_core(title: str, results: dict, figures: list[Figure], json_out: Path | None, placement,
                     phases: tuple[str, ...], processes: int) -> None:
    """The table, with where each side ran; a phase whose client was above 80% of its cores (of its
    processes where nothing is pinned) is labelled client-bound, for either system."""
    client_limit = 0.8 * (len(placement.cores.client) if placement.cores else processes)
    bound = [f"{name} ({phase})" for name, got in results.items() for phase in phases
             if got.get(f"{phase}_client_cores", 0) > client_limit]
    report(f"{title}; {placement.describe()}", results, figures, json_out, placement=placement.describe(),
           client_bound=bound)
    if bound:
        console.print(f"[yellow]client-bound (the client above 80% of its cores):[/] {', '.join(bound)}: "
                      "those rates measure the client, not the system")


@app.command("heartbeat-scaling")
def heartbeat_scaling(
    groups: str = typer.Option("100,1000,10000", help="groups held by the coordinators, comma-separated"),
    members: int = typer.Option(1000, help="closed-loop members heartbeating"),
    active_groups: int = typer.Option(100, help="the groups they are in; the rest hold one idle member each"),
    seconds: float = 5.0,
    peer: str = typer.Option("none", "--peer", help="none, responder, tansu, both"),
    rounds: int = ROUNDS,
    processes: int = PROCESSES,
    json_out: Path | None = JSON,
) -> None:
    """Cost of one heartbeat (µs of the whole system per heartbeat, 1 / rate) as the groups held grow."""
    from loadtest.bench.groups import heartbeat_cost

    sizes = [int(g) for g in groups.split(",")]
    results: dict[int, dict[str, dict[str, float]]] = {}
    figure = [Figure("us_per_heartbeat", "µs per heartbeat", higher_is_better=False)]
    for size in sizes:
        results[size] = best_of(
            _systems(peer, **NO_INITIAL_DELAY),
            lambda _n, b, size=size: asyncio.run(heartbeat_cost(b, size, members, active_groups, seconds, processes)),
            figure, rounds)
    table = Table(title=f"per-heartbeat cost, {members} members beating in {active_groups} groups, "
                        f"{processes} client process(es), best of {rounds}")
    table.add_column("groups held", justify="right")
    names = list(results[sizes[0]])
    for n in names:
        table.add_column(f"{n} µs", justify="right")
        table.add_column(f"{n} growth", justify="right")
    for size in sizes:
        row = [f"{size:,}"]
        for n in names:
            cost, first = results[size][n]["us_per_heartbeat"], results[sizes[0]][n]["us_per_heartbeat"]
            row += [f"{cost:,.1f}", f"{cost / first:.2f}×"]
        table.add_row(*row)
    table.caption = "growth: cost / cost at the fewest groups (lower is better; target ≤ 1.2×)"
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps({str(k): v for k, v in results.items()}, indent=2))


@app.command()
def rebalance(
    sizes: str = typer.Option("10,100,1000", help="group sizes, comma-separated"),
    peer: str = typer.Option("none", "--peer", help="none, tansu (the responder forms no real groups)"),
    rounds: int = typer.Option(1, "--rounds", help="runs per system, alternating; the best is kept"),
    processes: int = PROCESSES,
    server_cpus: str | None = typer.Option("none", "--server-cpus", help="CPUs for the system under test, e.g. 0; "
                                           "`none` (the default): nothing pinned"),
    client_cpus: str | None = typer.Option(None, "--client-cpus", help="CPUs for the light members (default: the rest)"),
    json_out: Path | None = JSON,
) -> None:
    """Time from the last JoinGroup of a rebalance to every member Stable, by group size (initial delay 0)."""
    from loadtest.bench import pinning
    from loadtest.bench.groups import rebalance_time
    from loadtest.bench.protocols import Placement

    counts = [int(s) for s in sizes.split(",")]
    figures = [Figure(f"ms_{n}", f"{n} members: ms after the last join", higher_is_better=False, unit=" ms") for n in counts]
    placement = Placement(None if server_cpus == "none" else pinning.split(server_cpus, client_cpus))

    def workload(_name: str, bootstrap: str) -> dict[str, float]:
        return {f"ms_{n}": asyncio.run(rebalance_time(bootstrap, n, processes, placement)) for n in counts}

    where = placement.describe() if placement.cores else "not pinned"
    results = best_of(_systems(peer, **NO_INITIAL_DELAY), workload, figures, rounds)
    report(f"rebalance time after the last JoinGroup (one member joins a Stable group), {processes} client process(es), "
           f"best of {rounds}; {where}", results, figures, json_out, placement=where)


@app.command("consumers-formed")
def consumers_formed(
    consumers: int = 10,
    partitions: int = 10,
    peer: str = typer.Option("mock", "--peer", help="mock (librdkafka's mock cluster), tansu, or a comma-separated list"),
    rounds: int = ROUNDS,
    json_out: Path | None = JSON,
) -> None:
    """Seconds until N confluent classic consumers, one per process, have formed a group (initial delay 0)."""
    from loadtest.bench.formation import formation_time

    figures = [Figure("formed_s", f"{consumers} consumers: group formed", higher_is_better=False, unit=" s")]
    results = best_of(_systems(peer, **NO_INITIAL_DELAY),
                      lambda _n, b: formation_time(b, consumers, partitions), figures, rounds)
    report(f"{consumers} confluent consumers in processes subscribe at once, best of {rounds} "
           "(the mock cluster's topic has 4 partitions)", results, figures, json_out)


@app.command()
def reload(records: int = 100_000, json_out: Path | None = JSON) -> None:
    """Time to load (replay) a __consumer_offsets partition log of RECORDS offset commits."""
    from loadtest.bench.groups import reload_time

    with console.status(f"writing and reloading {records} records…"):
        result = reload_time(records)
    table = Table(title="reload of a __consumer_offsets partition")
    for col in ("records", "log MiB", "seconds", "records/s"):
        table.add_column(col, justify="right")
    table.add_row(f"{records:,}", f"{result['log_bytes'] / 2**20:.1f}", f"{result['seconds']:.2f}", f"{result['records_per_s']:,.0f}")
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("member-memory")
def member_memory(members: int = 10_000, json_out: Path | None = JSON) -> None:
    """Bytes of coordinator state per idle Stable member (groups of 10), measured with tracemalloc."""
    from loadtest.bench.groups import memory_per_member

    with console.status(f"building {members} Stable members…"):
        result = memory_per_member(members)
    console.print(f"[bold]{result['bytes_per_member']:,.0f}[/] bytes of coordinator state per idle member ({members:,} members)")
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("gateways")
def gateways(
    count: int = typer.Option(3, help="gateways of the scaled-out cluster, compared with one gateway"),
    records: int = typer.Option(300_000, help="records produced and fetched per run"),
    partitions: int = 6,
    members: int = 1000,
    groups: int = 100,
    seconds: float = 5.0,
    rounds: int = ROUNDS,
    json_out: Path | None = JSON,
) -> None:
    """Records/s and heartbeats/s with COUNT gateways against one gateway (issue 11): the same clients,
    bootstrapped from every gateway; Metadata spreads partition leaders and FindCoordinator spreads
    coordinators over the gateways."""
    from loadtest.bench.clients import produce_fetch_rates
    from loadtest.bench.groups import group_request_rates

    records -= records % (100 * partitions)
    figures = [Figure("produce_rps", "produced records/s (acks=all)"), Figure("fetch_rps", "fetched records/s (assign())"),
               Figure("heartbeat_rps", "heartbeats/s"), Figure("commit_rps", "OffsetCommits/s")]

    def workload(_name: str, bootstrap: str) -> dict[str, float]:
        rates = produce_fetch_rates(bootstrap, "bench", records, partitions, 100)
        rates.update(asyncio.run(group_request_rates(bootstrap, members, groups, seconds)))
        return rates

    systems = {
        "1 gateway": starter("raygroups", partitions, **{"raygroups.gateways": 1, **NO_INITIAL_DELAY}),
        "raygroups": starter("raygroups", partitions, **{"raygroups.gateways": count, **NO_INITIAL_DELAY}),
    }
    results = best_of(systems, workload, figures, rounds)
    report(f"{count} gateways (raygroups) against 1 gateway, {records:,} records, {members} members in {groups} groups, "
           f"best of {rounds}", results, figures, json_out)
