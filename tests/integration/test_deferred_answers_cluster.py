"""Deferred answers through real Ray and real clients: a cluster whose group coordinators answer
every operation apart from its batch (`raygroups.coordinator.defer.after.ms=0`: nothing is
finished when the batch's call returns), so every JoinGroup's follow-up, Heartbeat, OffsetCommit
and OffsetFetch travels as a Deferred answer collected with Endpoint.COORDINATOR_DEFERRED over
the actor's channel. A classic confluent-kafka group consumes, commits and reads its offsets
back, kafka-python's group does the same, and the counter shows the answers went that way."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.clients import confluent_produce, create_topic, kafka_python_round_trip, records
from tests.cluster_process import ClusterProcess

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = ClusterProcess(
        tmp_path_factory.mktemp("deferred"),
        "--config", "raygroups.coordinator.defer.after.ms=0",
        "--config", f"raygroups.metrics.port={port}",
        "--config", "group.initial.rebalance.delay.ms=300",
    ).start()
    proc.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield proc
    proc.stop()


def deferred_answers(cluster) -> float:
    with urllib.request.urlopen(cluster.metrics_url, timeout=30) as answer:
        text = answer.read().decode()
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "raygroups_coordinator_deferred_answers_total")


def test_a_classic_group_consumes_commits_and_reads_back_through_deferred_answers(cluster):
    topic, group = "deferred", "deferred-group"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    produced = confluent_produce(cluster.bootstrap, topic, records(60, PARTITIONS, "d"))
    assert len(produced) == 60
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10_000})
    consumer.subscribe([topic])
    got = []
    try:
        while len(got) < 60:
            message = consumer.poll(30)
            assert message is not None, f"consumed {len(got)} of 60"
            assert message.error() is None, message.error()
            got.append((message.partition(), message.offset()))
        committed = consumer.commit(asynchronous=False)
        assert all(tp.error is None for tp in committed)
    finally:
        consumer.close()
    assert len(set(got)) == 60
    ends = {p: max(o for q, o in got if q == p) + 1 for p in range(PARTITIONS)}
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        back = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        assert {tp.partition: tp.offset for tp in back} == ends
    finally:
        reader.close()
    assert deferred_answers(cluster) > 0


def test_kafka_python_reads_in_a_group_through_deferred_answers(cluster):
    before = deferred_answers(cluster)
    got = kafka_python_round_trip({"bootstrap_servers": cluster.bootstrap}, "deferred-kp", "deferred-kp-group")
    assert got == [f"k{i}".encode() for i in range(5)]
    assert deferred_answers(cluster) > before
