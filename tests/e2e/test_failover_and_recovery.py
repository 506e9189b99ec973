"""Failover and recovery with real clients: restarts, torn log tails, a leader killed mid-produce."""

from __future__ import annotations

import json

import threading
import time
from pathlib import Path

import pytest

from tests.clients import aiokafka_consume_all, confluent_consume_all, confluent_produce, create_topic, records
from tests.cluster_process import ClusterProcess

pytestmark = pytest.mark.slow


def test_restart_on_the_same_data_dir_serves_the_same_records_and_accepts_more(tmp_path):
    cluster = ClusterProcess(tmp_path / "data").start()
    try:
        create_topic(cluster.bootstrap, "durable", 3)
        first = confluent_produce(cluster.bootstrap, "durable", records(500, 3, "before"))
    finally:
        assert cluster.stop() == 0
    cluster = ClusterProcess(tmp_path / "data").start()
    try:
        got = aiokafka_consume_all(cluster.bootstrap, "durable", 3, expected=500)
        assert sorted(got, key=lambda r: (r.partition, r.offset)) == sorted(first, key=lambda r: (r.partition, r.offset))
        more = confluent_produce(cluster.bootstrap, "durable", records(90, 3, "after"))
        # Offsets continue where the log ended.
        ends = {p: max(r.offset for r in first if r.partition == p) for p in range(3)}
        assert all(r.offset > ends[r.partition] for r in more)
        assert len(confluent_consume_all(cluster.bootstrap, "durable", 3, expected=590)) == 590
    finally:
        cluster.stop()


def test_torn_tail_is_truncated_reported_and_the_partition_keeps_serving(tmp_path):
    data = tmp_path / "data"
    cluster = ClusterProcess(data).start()
    try:
        create_topic(cluster.bootstrap, "torn", 1)
        acked = confluent_produce(cluster.bootstrap, "torn", records(200, 1, "t"))
    finally:
        cluster.stop()
    segment = sorted((data / "torn-0").glob("*.log"))[-1]
    with open(segment, "ab") as f:  # half a batch, as a crash mid-write leaves it
        f.write(b"\x00" * 8 + b"\x00\x00\x01\x00" + b"\x13" * 40)
    (data / "torn-0" / "recovery-point").unlink(missing_ok=True)
    cluster = ClusterProcess(data).start()
    try:
        got = confluent_consume_all(cluster.bootstrap, "torn", 1, expected=200)
        assert [r.offset for r in got] == [r.offset for r in acked]
        more = confluent_produce(cluster.bootstrap, "torn", records(5, 1, "n"))
        assert [r.offset for r in more] == list(range(200, 205))
        assert cluster.wait_for_event("log-recovered", "torn-0: "), cluster.events()
    finally:
        cluster.stop()


def test_killing_a_partition_leader_mid_produce_loses_no_acknowledged_record(tmp_path):
    cluster = ClusterProcess(tmp_path / "data", "--partition-leaders", "2").start()
    try:
        topic, partitions, total = "failover", 4, 4000
        create_topic(cluster.bootstrap, topic, partitions)
        acked: list = []
        produced = threading.Event()

        def produce() -> None:
            items = records(total, partitions, "f")
            for start in range(0, total, 200):
                acked.extend(confluent_produce(cluster.bootstrap, topic, items[start : start + 200]))
                if start >= total // 3:
                    produced.set()
            produced.set()

        worker = threading.Thread(target=produce)
        worker.start()
        assert produced.wait(120)
        actors = json.loads(cluster.cli("actors", "--json").stdout)["actors"]
        victim = next(a["name"] for a in actors if a["kind"] == "partition-leader" and a["partitions"])
        result = cluster.cli("kill", victim)
        assert result.returncode == 0, result.stderr
        worker.join(240)
        assert not worker.is_alive()
        # confluent_produce asserts every record was acknowledged with no delivery error.
        assert len(acked) == total
        # The log may hold more than was acknowledged: this producer is not idempotent, and a batch
        # the killed leader wrote but could not answer is written again by its retry (Kafka's
        # at-least-once; seen once in CI, 50 records twice). Read the whole log, then every
        # acknowledged record must be where its acknowledgement said.
        in_log = sum(high for _, high in log_ends(cluster.bootstrap, topic, partitions))
        assert in_log >= total
        got = confluent_consume_all(cluster.bootstrap, topic, partitions, expected=in_log, timeout=120)
        assert len(got) == in_log
        stored = {(r.partition, r.offset): r.key for r in got}
        assert all(stored.get((r.partition, r.offset)) == r.key for r in acked)
        assert {r.key for r in got} == {r.key for r in acked}  # a duplicate is of an acknowledged record
        assert cluster.wait_for_event(f"{victim} died", f"partitions of {victim} moved"), cluster.events()
    finally:
        cluster.stop()


def test_a_killed_gateway_comes_back_on_its_port_and_clients_resume(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster = ClusterProcess(tmp_path / "data").start()  # one gateway, on a port picked at start
    try:
        create_topic(cluster.bootstrap, "through-gateway", 2)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "gw", "enable.auto.commit": False})
        consumer.assign([TopicPartition("through-gateway", p, 0) for p in range(2)])
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        received: list[float] = []
        killed_at = None
        start = time.time()
        while time.time() - start < 30:
            producer.produce("through-gateway", value=b"x", partition=len(received) % 2)
            producer.poll(0)
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                received.append(time.time())
            if killed_at is None and len(received) >= 5:
                assert cluster.cli("kill", "gateway-0").returncode == 0
                killed_at = time.time()
            if killed_at is not None and received[-1] > killed_at + 1 and len([t for t in received if t > killed_at]) >= 5:
                break
        assert killed_at is not None
        resumed = [t for t in received if t > killed_at]
        assert len(resumed) >= 5, "no records through the restarted gateway"
        assert resumed[0] - killed_at < 15
        assert cluster.wait_for_event(f"gateway-0 listening again on 127.0.0.1:{cluster.port}")
        producer.flush(30)
        consumer.close()
    finally:
        cluster.stop()


def log_ends(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> list[tuple[int, int]]:
    """(low, high) watermarks of each partition. NOT_LEADER_OR_FOLLOWER is retriable: right after a
    failover the replacement actor may take its share of partitions, and a partition on its way
    there answers it until loaded (librdkafka's watermark query, unlike its producer, does not
    retry by itself)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", "enable.auto.commit": False})
    deadline = time.time() + timeout
    try:
        ends = []
        for p in range(partitions):
            while True:
                try:
                    ends.append(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10))
                    break
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION or time.time() > deadline:
                        raise
                    time.sleep(0.2)
        return ends
    finally:
        consumer.close()
