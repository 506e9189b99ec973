"""Benchmarks: raygroups measured against a do-nothing Kafka responder in the same run.

    python -m loadtest.bench produce-fetch [--records N]
    python -m loadtest.bench api-roundtrips [--seconds S]
    python -m loadtest.bench group-requests | rebalance | reload | member-memory
    python -m loadtest.bench share-consume | share-ack-latency | share-state-writes | share-memory | share-assign

Every figure is printed next to the same measurement against `loadtest.responder` (same client,
same machine, same protocol code, no actors or logs), and as a ratio: absolute numbers depend on
the machine, the ratio says what raygroups itself costs. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])
console = Console()


# -- the two systems under test --------------------------------------------------------------------


@contextlib.contextmanager
def responder(partitions: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadtest.responder", "--port", "0", "--partitions", str(partitions)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError("responder did not start")
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def raygroups(**settings: object) -> Iterator[str]:
    with raygroups_cluster(**settings) as cluster:
        yield cluster.bootstrap


@contextlib.contextmanager
def raygroups_cluster(**settings: object) -> Iterator[Any]:
    from cluster.config import Config
    from cluster.launcher import start_cluster

    with tempfile.TemporaryDirectory(prefix="raygroups-bench-") as data:
        with console.status("starting raygroups…"):
            cluster = start_cluster(Config(dict(settings)), Path(data), port=0)
        try:
            yield cluster
        finally:
            with console.status("stopping raygroups…"):
                cluster.stop()


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


def report(title: str, results: dict[str, dict[str, float]], labels: dict[str, str], json_out: Path | None) -> None:
    """One row per figure: the responder's, ours, and the ratio."""
    table = Table(title=title)
    for col in ("", "responder (limit)", "raygroups", "raygroups / responder"):
        table.add_column(col, justify="right")
    for key, label in labels.items():
        base, ours = results["responder"][key], results["raygroups"][key]
        table.add_row(label, f"{base:,.0f}", f"{ours:,.0f}", f"{ours / base:.2f}")
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))


# -- produce / fetch ---------------------------------------------------------------------------------


def produce_fetch_rates(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(30)
    del admin
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.num.messages": 100})
    value = b"v" * value_bytes
    acked = 0

    def on_delivery(err, _msg) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"key-%06d" % i, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(120)
    produce_s = time.perf_counter() - start
    del producer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = start + 300
    while got < records and time.perf_counter() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if not msg.error():
                got += 1
    fetch_s = time.perf_counter() - start
    consumer.close()
    return {"acked": acked, "consumed": got, "produce_rps": acked / produce_s, "fetch_rps": got / fetch_s}


@app.command("produce-fetch")
def produce_fetch(
    records: int = typer.Option(60_000, help="records per run (a multiple of 100 per partition)"),
    partitions: int = 6,
    value_bytes: int = 100,
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """Records/s produced (acks=all) and fetched by confluent-kafka, raygroups vs the responder."""
    records -= records % (100 * partitions)
    results = {}
    with responder(partitions) as bootstrap:
        with console.status(f"responder: producing and fetching {records} records…"):
            results["responder"] = produce_fetch_rates(bootstrap, "bench", records, partitions, value_bytes)
    with raygroups() as bootstrap:
        with console.status(f"raygroups: producing and fetching {records} records…"):
            results["raygroups"] = produce_fetch_rates(bootstrap, "bench", records, partitions, value_bytes)
    report(
        f"produce/fetch, {records} records of {value_bytes} B over {partitions} partitions",
        results,
        {"produce_rps": "produced records/s (acks=all)", "fetch_rps": "fetched records/s"},
        json_out,
    )


# -- ApiVersions / Metadata round trips ---------------------------------------------------------------


def _frame(api_key: int, version: int, body: object) -> bytes:
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=api_key, request_api_version=version,
                                                    correlation_id=0, client_id="bench"))
    entity_writer(type(body))(buf, body)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


async def _round_trips(bootstrap: str, frame: bytes, seconds: float, connections: int) -> float:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)

    async def one() -> int:
        reader, writer = await asyncio.open_connection(host, int(port))
        done = 0
        deadline = time.perf_counter() + seconds
        request = bytearray(frame)
        while time.perf_counter() < deadline:
            struct.pack_into(">i", request, 8, done)  # correlation id
            writer.write(request)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
            done += 1
        writer.close()
        return done

    start = time.perf_counter()
    counts = await asyncio.gather(*(one() for _ in range(connections)))
    return sum(counts) / (time.perf_counter() - start)


def api_rates(bootstrap: str, seconds: float, connections: int) -> dict[str, float]:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    api_versions = _frame(18, 3, ApiVersionsRequest(client_software_name="bench", client_software_version="1"))
    metadata = _frame(3, 12, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="bench-md"),),
                                             allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("bench-md", num_partitions=6, replication_factor=1)]).values():
        future.result(30)
    del admin
    return {
        "api_versions_rps": asyncio.run(_round_trips(bootstrap, api_versions, seconds, connections)),
        "metadata_rps": asyncio.run(_round_trips(bootstrap, metadata, seconds, connections)),
    }


@app.command("api-roundtrips")
def api_roundtrips(
    seconds: float = 5.0,
    connections: int = 8,
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """ApiVersions and Metadata round trips per second (sequential per connection), raygroups vs the responder."""
    results = {}
    with responder(6) as bootstrap:
        with console.status("responder: round trips…"):
            results["responder"] = api_rates(bootstrap, seconds, connections)
    with raygroups() as bootstrap:
        with console.status("raygroups: round trips…"):
            results["raygroups"] = api_rates(bootstrap, seconds, connections)
    report(
        f"request round trips, {connections} connections × {seconds:g} s",
        results,
        {"api_versions_rps": "ApiVersions/s", "metadata_rps": "Metadata (1 topic)/s"},
        json_out,
    )


# -- classic groups ------------------------------------------------------------------------------------

NO_INITIAL_DELAY = {"group.initial.rebalance.delay.ms": 0}


@app.command("group-requests")
def group_requests(
    members: int = 1000,
    groups: int = 100,
    seconds: float = 5.0,
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """Heartbeats/s and OffsetCommits/s from light members in Stable groups, raygroups vs the responder."""
    from loadtest.bench_groups import group_request_rates

    results = {}
    with responder(10) as bootstrap:
        with console.status(f"responder: {members} members heartbeating and committing…"):
            results["responder"] = asyncio.run(group_request_rates(bootstrap, members, groups, seconds))
    with raygroups(**NO_INITIAL_DELAY) as bootstrap:
        with console.status(f"raygroups: {members} members in {groups} groups heartbeating and committing…"):
            results["raygroups"] = asyncio.run(group_request_rates(bootstrap, members, groups, seconds))
    report(
        f"group requests, {members} members in {groups} groups, closed loop, {seconds:g} s each",
        results,
        {"heartbeat_rps": "heartbeats/s", "commit_rps": "OffsetCommits/s"},
        json_out,
    )


@app.command()
def rebalance(
    sizes: str = typer.Option("10,100,1000", help="group sizes, comma-separated"),
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """Time from the last JoinGroup of a rebalance to every member Stable, by group size (initial delay 0)."""
    from loadtest.bench_groups import rebalance_time

    results = {}
    with raygroups(**NO_INITIAL_DELAY) as bootstrap:
        for size in (int(s) for s in sizes.split(",")):
            with console.status(f"rebalancing a group of {size}…"):
                results[size] = asyncio.run(rebalance_time(bootstrap, size))
    table = Table(title="rebalance time after the last JoinGroup")
    for col in ("members", "ms", "ms per member"):
        table.add_column(col, justify="right")
    for size, ms in results.items():
        table.add_row(str(size), f"{ms:,.0f}", f"{ms / size:.2f}")
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))


@app.command()
def reload(records: int = 100_000, json_out: Path | None = typer.Option(None, "--json")) -> None:
    """Time to load (replay) a __consumer_offsets partition log of RECORDS offset commits."""
    from loadtest.bench_groups import reload_time

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
def member_memory(members: int = 10_000, json_out: Path | None = typer.Option(None, "--json")) -> None:
    """Bytes of coordinator state per idle Stable member (groups of 10), measured with tracemalloc."""
    from loadtest.bench_groups import memory_per_member

    with console.status(f"building {members} Stable members…"):
        result = memory_per_member(members)
    console.print(f"[bold]{result['bytes_per_member']:,.0f}[/] bytes of coordinator state per idle member ({members:,} members)")
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


# -- share groups (KIP-932) -------------------------------------------------------------------------------

# Members learn their assignment on their next heartbeat: a short interval gets the runs going sooner.
SHARE_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.share.heartbeat.interval.ms": 500}


@app.command("share-consume")
def share_consume(
    records: int = typer.Option(300_000, help="records on the topic"),
    partitions: int = 6,
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """Records/s a ShareConsumer acquires and acknowledges vs a classic consumer group, same topic, same run."""
    from cluster.config import SETTINGS
    from loadtest import bench_share

    settings = {**SHARE_SETTINGS, "share.auto.offset.reset": SETTINGS["share.auto.offset.reset"].parse("earliest")}
    with raygroups(**settings) as bootstrap:
        with console.status(f"producing {records} records…"):
            bench_share.produce(bootstrap, "bench-share", records, partitions)
        with console.status("a classic consumer group reads them…"):
            classic = bench_share.classic_consume_rate(bootstrap, "bench-share", records)
        with console.status("a share consumer acquires and acknowledges them…"):
            share = bench_share.share_consume_rate(bootstrap, "bench-share", records)
    console.print(ratio_table(
        f"consuming {records:,} records of 100 B over {partitions} partitions, one confluent consumer each",
        [("records/s", "classic group", classic, "ShareConsumer (implicit acks)", share)],
    ))
    if json_out:
        json_out.write_text(json.dumps({"classic_rps": classic, "share_rps": share}, indent=2))


@app.command("share-ack-latency")
def share_ack_latency(
    members: int = 8,
    seconds: float = 10.0,
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """ShareAcknowledge latency of light share members vs OffsetCommit latency of light classic members."""
    from cluster.config import SETTINGS
    from loadtest import bench_share

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
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """Share-state writes/s of one share coordinator actor vs offset commits/s of one group coordinator actor."""
    from loadtest import bench_share

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
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """Bytes per in-flight record in a SharePartition: batch-level state, then split per offset."""
    from loadtest import bench_share

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
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """SimpleAssignor time (share groups, on the coordinator) vs the classic range assignor, same sizes."""
    from loadtest import bench_share

    results, rows = {}, []
    for size in sizes.split(","):
        members, partitions = (int(x) for x in size.split("x"))
        results[size] = times = bench_share.assignor_times(members, partitions)
        rows.append((f"{members} members × {partitions} partitions (ms)", "range", times["range_ms"], "simple",
                     times["simple_ms"]))
    console.print(ratio_table("assignment time, best of 5", rows))
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))


# -- locust -------------------------------------------------------------------------------------------


@app.command("locust-capacity")
def locust_capacity(
    steps: str = typer.Option("250,500,1000,2000,3000", help="classic members per step, comma-separated"),
    workers: str = typer.Option("1,2", help="locust worker processes per step (1: a single process)"),
    seconds: float = typer.Option(30.0, help="steady-state seconds measured per step, after spawning"),
    json_out: Path | None = typer.Option(None, "--json", help="also write the figures here"),
) -> None:
    """Classic members (heartbeats every 3 s) that locust workers sustain with Heartbeat p99 < 100 ms,
    against raygroups and against the do-nothing responder (the locust processes' own limit)."""
    from loadtest.bench_locust import run_step

    results: list[dict[str, Any]] = []
    targets = (("responder", lambda: responder(10)), ("raygroups", lambda: raygroups(**NO_INITIAL_DELAY)))
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


if __name__ == "__main__":
    app()
