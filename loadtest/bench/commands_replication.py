"""`python -m loadtest.bench replication`: RF 3 against RF 1 on three Ray nodes (issue 25).

Two clusters of three Ray nodes on this machine, one after the other, each node with a data
directory of its own (as three machines' disks), started as the experiments start theirs
(loadtest/experiment/cluster_process.py) with a coordinator of each kind on every node: one kept
in one copy everywhere (`default.replication.factor`, `offsets.topic.replication.factor` and
`share.coordinator.state.topic.replication.factor` 1), one with the defaults (3, the internal
topics adopted into three copies once the nodes' coordinators are up). In each, the same
confluent-kafka client produces (acks=all) and fetches, best of --rounds; then the unloaded round
trips of loadtest/bench/latency.py, each request sent where a Kafka client sends it (a gateway runs
on every node, and FindCoordinator and Metadata name the one on the coordinator's or leader's
node): OffsetCommit (its record in every
in-sync copy of the group's __consumer_offsets partition before the answer), ShareFetch accepting
the previous record (the acknowledgement's share state likewise in __share_group_state), a
one-record acks=all Produce, and Heartbeat (which writes nothing) as the control. What a
replicated write costs is the ratio. Then, in the RF 3 cluster, a worker node is removed without
a goodbye (as a machine that dies) and the time until every partition of the topic and of both
internal topics is led again is measured from the start of the removal, as clients see it
(Metadata): Ray reporting the node's actors dead, then the controller's election.

The three nodes share this machine's cores and disk, so RF 3 writes each record to three files on
one disk, and a follower's fetch is a Ray call between processes here: a figure for the
protocol's overhead on one machine, not for three.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import threading
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


def _lose_node(cluster, led_again, timeout: float = 120) -> float:
    """Seconds from the start of a worker node's removal (without a goodbye) until `led_again`.
    Ray's remove_node kills the node's processes at once but then waits for them to exit, which
    took ten seconds and more here, so a thread watches from the same start while it runs: the
    partitions are led again long before it returns (measured after it returned, the figure
    missed that wait)."""
    seen: list[float] = []

    def watch() -> None:
        try:
            seen.append(_wait(led_again, timeout, "every partition led again"))
        except TimeoutError:
            pass

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    cluster.nodes.remove(2)
    watcher.join(timeout)
    if not seen:
        raise TimeoutError(f"every partition led again not within {timeout:.0f} s")
    return seen[0]


INTERNAL = ("__consumer_offsets", "__share_group_state")
ONE_COPY = {"default.replication.factor": 1, "offsets.topic.replication.factor": 1,
            "share.coordinator.state.topic.replication.factor": 1}
LATENCY = ("commit", "share_fetch", "produce", "heartbeat")


def _whole(bootstrap: str, topics: list[str], copies: int) -> bool:
    return all(leader >= 0 and isr == copies for t in topics for leader, isr in _leaders(bootstrap, t).values())


@app.command("replication")
def replication(
    records: int = typer.Option(150_000, help="records produced and fetched per topic per round (30,000 was "
                                "mostly the clients' start-up)"),
    partitions: int = 6,
    samples: int = typer.Option(1000, help="timed round trips of each API"),
    rounds: int = ROUNDS,
    json_out: Path | None = JSON,
) -> None:
    """RF 3 against RF 1, a cluster of three Ray nodes with a data directory each for each: produce
    (acks=all) and fetch records/s, OffsetCommit, ShareFetch-with-acknowledgement and Produce round
    trips, and the time from a node's loss to every partition led again."""
    from loadtest.bench.clients import fetch_rate, produce_rate
    from loadtest.bench.latency import unloaded_round_trips
    from loadtest.experiment.cluster_process import ClusterProcess
    from loadtest.experiment.faults import Admin
    from loadtest.experiment.node_join import wait_replicas
    from loadtest.experiment.scenario import ClusterSpec

    records -= records % (100 * partitions)
    figures = [Figure("produce_rps", "produced records/s (acks=all)"), Figure("fetch_rps", "fetched records/s (assign())")]
    labels = {"commit": "OffsetCommit", "share_fetch": "ShareFetch accepting the last record",
              "produce": "Produce, 1 record, acks=all", "heartbeat": "Heartbeat (writes nothing)"}
    figures += [Figure(f"{api}_{q}_ms", f"{labels[api]} {q}", higher_is_better=False, unit=" ms")
                for api in LATENCY for q in ("p50", "p99")]
    results: dict[str, dict[str, float]] = {}
    # A gateway on each node, as a deployment's clients reach every node: each request goes where a
    # Kafka client sends it (latency.py follows FindCoordinator and Metadata), so a round trip
    # crosses nodes inside the cluster only where replication does.
    spec = ClusterSpec(gateways_per_node=True, nodes=3, storage="per-node", coordinators=3, share_coordinators=3,
                       partition_leaders=3)
    for name, settings, copies in (("RF 1", ONE_COPY, 1), ("raygroups", {}, 3)):
        mine = results[name] = {f.key: math.nan for f in figures}
        run_dir = Path(tempfile.mkdtemp(prefix="raygroups-bench-replication-"))
        cluster = ClusterProcess(run_dir, spec, settings)
        try:
            with console.status(f"{name if copies == 1 else 'RF 3'}: three Ray nodes, a data directory each, "
                                f"and raygroups on them…"):
                cluster.start_nodes()
                bootstrap = cluster.start()
                assert cluster.nodes is not None
                workers = cluster.nodes.add_workers()
                missing = asyncio.run(wait_replicas(Admin(bootstrap), workers))
                if missing:
                    raise RuntimeError(f"{len(missing)} worker node(s) kept no replica")
                # The internal topics adopted into their copies, each led by its preferred replica.
                _wait(lambda: _whole(bootstrap, list(INTERNAL), copies), 240, f"the internal topics in {copies} copies")
            for r in range(rounds):
                topic = f"rf{copies}-{r}"
                _create(bootstrap, topic, partitions, -1)
                _wait(lambda: _whole(bootstrap, [topic], copies), 60, f"{copies} in-sync replicas")
                got = {**produce_rate(bootstrap, topic, records, partitions, 100), **fetch_rate(bootstrap, topic, records, partitions)}
                console.print(f"  RF {copies}, run {r + 1}: " + ", ".join(f"{k}={got[k]:,.0f}" for k in ("produce_rps", "fetch_rps")))
                for key in ("produce_rps", "fetch_rps"):
                    mine[key] = got[key] if math.isnan(mine[key]) else max(mine[key], got[key])
            with console.status(f"RF {copies}: round trips to the coordinators' and leaders' gateways…"):
                for r in range(rounds):
                    got = unloaded_round_trips(bootstrap, samples, replication_factor=-1)
                    for key in [f.key for f in figures[2:]]:
                        mine[key] = got[key] if math.isnan(mine[key]) else min(mine[key], got[key])
            if copies == 3:
                # Read from the ISR (the lost node's replica leaves it in the change that elects
                # its partitions' leaders); every partition here has a copy on every node.
                topics = [f"rf3-{r}" for r in range(rounds)] + list(INTERNAL)
                results["node_loss_s"] = {"seconds": _lose_node(cluster, lambda: _whole(bootstrap, topics, 2))}
        finally:
            cluster.stop()  # the nodes too
    t = table(f"RF 3 (raygroups) against RF 1, 3 Ray nodes on one machine, {records:,} records per topic, "
              f"{samples:,} round trips of each API (to the coordinator's or leader's gateway), best of {rounds}",
              {k: v for k, v in results.items() if k != "node_loss_s"}, figures)
    console.print(t)
    console.print(f"a worker node removed without a goodbye: every RF-3 partition (the topic's and both internal "
                  f"topics') led again [bold]{results['node_loss_s']['seconds']:.1f} s[/] after its removal began (Ray "
                  f"reports its actors dead, then the controller elects from the ISR)")
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))
