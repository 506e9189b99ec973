"""Kafka's admin tools for group offsets on a live cluster: OffsetDelete, AlterShareGroupOffsets,
DeleteShareGroupOffsets, and the existing alter/list of consumer group offsets.

confluent_kafka's AdminClient (2.16) has alter_consumer_group_offsets and list_consumer_group_offsets
but neither delete_consumer_group_offsets nor share-group offset calls: OffsetDelete goes through
kafka-python's KafkaAdminClient.delete_group_offsets, the share-group APIs as raw requests.
"""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import GroupSubscribedToTopicError, NoError
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from tests.clients import confluent_produce, create_topic
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.share_runs import ShareConsumerProc, share_partitions, wait_until

OFFSET_INVALID = -1001  # librdkafka's "no committed offset"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(
        tmp_path_factory.mktemp("admin-offsets"),
        "--config", "share.auto.offset.reset=earliest",
        "--config", "group.share.heartbeat.interval.ms=500",
        "--config", "group.share.session.timeout.ms=10000",
        "--config", "group.initial.rebalance.delay.ms=0",
        gateways=2,
    ).start()
    yield proc
    proc.stop()


def listed(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    (future,) = admin.list_consumer_group_offsets([request]).values()
    return {tp.partition: tp.offset for tp in future.result(30).topic_partitions}


def test_offsets_of_an_empty_group_are_altered_listed_and_deleted(cluster):
    topic, group = "od-empty", "g-od-empty"
    create_topic(cluster.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    altered = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)])
    (future,) = admin.alter_consumer_group_offsets([altered]).values()
    assert [(tp.partition, tp.offset, tp.error) for tp in future.result(30).topic_partitions] == [(0, 5, None), (1, 7, None)]
    assert listed(admin, group, topic, 2) == {0: 5, 1: 7}

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        answer = kp.delete_group_offsets(group, [KTopicPartition(topic, 0)])
        assert answer == {KTopicPartition(topic, 0): NoError}
        assert listed(admin, group, topic, 2) == {0: OFFSET_INVALID, 1: 7}
    finally:
        kp.close()

    # A topic the cluster does not know, a group it does not know (raw: the top-level error).
    with KioClient(cluster.bootstrap) as client:
        unknown = client.call(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": "no-such-topic", "partitions": [{"partition_index": 0}]}]})
        assert [(t.name, [p.error_code for p in t.partitions]) for t in unknown.topics] == [
            ("no-such-topic", [ErrorCode.unknown_topic_or_partition])]
        missing = client.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "g-never", "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}]}]})
        assert (missing.error_code, missing.topics) == (ErrorCode.group_id_not_found, ())


def test_a_group_with_a_member_subscribed_to_the_topic_keeps_its_offsets(cluster):
    topic, group = "od-live", "g-od-live"
    create_topic(cluster.bootstrap, topic, 1)
    confluent_produce(cluster.bootstrap, topic, [(0, b"k", b"v", [])] * 3)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        consumer.subscribe([topic])
        deadline = time.time() + 60
        while not consumer.assignment() and time.time() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        answer = kp.delete_group_offsets(group, [KTopicPartition(topic, 0)])
        assert answer == {KTopicPartition(topic, 0): GroupSubscribedToTopicError}
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert listed(admin, group, topic, 1) == {0: 2}
    finally:
        kp.close()
        consumer.close()


# -- share groups ------------------------------------------------------------------------------------


def share_offsets(cluster, group: str) -> dict[tuple[str, int], int]:
    """DescribeShareGroupOffsets of every topic the group has share state for: start offsets."""
    with KioClient(cluster.bootstrap) as client:
        response = client.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})
    (g,) = response.groups
    assert g.error_code == ErrorCode.none, g
    return {(t.topic_name, p.partition_index): p.start_offset for t in g.topics for p in t.partitions}


def alter(cluster, group: str, topic: str, offsets: dict[int, int]):
    with KioClient(cluster.bootstrap) as client:
        partitions = [{"partition_index": p, "start_offset": o} for p, o in offsets.items()]
        return client.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": partitions}]})


def delete(cluster, group: str, *topics: str):
    with KioClient(cluster.bootstrap) as client:
        return client.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
            {"topic_name": t} for t in topics]})


def consume(cluster, group: str, topic: str) -> list[tuple[int, int]]:
    """One ShareConsumer run to its end: the (offset, delivery count) it received."""
    proc = ShareConsumerProc.start("c", cluster.bootstrap, group, topic, "--idle", "4")
    try:
        assert proc.wait() == 0, proc.lines[-5:]
    finally:
        proc.kill()
    return sorted((d["o"], d["dc"]) for d in proc.delivered())


def empty(cluster, group: str) -> bool:
    with KioClient(cluster.bootstrap) as client:
        (g,) = client.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}).groups
    return g.group_state == "Empty"


def test_alter_moves_an_empty_share_groups_start_offset_and_a_live_group_refuses(cluster):
    topic, group = "sh-alter", "sg-alter"
    create_topic(cluster.bootstrap, topic, 1)
    confluent_produce(cluster.bootstrap, topic, [(0, b"k", f"v{i}".encode(), []) for i in range(20)])
    assert [o for o, _ in consume(cluster, group, topic)] == list(range(20))
    wait_until(lambda: empty(cluster, group), what="the group Empty")
    assert share_offsets(cluster, group) == {(topic, 0): 20}

    response = alter(cluster, group, topic, {0: 5, 3: 1})
    assert response.error_code == ErrorCode.none
    (t,) = response.responses
    assert t.topic_name == topic and t.topic_id is not None
    assert [(p.partition_index, p.error_code) for p in t.partitions] == [
        (0, ErrorCode.none), (3, ErrorCode.unknown_topic_or_partition)]
    assert share_offsets(cluster, group) == {(topic, 0): 5}
    # A new consumer starts at the new start offset; records 5.. are delivered again, afresh.
    assert consume(cluster, group, topic) == [(o, 1) for o in range(5, 20)]

    live = ShareConsumerProc.start("live", cluster.bootstrap, group, topic, "--idle", "60")
    try:
        wait_until(lambda: not empty(cluster, group), timeout=60, what="a live member")
        refused = alter(cluster, group, topic, {0: 0})
        assert (refused.error_code, refused.responses) == (ErrorCode.non_empty_group, ())
        refused = delete(cluster, group, topic)
        assert (refused.error_code, refused.responses) == (ErrorCode.non_empty_group, ())
    finally:
        live.kill()
    missing = alter(cluster, "sg-never", topic, {0: 0})
    assert missing.error_code == ErrorCode.group_id_not_found


def test_delete_removes_a_share_groups_state_and_a_new_consumer_starts_by_the_reset_policy(cluster):
    topic, group = "sh-delete", "sg-delete"
    create_topic(cluster.bootstrap, topic, 1)
    confluent_produce(cluster.bootstrap, topic, [(0, b"k", f"v{i}".encode(), []) for i in range(10)])
    assert len(consume(cluster, group, topic)) == 10
    wait_until(lambda: empty(cluster, group), what="the group Empty")
    assert share_offsets(cluster, group) == {(topic, 0): 10}

    response = delete(cluster, group, topic, "no-such-topic")
    assert response.error_code == ErrorCode.none
    answers = {t.topic_name: (t.error_code, t.topic_id is not None) for t in response.responses}
    assert answers == {topic: (ErrorCode.none, True), "no-such-topic": (ErrorCode.unknown_topic_or_partition, False)}
    assert share_offsets(cluster, group) == {}
    # share.auto.offset.reset=earliest: everything again, each record a first delivery.
    assert consume(cluster, group, topic) == [(o, 1) for o in range(10)]
    assert share_offsets(cluster, group) == {(topic, 0): 10}


def test_alter_reaches_a_share_partition_the_leader_still_holds_for_a_stopped_consumer(cluster):
    """SIGSTOP keeps the consumer's connection, so its share session and the leader's share partition
    (its records acquired) outlive its membership; Kafka fences that partition with the state epoch,
    here the leader drops it after the Alter, and the next consumer reads the new start offset."""
    topic, group = "sh-stale", "sg-stale"
    create_topic(cluster.bootstrap, topic, 1)
    confluent_produce(cluster.bootstrap, topic, [(0, b"k", f"v{i}".encode(), []) for i in range(10)])
    holder = ShareConsumerProc.start("holder", cluster.bootstrap, group, topic, "--policy", "hold")
    try:
        holder.wait_for("holding")
        holder.signal(signal.SIGSTOP)
        wait_until(lambda: empty(cluster, group), timeout=60, what="the stopped member expired")
        assert share_partitions(cluster.bootstrap, group, topic), "the leader still holds the share partition"
        response = alter(cluster, group, topic, {0: 7})
        assert [(p.partition_index, p.error_code) for t in response.responses for p in t.partitions] == [(0, ErrorCode.none)]
        assert consume(cluster, group, topic) == [(7, 1), (8, 1), (9, 1)]
    finally:
        holder.kill()
