"""Share groups (KIP-932): tansu has none, so each figure keeps its classic-group counterpart in the
same raygroups cluster as its baseline."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from rich.table import Table

from loadtest.bench.app import JSON, app
from loadtest.bench.systems import console, raygroups, raygroups_cluster


def _digits(x: float) -> int:
    return 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2


def ratio_table(title: str, rows: list[tuple[str, str, float, str, float]], unit: str = "") -> Table:
    """Rows of (figure, baseline name, baseline, ours name, ours): both, and ours / baseline."""
    table = Table(title=title)
    for col in ("", "baseline", "", "share groups", "", "ratio"):
        table.add_column(col, justify="right")
    for label, base_name, base, ours_name, ours in rows:
        table.add_row(label, base_name, f"{base:,.{_digits(base)}f}{unit}", ours_name, f"{ours:,.{_digits(ours)}f}{unit}",
                      f"{ours / base:.2f}")
    return table


# Members learn their assignment on their next heartbeat: a short interval gets the runs going sooner.
SHARE_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.share.heartbeat.interval.ms": 500}


@app.command("share-consume")
def share_consume(
    records: int = typer.Option(300_000, help="records on the topic"),
    partitions: int = 6,
    max_poll_records: str = typer.Option(
        "", help="also run ShareConsumers with these max.poll.records (comma-separated), a diagnostic: the "
        "rate with the client's default (500) is the figure"),
    json_out: Path | None = JSON,
) -> None:
    """Records/s a ShareConsumer acquires and acknowledges vs a classic consumer group, same topic, same run."""
    from cluster.config import SETTINGS
    from loadtest.bench import share as bench_share

    settings = {**SHARE_SETTINGS, "share.auto.offset.reset": SETTINGS["share.auto.offset.reset"].parse("earliest")}
    with raygroups(**settings) as bootstrap:
        with console.status(f"producing {records} records…"):
            bench_share.produce(bootstrap, "bench-share", records, partitions)
        with console.status("a classic consumer group reads them…"):
            classic = bench_share.classic_consume_rate(bootstrap, "bench-share", records)
        with console.status("a share consumer acquires and acknowledges them…"):
            share = bench_share.share_consume_rate(bootstrap, "bench-share", records)
        more = {}
        for n in (int(x) for x in max_poll_records.split(",") if x.strip()):
            with console.status(f"a share consumer with max.poll.records={n}…"):
                more[n] = bench_share.share_consume_rate(bootstrap, "bench-share", records, max_poll_records=n)
    console.print(ratio_table(
        f"consuming {records:,} records of 100 B over {partitions} partitions, one confluent consumer each",
        [("records/s", "classic group", classic, "ShareConsumer (implicit acks)", share)]
        + [("records/s", "classic group", classic, f"max.poll.records={n}", rate) for n, rate in more.items()],
    ))
    if json_out:
        figures = {"classic_rps": classic, "share_rps": share}
        figures.update({f"share_rps_max_poll_records_{n}": rate for n, rate in more.items()})
        json_out.write_text(json.dumps(figures, indent=2))


@app.command("share-ack-latency")
def share_ack_latency(
    members: int = 8,
    seconds: float = 10.0,
    json_out: Path | None = JSON,
) -> None:
    """ShareAcknowledge latency of light share members vs OffsetCommit latency of light classic members."""
    from cluster.config import SETTINGS
    from loadtest.bench import share as bench_share

    settings = {**SHARE_SETTINGS, "share.auto.offset.reset": SETTINGS["share.auto.offset.reset"].parse("earliest")}
    with raygroups(**settings) as bootstrap:
        with console.status("producing records to acknowledge…"):
            bench_share.produce(bootstrap, "bench-ack", 200_000, 4, batch_records=50)
        with console.status(f"{members} classic members committing offsets for {seconds:g} s…"):
            commits = asyncio.run(bench_share.commit_latency(bootstrap, "bench-ack", members, seconds))
        with console.status(f"{members} share members acknowledging for {seconds:g} s…"):
            acks = asyncio.run(bench_share.share_ack_latency(bootstrap, "bench-ack", members, seconds))
    console.print(ratio_table(
        f"acknowledgement latency, {members} members, closed loop ({acks['n']:,} acks, {commits['n']:,} commits)",
        [
            ("p50", "OffsetCommit", commits["p50"], "ShareAcknowledge", acks["p50"]),
            ("p99", "OffsetCommit", commits["p99"], "ShareAcknowledge", acks["p99"]),
        ],
        unit=" ms",
    ))
    if json_out:
        json_out.write_text(json.dumps({"commit": commits, "share_ack": acks}, indent=2))


@app.command("share-state-writes")
def share_state_writes(
    writers: int = typer.Option(200, help="concurrent share partitions writing, one write at a time each"),
    seconds: float = 5.0,
    json_out: Path | None = JSON,
) -> None:
    """Share-state writes/s of one share coordinator actor vs offset commits/s of one group coordinator actor."""
    from loadtest.bench import share as bench_share

    with raygroups_cluster(**{"raygroups.coordinators": 1, "raygroups.share.coordinators": 1}) as cluster:
        with console.status(f"{writers} writers, {seconds:g} s against each coordinator…"):
            rates = asyncio.run(bench_share.coordinator_write_rates(cluster.controller, seconds, writers))
    console.print(ratio_table(
        f"writes per second to one coordinator actor, {writers} closed-loop writers (fsync per batch)",
        [("writes/s", "OffsetCommit (group coordinator)", rates["commit_wps"], "WriteShareGroupState", rates["share_wps"])],
    ))
    if json_out:
        json_out.write_text(json.dumps(rates, indent=2))


@app.command("share-memory")
def share_memory(
    records: int = 100_000,
    batch: int = 500,
    json_out: Path | None = JSON,
) -> None:
    """Bytes per in-flight record in a SharePartition: batch-level state, then split per offset."""
    from loadtest.bench import share as bench_share

    with console.status(f"acquiring {records:,} records in batches of {batch}…"):
        result = bench_share.memory_per_inflight_record(records, batch)
    console.print(ratio_table(
        f"memory per in-flight record ({records:,} records, log batches of {batch})",
        [("bytes/record", "per-offset state", result["per_offset"], "batch-level state", result["batch_level"])],
    ))
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("share-assign")
def share_assign(
    sizes: str = typer.Option("100x100,1000x1000,1000x10,5000x5000", help="MEMBERSxPARTITIONS, comma-separated"),
    json_out: Path | None = JSON,
) -> None:
    """SimpleAssignor time (share groups, on the coordinator) vs the classic range assignor, same sizes."""
    from loadtest.bench import share as bench_share

    results, rows = {}, []
    for size in sizes.split(","):
        members, partitions = (int(x) for x in size.split("x"))
        results[size] = times = bench_share.assignor_times(members, partitions)
        rows.append((f"{members} members × {partitions} partitions (ms)", "range", times["range_ms"], "simple",
                     times["simple_ms"]))
    console.print(ratio_table("assignment time, best of 5", rows))
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))


