"""A stock Kafka server.properties starts a cluster with warnings only, and the operator commands'
--json output and kill --coordinator-of / --leader-of work against it (one cluster, real clients).

tests/data/kafka-server.properties is Kafka's own KRaft combined-mode config/kraft/server.properties
(Apache-2.0, unchanged), the file Kafka 4 ships as config/server.properties.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from coordinator.hashing import group_partition
from tests.clients import confluent_consume_all, confluent_produce, create_topic, records
from tests.cluster_process import ClusterProcess

STOCK = Path(__file__).parents[1] / "data" / "kafka-server.properties"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(tmp_path_factory.mktemp("stock"), "--config-file", str(STOCK),
                          "--config", "group.initial.rebalance.delay.ms=0", gateways=1).start()
    yield proc
    proc.stop()


def status_json(cluster) -> dict:
    result = cluster.cli("status", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def leader(doc: dict, topic: str, partition: int) -> dict:
    (lead,) = [x for x in doc["leaders"] if x["topic"] == topic and x["partition"] == partition]
    return lead


def wait_for_new_leader(cluster, topic: str, partition: int, before: dict, timeout: float = 90) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        doc = status_json(cluster)
        now = [x for x in doc["leaders"] if x["topic"] == topic and x["partition"] == partition]
        if now and now[0]["epoch"] > before["epoch"]:
            return now[0]
        time.sleep(0.5)
    raise AssertionError(f"{topic}-{partition} kept its leader {before}")


def test_stock_server_properties_starts_with_warnings_only(cluster):
    err = cluster.events()
    assert "error" not in err.lower()
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert any("process.roles" in w and "node.id" in w and "controller.quorum.voters" in w for w in warnings)
    assert any("CONTROLLER://:9093 ignored" in w for w in warnings)
    assert cluster.port != 9092  # --port 0 on the command line wins over the file's listeners
    assert cluster.wait_for_event(f"data in {cluster.data_dir.resolve()}")  # --data-dir wins over log.dirs


def test_a_client_talks_to_it(cluster):
    create_topic(cluster.bootstrap, "stock", 2)
    confluent_produce(cluster.bootstrap, "stock", records(20, 2, "a"))
    assert len(confluent_consume_all(cluster.bootstrap, "stock", 2, 20)) == 20


def test_status_and_actors_json_have_the_leadership_map(cluster):
    create_topic(cluster.bootstrap, "mapped", 3)
    doc = status_json(cluster)
    for p in range(3):
        lead = leader(doc, "mapped", p)
        assert lead["actor"].startswith("partition-leader-") and lead["epoch"] >= 0
    assert {t["name"] for t in doc["topics"]} >= {"mapped", "__consumer_offsets"}
    actors = cluster.cli("actors", "--json")
    assert actors.returncode == 0, actors.stderr
    actors_doc = json.loads(actors.stdout)
    assert {"gateway", "partition-leader", "group-coordinator"} <= {a["kind"] for a in actors_doc["actors"]}
    assert leader(actors_doc, "mapped", 0)["actor"] == leader(doc, "mapped", 0)["actor"]
    # One node, one data directory: one replica, which every actor keeping logs is a host of.
    (replica,) = doc["replicas"]
    assert replica["replica_id"] == 0 and replica["nodes"] == doc["nodes"]
    meta = (cluster.data_dir / "meta.properties").read_text()
    assert f"directory.id={replica['directory_id']}" in meta
    keepers = [a for a in actors_doc["actors"] if a["kind"] != "gateway" and a["alive"]]
    assert keepers and all(a["replica_id"] == 0 for a in keepers)


def test_kill_leader_of_fails_that_partition_over(cluster):
    create_topic(cluster.bootstrap, "victim", 2)
    confluent_produce(cluster.bootstrap, "victim", records(10, 2, "b"))
    before = leader(status_json(cluster), "victim", 1)
    result = cluster.cli("kill", "--leader-of", "victim-1")
    assert result.returncode == 0, result.stderr
    assert f"killed {before['actor']}" in result.stdout
    wait_for_new_leader(cluster, "victim", 1, before)
    assert len(confluent_consume_all(cluster.bootstrap, "victim", 2, 10)) == 10


def test_kill_coordinator_of_kills_the_groups_coordinator(cluster):
    group = "stock-group"
    create_topic(cluster.bootstrap, "offsets", 1)
    confluent_produce(cluster.bootstrap, "offsets", records(5, 1, "c"))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["offsets"])
    seen = 0
    deadline = time.time() + 60
    while seen < 5 and time.time() < deadline:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    partition = group_partition(group, 50)
    before = leader(status_json(cluster), "__consumer_offsets", partition)
    result = cluster.cli("kill", "--coordinator-of", group)
    assert result.returncode == 0, result.stderr
    assert f"killed {before['actor']}" in result.stdout
    wait_for_new_leader(cluster, "__consumer_offsets", partition, before)
