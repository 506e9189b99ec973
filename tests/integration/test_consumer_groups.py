"""Classic consumer groups of real clients (confluent-kafka classic, kafka-python, aiokafka).

The group forms first, then records are produced: in the failure-free case every record is
consumed exactly once, offsets are committed and fetched back, and admin APIs show the group.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.clients import confluent_produce, create_topic, records
from tests.cluster_process import ClusterProcess

PARTITIONS = 6
RECORDS = 600


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(
        tmp_path_factory.mktemp("groups"), "--config", "group.initial.rebalance.delay.ms=300", gateways=2
    ).start()
    yield proc
    proc.stop()


class Members:
    """N consumers of one group in threads; what each consumed, and when all have a share.

    Stopping is two-phase: every member commits before any leaves. A member that left first would
    start a rebalance, and a commit racing it fails as Kafka fails it (REBALANCE_IN_PROGRESS while
    CompletingRebalance, ILLEGAL_GENERATION after the rejoin), so the test would see a client's
    shutdown race, not the coordinator."""

    def __init__(self, n: int = 3) -> None:
        self.consumed: Counter[tuple[int, int]] = Counter()
        self.assignments: dict[int, set[int]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.all_committed = threading.Barrier(n, timeout=60)
        self.errors: list[BaseException] = []

    def record(self, member: int, partition: int, offset: int) -> None:
        with self.lock:
            self.consumed[(partition, offset)] += 1

    def assigned(self, member: int, partitions: set[int]) -> None:
        with self.lock:
            self.assignments[member] = partitions

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    def formed(self, n: int) -> bool:
        with self.lock:
            shares = [self.assignments.get(i, set()) for i in range(n)]
        return all(shares) and set().union(*shares) == set(range(PARTITIONS)) and sum(map(len, shares)) == PARTITIONS

    def wait(self, condition, timeout: float = 60) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if condition():
                return True
            time.sleep(0.1)
        return False


def confluent_member(bootstrap: str, group: str, topic: str, i: int, members: Members) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    while not members.stop.is_set():
        msg = consumer.poll(0.2)
        members.assigned(i, {tp.partition for tp in consumer.assignment()})
        if msg is not None and not msg.error():
            members.record(i, msg.partition(), msg.offset())
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed, nothing to commit
            members.failed(exc)
    except Exception as exc:
        members.failed(exc)
    finally:
        members.all_committed.wait()
        consumer.close()


def kafka_python_member(bootstrap: str, group: str, topic: str, i: int, members: Members) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, heartbeat_interval_ms=500)
    while not members.stop.is_set():
        for msgs in consumer.poll(200).values():
            for m in msgs:
                members.record(i, m.partition, m.offset)
        members.assigned(i, {tp.partition for tp in consumer.assignment()})
    try:
        consumer.commit()
    except Exception as exc:
        members.failed(exc)
    finally:
        members.all_committed.wait()
        consumer.close()


def aiokafka_members(bootstrap: str, group: str, topic: str, n: int, members: Members) -> None:
    from aiokafka import AIOKafkaConsumer

    async def one(i: int, consumer: AIOKafkaConsumer) -> None:
        await consumer.start()
        while not members.stop.is_set():
            for msgs in (await consumer.getmany(timeout_ms=200)).values():
                for m in msgs:
                    members.record(i, m.partition, m.offset)
            members.assigned(i, {tp.partition for tp in consumer.assignment()})
        try:
            await consumer.commit()
        except Exception as exc:
            members.failed(exc)

    async def all_of_them() -> None:
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                      enable_auto_commit=False, heartbeat_interval_ms=500) for _ in range(n)]
        try:
            await asyncio.gather(*(one(i, c) for i, c in enumerate(consumers)))
        finally:  # every member has committed (the barrier of this one thread): now they may leave
            await asyncio.gather(*(c.stop() for c in consumers))

    asyncio.run(all_of_them())


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_a_group_of_three_consumes_every_record_exactly_once_and_commits(cluster, client):
    topic, group = f"orders-{client}", f"group-{client}"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    members = Members()
    if client == "aiokafka":
        threads = [threading.Thread(target=aiokafka_members, args=(cluster.bootstrap, group, topic, 3, members))]
    else:
        target = confluent_member if client == "confluent" else kafka_python_member
        threads = [threading.Thread(target=target, args=(cluster.bootstrap, group, topic, i, members)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        assert members.wait(lambda: members.formed(3)), members.assignments
        # Two partitions each: the group's leader ran its client's assignor over three members.
        assert sorted(len(p) for p in members.assignments.values()) == [2, 2, 2]
        confluent_produce(cluster.bootstrap, topic, records(RECORDS, PARTITIONS, client))
        assert members.wait(lambda: sum(members.consumed.values()) >= RECORDS), sum(members.consumed.values())
        time.sleep(0.5)
    finally:
        members.stop.set()
        for t in threads:
            t.join(60)
    assert members.errors == []
    assert len(members.consumed) == RECORDS and set(members.consumed.values()) == {1}
    assert committed(cluster.bootstrap, group, topic) == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}


def test_admin_apis_show_the_group_its_members_and_state(cluster):
    topic, group = "admin-view", "admin-view-group"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    members = Members(2)
    threads = [threading.Thread(target=confluent_member, args=(cluster.bootstrap, group, topic, i, members)) for i in range(2)]
    for t in threads:
        t.start()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        assert members.wait(lambda: members.formed(2))
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
        assert listed[group].state == ConsumerGroupState.STABLE
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
        assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [3, 3]
        from kafka import KafkaAdminClient

        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        view = kp.describe_groups([group])[group]
        assert view["group_state"] == "Stable" and len(view["members"]) == 2
        status = cluster.cli("status")
        assert status.returncode == 0 and "classic" in status.stdout and "Stable" in status.stdout
        # A live group cannot be deleted.
        with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
            admin.delete_consumer_groups([group])[group].result(30)
    finally:
        members.stop.set()
        for t in threads:
            t.join(60)
    assert members.wait(lambda: admin.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.EMPTY)
    assert kp.list_group_offsets(group)  # offsets committed on close are there
    admin.delete_consumer_groups([group])[group].result(30)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    kp.close()
