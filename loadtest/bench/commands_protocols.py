"""The classic protocol against KIP-848's consumer protocol: rebalance time and heartbeat cost
(protocols.py measures; this prints). tansu serves no ConsumerGroupHeartbeat, so the baseline is
raygroups' own classic protocol, in the same run against the same cluster."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from loadtest.bench import pinning
from loadtest.bench.app import JSON, app
from loadtest.bench.compare import _plain
from loadtest.bench.protocols import Placement, Side, consumer_settings, heartbeat_cost, parse_sides, rebalance_once
from loadtest.bench.systems import console, raygroups

ROUNDS = typer.Option(1, "--rounds", help="runs of each measurement, the order of the protocols alternating; the best is kept")
PROCESSES = typer.Option(1, "--processes", help="client processes the light members run in (spawned)")
SERVER_CPUS = typer.Option(None, "--server-cpus", help="CPUs for the cluster, e.g. 0 (default: the first half)")
CLIENT_CPUS = typer.Option(None, "--client-cpus", help="CPUs for the load client, e.g. 1 (default: the rest)")
# Kafka's defaults: heartbeat.interval.ms of the classic consumer, group.consumer.heartbeat.interval.ms
DEFAULT_INTERVAL_S = {"classic": 3.0, "consumer": 5.0}


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def _orders(sides: list[Side], round_: int, index: int) -> list[Side]:
    """The sides in turn: each round and each size starts with the other one."""
    return sides if (round_ + index) % 2 == 0 else sides[::-1]


@app.command("protocols-rebalance")
def protocols_rebalance(
    sizes: str = typer.Option("10,100,1000", help="group sizes, comma-separated"),
    sides: str = typer.Option("classic:range,classic:cooperative-sticky,consumer",
                              help="protocol[:assignor], comma-separated; the first is the baseline"),
    heartbeat_ms: int = typer.Option(250, "--heartbeat-ms", help="every member's heartbeat interval (the coordinator's, "
                                                                 "for consumer members)"),
    initial_delay_ms: int = typer.Option(3000, "--initial-delay-ms", help="group.initial.rebalance.delay.ms: lets a "
                                         "classic group form in one generation; a join into a Stable group never waits it"),
    rounds: int = ROUNDS,
    processes: int = PROCESSES,
    server_cpus: str | None = SERVER_CPUS,
    client_cpus: str | None = CLIENT_CPUS,
    json_out: Path | None = JSON,
) -> None:
    """Time from a new member's first JoinGroup / ConsumerGroupHeartbeat to every member settled
    again, groups of 10, 100 and 1,000, classic against consumer protocol in one cluster."""
    counts = [int(s) for s in sizes.split(",")]
    chosen = parse_sides(sides)
    placement = Placement(pinning.split(server_cpus, client_cpus))
    best: dict[tuple[int, str], dict[str, float]] = {}
    with raygroups(**consumer_settings(heartbeat_ms, initial_delay_ms)) as bootstrap, _progress() as progress:
        task = progress.add_task("rebalances", total=rounds * len(counts) * len(chosen))
        for r in range(rounds):
            for i, size in enumerate(counts):
                for side in _orders(chosen, r, i):
                    progress.update(task, description=f"{side.label}, {size:,} members, round {r + 1}")
                    try:
                        got = asyncio.run(rebalance_once(bootstrap, side, size, heartbeat_ms, placement, processes))
                    except Exception as e:  # noqa: BLE001 - one failed measurement, not the others
                        progress.console.print(f"  [red]{side.label}, {size}: failed:[/] {type(e).__name__}: {e}")
                        got = dict.fromkeys(("ms", "first_answer_ms", "restarted", "generations", "steady_server_cores"),
                                            math.nan)
                    else:
                        progress.console.print(f"  {side.label}, {size:,} members, round {r + 1}: {got['ms']:,.1f} ms "
                                               f"(first answer {got['first_answer_ms']:,.1f} ms), {got['restarted']:,.0f} "
                                               f"partitions read again, {got['generations']:.0f} generation(s), server "
                                               f"{got['steady_server_cores']:.2f} cores busy before")
                    mine = best.get((size, side.label))
                    if mine is None or math.isnan(mine["ms"]) or got["ms"] < mine["ms"]:
                        best[(size, side.label)] = got
                    progress.advance(task)
    base = chosen[0].label
    table = Table(title=f"rebalance after one member joins, heartbeat every {heartbeat_ms} ms, 2 partitions per member, "
                        f"best of {rounds}")
    for column in ("members", "protocol (assignor)", "ms", f"/ {base}", "first answer ms", "generations", "read again",
                   "server cores before"):
        table.add_column(column, justify="left" if column.startswith("protocol") else "right")
    for size in counts:
        for side in chosen:
            got = best[(size, side.label)]
            ratio = got["ms"] / best[(size, base)]["ms"]
            table.add_row(f"{size:,}" if side is chosen[0] else "", side.label, _num(got["ms"]),
                          "" if side is chosen[0] else "—" if math.isnan(ratio) else f"{ratio:.2f}×", _num(got["first_answer_ms"]),
                          _num(got["generations"], 0), _num(got["restarted"], 0), _num(got["steady_server_cores"]),
                          end_section=side is chosen[-1])
    table.caption = (f"ms: from the newcomer's first JoinGroup / ConsumerGroupHeartbeat to every member settled again "
                     f"(lower is better); first answer: to that request's answer; read again: partitions whose reading "
                     f"started over; server cores before: busy with the group's heartbeats before the join. "
                     f"{placement.describe()}; {processes} client process(es)")
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(_plain({
            "heartbeat_ms": heartbeat_ms, "initial_delay_ms": initial_delay_ms, "rounds": rounds, "processes": processes, "placement": placement.describe(),
            "results": {str(size): {side.label: best[(size, side.label)] for side in chosen} for size in counts}}), indent=2))


@app.command("protocols-heartbeat")
def protocols_heartbeat(
    members: int = typer.Option(1000, help="idle members of each protocol"),
    group_size: int = typer.Option(10, "--group-size", help="members per group (one partition each)"),
    seconds: float = 5.0,
    heartbeat_ms: int = typer.Option(1, "--heartbeat-ms", help="wait after each heartbeat's answer (the coordinator's "
                                                               "interval for consumer members); 1: back to back"),
    sides: str = typer.Option("classic,consumer", help="protocol[:assignor], comma-separated; the first is the baseline"),
    rounds: int = ROUNDS,
    processes: int = PROCESSES,
    server_cpus: str | None = SERVER_CPUS,
    client_cpus: str | None = CLIENT_CPUS,
    json_out: Path | None = JSON,
) -> None:
    """Heartbeats/s the cluster sustains with N idle members of each protocol, and the server's
    (and the client's) CPU per heartbeat, classic against consumer protocol in one cluster."""
    chosen = parse_sides(sides)
    placement = Placement(pinning.split(server_cpus, client_cpus))
    best: dict[str, dict[str, float]] = {}
    with raygroups(**consumer_settings(heartbeat_ms)) as bootstrap, _progress() as progress:
        task = progress.add_task("heartbeats", total=rounds * len(chosen))
        for r in range(rounds):
            for side in _orders(chosen, r, 0):
                progress.update(task, description=f"{side.label}, {members:,} members, round {r + 1}")
                try:
                    got = asyncio.run(heartbeat_cost(bootstrap, side, members, group_size, seconds, heartbeat_ms,
                                                     placement, processes))
                except Exception as e:  # noqa: BLE001
                    progress.console.print(f"  [red]{side.label}: failed:[/] {type(e).__name__}: {e}")
                    progress.advance(task)
                    continue
                progress.console.print(f"  {side.label}, round {r + 1}: {got['heartbeats_per_s']:,.0f} heartbeats/s, "
                                       f"server {got['server_us']:,.1f} µs and client {got['client_us']:,.1f} µs each")
                if side.label not in best or got["heartbeats_per_s"] > best[side.label]["heartbeats_per_s"]:
                    best[side.label] = got
                progress.advance(task)
    for side in chosen:
        got = best.setdefault(side.label, {})
        interval = DEFAULT_INTERVAL_S[side.protocol]
        got["default_interval_s"] = interval
        # The server's cores that 10,000 idle members would keep busy at Kafka's default interval.
        got["cores_per_10k"] = got.get("server_us", math.nan) * 10_000 / interval / 1e6
    rows: list[tuple[str, str, bool | None]] = [
        ("heartbeats_per_s", "heartbeats/s", True),
        ("server_us", "server CPU µs per heartbeat (every cluster process)", False),
        ("per_server_core", "heartbeats/s per server core (1e6 / the above)", True),
        ("server_cores", "server cores busy", False),
        ("client_us", "client CPU µs per heartbeat", False),
        ("client_cores", "client cores busy", False),
        ("default_interval_s", "Kafka's default heartbeat interval, s", None),
        ("cores_per_10k", "server cores for 10,000 idle members at that interval", False),
    ]
    base = chosen[0].label
    table = Table(title=f"heartbeat cost, {members:,} idle members of each protocol in groups of {group_size}, "
                        f"{'back to back' if heartbeat_ms <= 1 else f'every {heartbeat_ms} ms'}, {seconds:g} s, "
                        f"best of {rounds}")
    table.add_column("figure")
    for side in chosen:
        table.add_column(side.label, justify="right")
    for side in chosen[1:]:
        table.add_column(f"{side.label} / {base}", justify="right")
    table.add_column("better is")
    for key, label, higher in rows:
        values = [best[side.label].get(key, math.nan) for side in chosen]
        ratios = [f"{v / values[0]:.2f}×" if values[0] and not math.isnan(v) else "—" for v in values[1:]]
        table.add_row(label, *[_num(v) for v in values], *ratios, "—" if higher is None else "higher" if higher else "lower")
    table.caption = f"{placement.describe()}; {processes} client process(es); a connection per member"
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(_plain({
            "members": members, "group_size": group_size, "seconds": seconds, "heartbeat_ms": heartbeat_ms,
            "rounds": rounds, "processes": processes, "placement": placement.describe(),
            "results": best}), indent=2))


def _num(x: Any, digits: int | None = None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "failed"
    if digits is None:
        digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
    return f"{x:,.{digits}f}"
