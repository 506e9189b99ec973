"""Idempotent producers across failures: a partition leader killed mid-produce, a retry that
reaches the new leader, and producer ids across a restart of the whole cluster."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from cluster.admin_client import admin_call
from cluster.gateway.apis import ApiKey
from tests.clients import confluent_consume_all, create_topic, records
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.raw_producer import init_producer_id, produce, producer_batch, stored_batches

pytestmark = pytest.mark.slow

RETRIABLE = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error, ErrorCode.request_timed_out}


def leader_of(cluster: ClusterProcess, topic: str, partition: int) -> tuple[str, int]:
    for lead in admin_call(cluster.bootstrap, "status")["leaders"]:
        if (lead["topic"], lead["partition"]) == (topic, partition):
            return lead["actor"], lead["epoch"]
    raise AssertionError(f"{topic}-{partition} has no leader")


def kill(cluster: ClusterProcess, actor: str) -> None:
    result = cluster.cli("kill", actor)
    assert result.returncode == 0, result.stderr


def test_killing_a_leader_under_an_idempotent_producer_leaves_every_record_exactly_once(tmp_path):
    cluster = ClusterProcess(tmp_path / "data", "--partition-leaders", "2").start()
    try:
        topic, partitions, total = "idempotent-failover", 4, 6000
        create_topic(cluster.bootstrap, topic, partitions)
        items = records(total, partitions, "f")
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 5, "max.in.flight": 5}
        )
        acked: list[tuple[int, int, bytes]] = []
        errors: list[str] = []
        a_third_sent = threading.Event()

        def on_delivery(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                acked.append((msg.partition(), msg.offset(), msg.value()))

        def produce_all() -> None:
            for i, (partition, key, value, headers) in enumerate(items):
                while True:
                    try:
                        producer.produce(topic, key=key, value=value, headers=headers, partition=partition, on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
                if i % 100 == 99:
                    time.sleep(0.02)  # a steady stream, so that the kill lands among in-flight requests
                if i == total // 3:
                    a_third_sent.set()
            producer.flush(120)

        worker = threading.Thread(target=produce_all)
        worker.start()
        assert a_third_sent.wait(120)
        victim, _ = leader_of(cluster, topic, 0)
        kill(cluster, victim)
        worker.join(240)
        assert not worker.is_alive()
        assert not errors, errors[:5]
        assert len(acked) == total
        got = confluent_consume_all(cluster.bootstrap, topic, partitions, expected=total, timeout=120)
        counts = Counter(r.value for r in got)
        assert sorted(counts) == sorted(v for _, _, v, _ in items)
        assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
        assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(acked)
        assert cluster.wait_for_event(f"{victim} died", f"partitions of {victim} moved"), cluster.events()
    finally:
        cluster.stop()


def test_a_retry_reaching_the_new_leader_after_a_kill_is_answered_as_a_duplicate(tmp_path):
    cluster = ClusterProcess(tmp_path / "data", "--partition-leaders", "2").start()
    try:
        topic = "idempotent-retry"
        create_topic(cluster.bootstrap, topic, 2)
        with KioClient(cluster.bootstrap) as client:
            _, pid, epoch = init_producer_id(client)
            sent = [producer_batch(pid, epoch, seq, 2) for seq in range(0, 12, 2)]
            offsets = [produce(client, topic, 1, batch) for batch in sent]
            assert offsets == [(ErrorCode.none, o) for o in range(0, 12, 2)]
            victim, old_epoch = leader_of(cluster, topic, 1)
            kill(cluster, victim)
            deadline = time.time() + 30
            while leader_of(cluster, topic, 1)[1] == old_epoch and time.time() < deadline:
                time.sleep(0.1)
            # The producer never saw the last answer and sends the batch again, to the new leader.
            answer = produce(client, topic, 1, sent[-1])
            while answer[0] in RETRIABLE and time.time() < deadline:
                time.sleep(0.2)
                answer = produce(client, topic, 1, sent[-1])
            assert answer == (ErrorCode.none, 10)
            assert produce(client, topic, 1, sent[1]) == (ErrorCode.none, 2)  # any of the last five
            assert produce(client, topic, 1, producer_batch(pid, epoch, 14, 1))[0] == ErrorCode.out_of_order_sequence_number
            assert produce(client, topic, 1, producer_batch(pid, epoch, 12, 1)) == (ErrorCode.none, 12)
            assert [h.base_sequence for h in stored_batches(client, topic, 1)] == [0, 2, 4, 6, 8, 10, 12]
        assert leader_of(cluster, topic, 1)[0] != victim
    finally:
        cluster.stop()


def test_producer_ids_are_never_handed_out_twice_across_a_restart(tmp_path):
    first_run: list[int] = []
    cluster = ClusterProcess(tmp_path / "data", gateways=2).start()
    try:
        for port in cluster.ports:
            with KioClient(f"127.0.0.1:{port}") as client:
                first_run += [init_producer_id(client)[1] for _ in range(5)]
    finally:
        assert cluster.stop() == 0
    cluster = ClusterProcess(tmp_path / "data", gateways=2).start()
    try:
        second_run: list[int] = []
        for port in cluster.ports:
            with KioClient(f"127.0.0.1:{port}") as client:
                second_run += [init_producer_id(client)[1] for _ in range(5)]
                assert client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert len(set(first_run + second_run)) == 20
        assert min(second_run) > max(first_run)  # blocks continue after the last one handed out
    finally:
        cluster.stop()
