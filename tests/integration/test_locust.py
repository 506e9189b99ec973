"""locust, the locust way: loadtest/locustfile.py headless against a running cluster, alone and
as a master with two workers; every Kafka API a member calls is a request type in the stats CSV,
and the only failures are the transport errors the faults cause."""

from __future__ import annotations

import csv
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster_process import ClusterProcess

pytestmark = pytest.mark.slow

LOCUST = str(Path(sys.executable).with_name("locust"))
LOCUSTFILE = str(Path(__file__).resolve().parents[2] / "loadtest" / "locustfile.py")
# Every API the four user classes call while running (LeaveGroup and ShareAcknowledge at stop
# too, but the run may end before every user stopped cleanly; they are not required).
EXPECTED_APIS = {
    "CreateTopics", "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "OffsetFetch", "OffsetCommit",
    "ListOffsets", "Metadata", "Fetch", "InitProducerId", "Produce", "ShareGroupHeartbeat", "ShareFetch",
    "ConsumerGroupHeartbeat",
}
# What killing actors may cost a client: connections closed under it, answers that never came.
TRANSPORT_FAILURES = {"NETWORK_EXCEPTION", "REQUEST_TIMED_OUT"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(tmp_path_factory.mktemp("data"), "--config", "group.initial.rebalance.delay.ms=300",
                          "--config", "share.auto.offset.reset=earliest",
                          "--config", "group.share.heartbeat.interval.ms=1000", gateways=2).start()
    yield proc
    proc.stop()


def knobs(prefix: str) -> list[str]:
    return ["--groups", "2", "--members-per-group", "4", "--share-groups", "1", "--share-members-per-group", "4",
            "--share-ratio", "0.3", "--consumer-groups", "1", "--consumer-members-per-group", "3", "--consumer-ratio",
            "0.2", "--producers", "2", "--produce-rate", "50", "--partitions", "4",
            "--heartbeat-interval-ms", "1000", "--prefix", prefix]


def stats(csv_prefix: Path) -> dict[str, dict[str, str]]:
    with open(f"{csv_prefix}_stats.csv") as f:
        return {row["Type"]: row for row in csv.DictReader(f) if row["Type"]}


def failures(csv_prefix: Path) -> list[dict[str, str]]:
    with open(f"{csv_prefix}_failures.csv") as f:
        return list(csv.DictReader(f))


def error_name(cell: str) -> str:
    """The Kafka error name in locust's failure cell, e.g. "KafkaError('NETWORK_EXCEPTION')"."""
    found = re.search(r"KafkaError\('(\w+)'\)", cell)
    assert found, cell
    return found.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_headless_locust_reports_every_api_and_only_transport_failures_when_actors_die(cluster, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [LOCUST, "-f", LOCUSTFILE, "--host", cluster.bootstrap, "--headless", "-u", "14", "-r", "7", "-t", "30s",
         "--csv", str(out), "--only-summary", "--exit-code-on-error", "0", *knobs("solo")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Mid-run, once groups have formed, kill a group coordinator and a partition leader.
    deadline = time.time() + 60
    while time.time() < deadline and not any(g.startswith("solo-w") for g in _group_ids(cluster.bootstrap)):
        time.sleep(1)
    time.sleep(5)
    for actor in ("group-coordinator-0", "partition-leader-0"):
        assert cluster.cli("kill", actor).returncode == 0
    output, _ = proc.communicate(timeout=180)
    # The killed actors may cost a few transport failures (judged below), so locust's exit code
    # is told not to count them; anything else it reports as an error still fails here.
    assert proc.returncode == 0, output[-3000:]
    by_api = stats(out)
    assert EXPECTED_APIS <= set(by_api), sorted(by_api)
    for api, row in by_api.items():
        if api != "Aggregated":
            assert int(row["Request Count"]) > 0 and float(row["Average Response Time"]) > 0, row
    assert {error_name(row["Error"]) for row in failures(out)} <= TRANSPORT_FAILURES, failures(out)
    assert int(by_api["Fetch"]["Request Count"]) > 50 and int(by_api["Produce"]["Request Count"]) > 50


def test_distributed_locust_master_and_two_workers(cluster, tmp_path):
    out = tmp_path / "dist"
    port = free_port()
    master = subprocess.Popen(
        [LOCUST, "-f", LOCUSTFILE, "--host", cluster.bootstrap, "--master", "--master-bind-port", str(port),
         "--headless", "--expect-workers", "2", "--expect-workers-max-wait", "60", "-u", "16", "-r", "8", "-t", "25s",
         "--csv", str(out), "--only-summary", *knobs("dist")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = [subprocess.Popen([LOCUST, "-f", LOCUSTFILE, "--worker", "--master-host", "127.0.0.1",
                                 "--master-port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for _ in range(2)]
    try:
        output, _ = master.communicate(timeout=240)
    finally:
        for w in workers:
            try:
                w.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                w.kill()
    assert master.returncode == 0, output[-3000:]
    by_api = stats(out)
    assert EXPECTED_APIS - {"CreateTopics"} <= set(by_api), sorted(by_api)
    assert failures(out) == []
    # Both workers ran members: each names its groups after its own process.
    groups = _group_ids(cluster.bootstrap)
    assert len({g.split("-g")[0] for g in groups if g.startswith("dist-w") and "-g" in g}) == 2, groups


def _group_ids(bootstrap: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_groups(request_timeout=30).result()
    return [g.group_id for g in result.valid]
