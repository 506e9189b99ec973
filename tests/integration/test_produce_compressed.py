"""Real clients' compressed batches still go through (issue 10): produce now decompresses each
compressed batch and counts its records, so every codec a client writes must be read the way Kafka
reads it (librdkafka's raw snappy and lz4 frames, kafka-python's gzip)."""

from __future__ import annotations

import pytest

from tests.clients import Rec, confluent_consume_all, confluent_produce, create_topic, records


def _key(r: Rec):
    return (r.partition, r.offset, r.key, r.value)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_produces_every_codec_and_reads_every_record_back(cluster, codec):
    topic, partitions = f"compressed-{codec}", 2
    create_topic(cluster.bootstrap, topic, partitions)
    acked = confluent_produce(
        cluster.bootstrap, topic, records(2000, partitions, codec), **{"compression.type": codec, "linger.ms": 20}
    )
    got = confluent_consume_all(cluster.bootstrap, topic, partitions, expected=2000)
    assert sorted(map(_key, got)) == sorted(map(_key, acked))


def test_kafka_python_gzip_round_trips(cluster):
    from kafka import KafkaProducer

    topic = "compressed-kafka-python-gzip"
    create_topic(cluster.bootstrap, topic, 1)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False, linger_ms=20, compression_type="gzip"
    )
    items = records(500, 1, "kp-gzip")
    futures = [(producer.send(topic, key=k, value=v, headers=h, partition=p), k, v) for p, k, v, h in items]
    producer.flush(60)
    acked = []
    for future, k, v in futures:
        meta = future.get(30)
        acked.append((meta.partition, meta.offset, k, v))
    producer.close()
    got = confluent_consume_all(cluster.bootstrap, topic, 1, expected=500)
    assert sorted(map(_key, got)) == sorted(acked)
