"""Idempotent producers against `raygroups up`: real clients with idempotence on, and raw
InitProducerId/Produce requests for the cases a client never shows (retries, gaps, fencing)."""

from __future__ import annotations

from collections import Counter

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import SUPPORTED, ApiKey
from tests.clients import confluent_consume_all, confluent_produce, create_topic, records
from tests.kio_client import KioClient
from tests.raw_producer import init_producer_id, produce, producer_batch, stored_batches


def assert_exactly_once(got, sent_values: list[bytes]) -> None:
    counts = Counter(r.value for r in got)
    assert sorted(counts) == sorted(sent_values)
    assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]


def test_kafka_python_producer_with_default_settings_is_idempotent_and_writes_each_record_once(cluster):
    from kafka import KafkaProducer

    topic, partitions, total = "idempotent-kafka-python", 3, 600
    create_topic(cluster.bootstrap, topic, partitions)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)  # kafka-python 3: idempotent by default
    assert producer.config["enable_idempotence"] is True
    items = records(total, partitions, "kp")
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=p) for p, k, v, h in items]
    producer.flush(60)
    offsets = [f.get(30) for f in futures]
    producer.close()
    assert all(meta.offset >= 0 for meta in offsets)
    assert_exactly_once(confluent_consume_all(cluster.bootstrap, topic, partitions, expected=total), [v for _, _, v, _ in items])
    with KioClient(cluster.bootstrap) as client:
        headers = [h for p in range(partitions) for h in stored_batches(client, topic, p)]
    # Every stored batch carries the producer id InitProducerId gave and a sequence.
    assert {h.producer_id for h in headers} != {-1} and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)


def test_confluent_producer_with_idempotence_writes_each_record_once(cluster):
    topic, partitions, total = "idempotent-confluent", 4, 2000
    create_topic(cluster.bootstrap, topic, partitions)
    items = records(total, partitions, "ck")
    acked = confluent_produce(cluster.bootstrap, topic, items, **{"enable.idempotence": True, "max.in.flight": 5})
    assert len(acked) == total
    got = confluent_consume_all(cluster.bootstrap, topic, partitions, expected=total)
    assert_exactly_once(got, [v for _, _, v, _ in items])
    assert sorted((r.partition, r.offset) for r in got) == sorted((r.partition, r.offset) for r in acked)
    with KioClient(cluster.bootstrap) as client:
        for p in range(partitions):
            headers = stored_batches(client, topic, p)
            assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
            # One producer, one epoch: the sequences run on without a gap or a repeat.
            sequences = [(h.base_sequence, h.last_offset_delta) for h in headers]
            assert sequences[0][0] == 0
            assert all(seq == prev + delta + 1 for (prev, delta), (seq, _) in zip(sequences, sequences[1:]))


def test_a_resent_batch_is_stored_once_and_answered_with_its_first_offset(cluster):
    topic = "idempotent-raw"
    create_topic(cluster.bootstrap, topic, 2)
    with KioClient(cluster.bootstrap) as client:
        error, pid, epoch = init_producer_id(client)
        assert error == ErrorCode.none and pid >= 0 and epoch == 0
        first = producer_batch(pid, epoch, 0, 3, tag="raw")
        assert produce(client, topic, 1, first) == (ErrorCode.none, 0)
        assert produce(client, topic, 1, first) == (ErrorCode.none, 0)  # the retry
        assert produce(client, topic, 1, producer_batch(pid, epoch, 3, 2, tag="raw")) == (ErrorCode.none, 3)
        assert produce(client, topic, 1, first) == (ErrorCode.none, 0)  # still among the last five
        headers = stored_batches(client, topic, 1)
        assert [(h.base_offset, h.base_sequence, h.record_count) for h in headers] == [(0, 0, 3), (3, 3, 2)]


def test_out_of_order_sequences_and_old_epochs_are_refused(cluster):
    topic = "idempotent-refused"
    create_topic(cluster.bootstrap, topic, 1)
    with KioClient(cluster.bootstrap) as client:
        _, pid, _ = init_producer_id(client)
        assert produce(client, topic, 0, producer_batch(pid, 0, 0, 2)) == (ErrorCode.none, 0)
        assert produce(client, topic, 0, producer_batch(pid, 0, 5, 1))[0] == ErrorCode.out_of_order_sequence_number
        assert produce(client, topic, 0, producer_batch(pid, 1, 0, 1)) == (ErrorCode.none, 2)  # a bumped epoch
        assert produce(client, topic, 0, producer_batch(pid, 0, 2, 1))[0] == ErrorCode.invalid_producer_epoch
        assert produce(client, topic, 0, producer_batch(pid, 1, 3, 1))[0] == ErrorCode.out_of_order_sequence_number
        assert produce(client, topic, 0, producer_batch(pid, 0, -1, 1))[0] == ErrorCode.invalid_record
        assert [h.base_offset for h in stored_batches(client, topic, 0)] == [0, 2]


def test_every_init_producer_id_version_and_kafkas_answers_for_what_is_not_offered(cluster):
    lo, hi = SUPPORTED[ApiKey.INIT_PRODUCER_ID]
    assert (lo, hi) == (0, 5)
    seen: set[int] = set()
    with KioClient(cluster.bootstrap) as client:
        for version in range(lo, hi + 1):
            error, pid, epoch = init_producer_id(client, version)
            assert (error, epoch) == (ErrorCode.none, 0) and pid not in seen, version
            seen.add(pid)
            tx = init_producer_id(client, version, transactional_id="orders-tx")
            assert tx == (ErrorCode.unsupported_version, -1, -1), version
            assert init_producer_id(client, version, transactional_id="")[0] == ErrorCode.invalid_request
        for version in range(3, hi + 1):
            # KIP-360 "bump" of an idempotent producer: Kafka hands out a fresh id at epoch 0.
            error, pid, epoch = init_producer_id(client, version, producer_id=max(seen), producer_epoch=0)
            assert (error, epoch) == (ErrorCode.none, 0) and pid not in seen
            seen.add(pid)
            assert init_producer_id(client, version, producer_id=7, producer_epoch=-1)[0] == ErrorCode.invalid_request
            assert init_producer_id(client, version, producer_id=-1, producer_epoch=3)[0] == ErrorCode.invalid_request


def test_producer_ids_are_unique_across_gateways(cluster):
    ids: list[int] = []
    for port in cluster.ports:
        with KioClient(f"127.0.0.1:{port}") as client:
            ids += [init_producer_id(client)[1] for _ in range(300)]
    assert len(ids) == len(set(ids)) == 600 and min(ids) >= 0
