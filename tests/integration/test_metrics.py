"""Prometheus metrics of a live cluster (issue 13), scraped over HTTP as Prometheus does.

One cluster (`raygroups up` with raygroups.metrics.port): a small load (produce, a classic
consumer group committing, a share consumer acknowledging) moves the request, group and share
counters between two scrapes; a killed group coordinator is counted as a failover, and a scrape
while it is dead still answers at once; the Grafana dashboard's queries name only metrics a live
scrape has.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from prometheus_client.parser import text_string_to_metric_families

from tests.clients import confluent_produce, create_topic
from tests.cluster_process import RAYGROUPS, ClusterProcess
from tests.share_runs import ShareConsumerProc

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    port = _free_port()
    proc = ClusterProcess(
        tmp_path_factory.mktemp("metrics"),
        "--config", f"raygroups.metrics.port={port}",
        "--config", "group.initial.rebalance.delay.ms=300",
        "--config", "share.auto.offset.reset=earliest",
        "--config", "group.share.heartbeat.interval.ms=500",
        gateways=2,
    ).start()
    proc.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield proc
    proc.stop()


# Every sample name any scrape of this module returned (gauges of share partitions exist only while
# a share consumer holds them, so the dashboard's names are checked against all the scrapes).
SCRAPED: set[str] = set()


def scrape(cluster) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(cluster.metrics_url, timeout=30) as answer:
        text = answer.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    SCRAPED.update(name for name, _ in samples)
    return samples


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum over actors (and any label not given) of one sample name."""
    return sum(v for (n, ls), v in samples.items() if n == name and all(dict(ls).get(k) == w for k, w in labels.items()))


def test_a_small_load_moves_the_request_group_and_share_counters(cluster):
    before = scrape(cluster)
    create_topic(cluster.bootstrap, "metered", 2)
    confluent_produce(cluster.bootstrap, "metered", [(i % 2, f"k{i}".encode(), f"v{i}".encode(), []) for i in range(20)])

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "metered-classic",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["metered"])
    seen, deadline = 0, time.time() + 60
    try:
        while seen < 20 and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert seen == 20

    share = ShareConsumerProc.start("s", cluster.bootstrap, "metered-share", "metered", "--idle", "3", "--max", "60")
    assert share.wait() == 0, share.lines[-5:]
    accepted = sum(1 for line in share.lines if line["e"] == "delivered" and line["t"] == "accept")
    assert accepted == 20

    after = scrape(cluster)

    def moved(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert moved("raygroups_requests_total", api="Produce") >= 1
    assert moved("raygroups_requests_total", api="Fetch") >= 1
    assert moved("raygroups_requests_total", api="OffsetCommit") >= 1
    assert moved("raygroups_requests_total", api="ShareFetch") >= 1
    assert moved("raygroups_request_latency_ms_count", api="Produce") >= 1
    assert moved("raygroups_bytes_in_total", api="Produce") > 20 * 4
    assert moved("raygroups_bytes_out_total", api="Fetch") > 0
    assert moved("raygroups_offset_commits_total") >= 1
    assert moved("raygroups_group_rebalances_total", protocol="classic") >= 1
    assert moved("raygroups_group_rebalance_duration_ms_count", protocol="classic") >= 1
    assert moved("raygroups_group_rebalances_total", protocol="share") >= 1
    assert moved("raygroups_share_fetches_total") >= 1
    # One node: callers reach the actors over their channels; Ray carries only each new link's first
    # calls, made while its channel opens (this small load opens many links: 39 to 8 here).
    assert moved("raygroups_actor_calls_total", path="channel") > 2 * moved("raygroups_actor_calls_total", path="ray")
    assert moved("raygroups_share_records_acquired_total") >= 20
    assert moved("raygroups_share_acknowledgements_total", type="accept") == 20
    assert total(after, "raygroups_group_count", protocol="classic") >= 1
    assert total(after, "raygroups_share_group_count") >= 1
    assert total(after, "raygroups_partition_load_time_ms_count") >= 2  # at least the new topic's
    assert total(after, "raygroups_scrape_actors_failed") == 0
    assert total(after, "raygroups_partitions") == 50 + 50 + 2  # both internal topics' and the new one's
    assert total(after, "raygroups_offline_partitions") == 0
    kinds = {dict(ls)["kind"] for (n, ls) in after if n == "raygroups_actor_up"}
    assert kinds == {"controller", "gateway", "group-coordinator", "share-coordinator", "partition-leader"}


def test_records_held_by_a_share_consumer_show_in_flight_with_their_lock_s_age(cluster):
    holder = ShareConsumerProc.start("h", cluster.bootstrap, "metered-hold", "metered", "--policy", "hold", "--max", "60")
    try:
        holder.wait_for("delivered")
        deadline, held, age = time.time() + 30, 0.0, 0.0
        while time.time() < deadline and not (held and age > 0):
            samples = scrape(cluster)
            held = total(samples, "raygroups_share_partition_records_in_flight", group="metered-hold", state="acquired")
            age = max((v for (n, ls), v in samples.items()
                       if n == "raygroups_share_partition_oldest_lock_age_ms" and dict(ls)["group"] == "metered-hold"), default=0.0)
            time.sleep(0.2)
        assert held >= 1
        assert 0 < age < 60_000
    finally:
        holder.kill()


def test_a_paused_actor_is_skipped_and_counted_and_the_scrape_still_answers(cluster):
    pause = subprocess.Popen(
        [RAYGROUPS, "pause", "share-coordinator-1", "--seconds", "8", "--bootstrap", cluster.bootstrap.split(",")[0]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline, samples, took = time.time() + 20, {}, 0.0
        while time.time() < deadline:
            started = time.perf_counter()
            samples = scrape(cluster)
            took = time.perf_counter() - started
            if total(samples, "raygroups_actor_up", actor="share-coordinator-1") == 0:
                break
        assert total(samples, "raygroups_actor_up", actor="share-coordinator-1") == 0
        assert total(samples, "raygroups_scrape_actors_failed") == 1
        assert total(samples, "raygroups_actor_up", actor="share-coordinator-0") == 1  # the others still answer
        assert took < 3 + 2  # the per-actor timeout, not the pause
        assert pause.wait(30) == 0
    finally:
        if pause.poll() is None:
            pause.kill()
    assert total(scrape(cluster), "raygroups_actor_up", actor="share-coordinator-1") == 1


def test_a_killed_group_coordinator_is_a_failover_and_scrapes_go_on(cluster):
    before = total(scrape(cluster), "raygroups_failovers_total")
    assert cluster.cli("kill", "group-coordinator-0").returncode == 0
    deadline, after, slowest = time.time() + 60, before, 0.0
    while time.time() < deadline:
        started = time.perf_counter()
        samples = scrape(cluster)
        slowest = max(slowest, time.perf_counter() - started)
        after = total(samples, "raygroups_failovers_total")
        if after > before:
            break
        time.sleep(0.5)
    assert after == before + 1
    assert total(samples, "raygroups_failover_partitions_total") >= 1
    assert total(samples, "raygroups_offline_partitions") == 0  # placed on the live coordinator
    # A scrape is bounded by the per-actor timeout (3 s) even while an actor is dying.
    assert slowest < 10
    up = {dict(ls)["actor"]: v for (n, ls), v in samples.items() if n == "raygroups_actor_up"}
    assert "group-coordinator-0" not in up  # dead: no longer asked


def test_the_grafana_dashboard_queries_only_metrics_the_live_scrapes_had(cluster):
    dashboard = json.loads((ROOT / "examples" / "grafana" / "raygroups.json").read_text())
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"raygroups_[a-z_]+", target["expr"])}
    scrape(cluster)
    assert used <= SCRAPED, sorted(used - SCRAPED)
