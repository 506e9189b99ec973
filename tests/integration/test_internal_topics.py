"""Internal topics served as Kafka serves them (issue 10): a consumer assigned the
__consumer_offsets partition of a group that committed, besides a user partition, reads all the
user records and the internal records (the stored batches, in raygroups' own record encoding), and
ListOffsets gives the partition's end offset. It read 0 of 50 user records before: the Fetch
closed the connection."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from coordinator.hashing import group_partition
from tests.clients import confluent_produce, create_topic, records

GROUP = "committer"


def _commit_as_group(bootstrap: str, topic: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                consumer.commit(message=msg, asynchronous=False)
                return
        raise AssertionError("the group never got a record to commit")
    finally:
        consumer.close()


def test_a_consumer_reads_a_user_partition_and_an_internal_one_side_by_side(cluster):
    create_topic(cluster.bootstrap, "user", 1)
    confluent_produce(cluster.bootstrap, "user", records(50, 1, "user"))
    _commit_as_group(cluster.bootstrap, "user")
    internal = TopicPartition("__consumer_offsets", group_partition(GROUP, 50), 0)

    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        low, high = reader.get_watermark_offsets(TopicPartition(internal.topic, internal.partition), timeout=30)
        assert low == 0 and high >= 1
        reader.assign([internal, TopicPartition("user", 0, 0)])
        user: list[int] = []
        internal_offsets: list[int] = []
        deadline = time.time() + 60
        while (len(user) < 50 or not internal_offsets or internal_offsets[-1] < high - 1) and time.time() < deadline:
            msg = reader.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            (user if msg.topic() == "user" else internal_offsets).append(msg.offset())
        assert user == list(range(50))
        assert internal_offsets and internal_offsets[-1] == high - 1
    finally:
        reader.close()
