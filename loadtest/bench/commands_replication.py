"""`python -m loadtest.bench replication`: RF 3 against RF 1 on three Ray nodes (issue 25).

One cluster of three Ray nodes on this machine, each with a data directory of its own (as three
machines' disks), started as the experiments start theirs (loadtest/experiment/cluster_process.py);
two topics in it, one created with replication factor 1 and one with the default (3). The same
confluent-kafka client produces (acks=all) and fetches on each, alternating, best of --rounds: what
a replicated write costs is the ratio. Then a worker node is removed without a goodbye (as a
machine that dies) and the time until every RF-3 partition is led again is measured, as clients
see it (Metadata): most of it is Ray noticing the node is gone (its health checks), the rest the
controller's election.

The three nodes share this machine's cores and disk, so RF 3 writes each record to three files on
one disk: a figure for the protocol's overhead here, not for three machines.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import time
from pathlib import Path

import typer

from loadtest.bench.app import JSON, ROUNDS, app
from loadtest.bench.compare import Figure, table
from loadtest.bench.systems import console


def _create(bootstrap: str, topic: str, partitions: int, factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=factor)]).values():
        future.result(30)


def _leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader broker, in-sync replicas), as a client sees them."""
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: (m.leader, len(m.isrs)) for p, m in meta.topics[topic].partitions.items()}


def _wait(check, timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if check():
                return time.monotonic() - started
        except Exception:  # noqa: BLE001 - a broker of the lost node: ask again
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} not within {timeout:.0f} s")


@app.command("replication")
def replication(
    records: int = typer.Option(60_000, help="records produced and fetched per topic per round"),
    partitions: int = 6,
    rounds: int = ROUNDS,
    json_out: Path | None = JSON,
) -> None:
    """RF 3 against RF 1, one cluster of three Ray nodes with a data directory each: produce
    (acks=all) and fetch records/s, and the time from a node's loss to every partition led again."""
    from loadtest.bench.clients import fetch_rate, produce_rate
    from loadtest.experiment.cluster_process import ClusterProcess
    from loadtest.experiment.faults import Admin
    from loadtest.experiment.node_join import wait_replicas
    from loadtest.experiment.scenario import ClusterSpec

    records -= records % (100 * partitions)
    figures = [Figure("produce_rps", "produced records/s (acks=all)"), Figure("fetch_rps", "fetched records/s (assign())")]
    results: dict[str, dict[str, float]] = {"raygroups": {f.key: math.nan for f in figures},
                                            "RF 1": {f.key: math.nan for f in figures}}
    run_dir = Path(tempfile.mkdtemp(prefix="raygroups-bench-replication-"))
    spec = ClusterSpec(gateways=1, nodes=3, storage="per-node", coordinators=1, share_coordinators=1, partition_leaders=3)
    cluster = ClusterProcess(run_dir, spec, {})
    try:
        with console.status("three Ray nodes, a data directory each, and raygroups on them…"):
            cluster.start_nodes()
            bootstrap = cluster.start()
            assert cluster.nodes is not None
            workers = cluster.nodes.add_workers()
            missing = asyncio.run(wait_replicas(Admin(bootstrap), workers))
            if missing:
                raise RuntimeError(f"{len(missing)} worker node(s) kept no replica")
        topics = {"raygroups": "rf3", "RF 1": "rf1"}
        _create(bootstrap, "rf3", partitions, -1)
        _create(bootstrap, "rf1", partitions, 1)
        _wait(lambda: all(isr == 3 for _, isr in _leaders(bootstrap, "rf3").values()), 60, "three in-sync replicas")
        for r in range(rounds):
            for name in (list(topics) if r % 2 == 0 else list(topics)[::-1]):
                topic = f"{topics[name]}-{r}"
                _create(bootstrap, topic, partitions, -1 if name == "raygroups" else 1)
                got = {**produce_rate(bootstrap, topic, records, partitions, 100), **fetch_rate(bootstrap, topic, records, partitions)}
                console.print(f"  {name}, run {r + 1}: " + ", ".join(f"{f.key}={got[f.key]:,.0f}" for f in figures))
                for f in figures:
                    mine = results[name][f.key]
                    results[name][f.key] = got[f.key] if math.isnan(mine) else max(mine, got[f.key])
        # One gateway, on the head: Metadata names the leader by it, so the time is read from the
        # ISR (the lost node's replica leaves it in the change that elects its partitions' leaders).
        cluster.nodes.remove(2)
        moved = _wait(lambda: all(isr == 2 for _, isr in _leaders(bootstrap, "rf3").values()), 120,
                      "every partition led again")
        results["node_loss_s"] = {"seconds": moved}
    finally:
        cluster.stop()  # the nodes too
    t = table(f"RF 3 (raygroups) against RF 1, 3 Ray nodes on one machine, {records:,} records per topic, "
              f"best of {rounds}", {k: v for k, v in results.items() if k != "node_loss_s"}, figures)
    console.print(t)
    console.print(f"a worker node removed without a goodbye: every RF-3 partition led again after "
                  f"[bold]{results['node_loss_s']['seconds']:.1f} s[/] (Ray's health checks notice the node first)")
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))
