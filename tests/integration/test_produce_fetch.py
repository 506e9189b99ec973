"""Real clients against `raygroups up`: producers and manually-assigned consumers round-trip records."""

from __future__ import annotations

import time
from collections import defaultdict

from confluent_kafka import Consumer, TopicPartition

from tests.clients import (
    aiokafka_consume_all,
    confluent_consume_all,
    confluent_produce,
    create_topic,
    kafka_python_produce,
    records,
)


def _by_partition(recs):
    out = defaultdict(list)
    for r in recs:
        out[r.partition].append(r)
    return out


def test_two_producers_and_two_consumers_agree_on_every_record(cluster):
    topic, partitions = "round-trip", 4
    create_topic(cluster.bootstrap, topic, partitions)
    acked = confluent_produce(cluster.bootstrap, topic, records(600, partitions, "ck"))
    acked += kafka_python_produce(cluster.bootstrap, topic, records(400, partitions, "kp"))
    assert len(acked) == 1000

    for consume in (confluent_consume_all, aiokafka_consume_all):
        got = consume(cluster.bootstrap, topic, partitions, expected=1000)
        assert sorted(got, key=lambda r: (r.partition, r.offset)) == sorted(acked, key=lambda r: (r.partition, r.offset))
        # Offsets are dense per partition, starting at 0, in produce order.
        for partition, recs in _by_partition(got).items():
            assert [r.offset for r in sorted(recs, key=lambda r: r.offset)] == list(range(len(recs)))


def test_list_offsets_earliest_latest_and_by_time(cluster):
    topic = "offsets-by-time"
    create_topic(cluster.bootstrap, topic, 1)
    before = int(time.time() * 1000)
    confluent_produce(cluster.bootstrap, topic, records(10, 1, "a"))
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    confluent_produce(cluster.bootstrap, topic, records(5, 1, "b"))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "lo"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 15)
        (at_middle,) = consumer.offsets_for_times([TopicPartition(topic, 0, middle)], timeout=10)
        assert at_middle.offset == 10
        (at_start,) = consumer.offsets_for_times([TopicPartition(topic, 0, before)], timeout=10)
        assert at_start.offset == 0
        (future,) = consumer.offsets_for_times([TopicPartition(topic, 0, middle + 3_600_000)], timeout=10)
        assert future.offset == -1  # Kafka: no record at or after that time
    finally:
        consumer.close()


def test_fetch_long_poll_returns_when_records_arrive(cluster):
    topic = "long-poll"
    create_topic(cluster.bootstrap, topic, 2)
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "lp", "fetch.wait.max.ms": 5000, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    try:
        assert consumer.poll(1.0) is None  # nothing there: the fetch is parked on the leader
        start = time.time()
        confluent_produce(cluster.bootstrap, topic, [(1, b"k", b"v", [])])
        msg = None
        while msg is None and time.time() - start < 10:
            msg = consumer.poll(0.2)
        # Delivered well before the 5 s max wait: the new record completed the long poll.
        assert msg is not None and msg.value() == b"v"
        assert time.time() - start < 4
    finally:
        consumer.close()
