"""Real Kafka clients, driven the way users drive them."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Rec:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        future.result(30)


def confluent_produce(bootstrap: str, topic: str, items: list[tuple[int, bytes, bytes, list]], **conf) -> list[Rec]:
    """items: (partition, key, value, headers); returns what the broker acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **conf})
    acked: list[Rec] = []
    errors: list[str] = []

    def on_delivery_of(headers):
        # librdkafka's delivery report does not carry the headers back: remember what was sent.
        def on_delivery(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                acked.append(Rec(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(headers)))

        return on_delivery

    for partition, key, value, headers in items:
        while True:
            try:
                producer.produce(
                    topic, key=key, value=value, headers=headers, partition=partition, on_delivery=on_delivery_of(headers)
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records never acknowledged; errors: {errors[:3]}"
    assert not errors, errors[:5]
    return acked


def kafka_python_produce(bootstrap: str, topic: str, items: list[tuple[int, bytes, bytes, list]]) -> list[Rec]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=5)
    futures = [
        (producer.send(topic, key=k, value=v, headers=h, partition=p), k, v, h) for p, k, v, h in items
    ]
    producer.flush(60)
    acked = []
    for future, k, v, h in futures:
        meta = future.get(30)
        acked.append(Rec(meta.topic, meta.partition, meta.offset, k, v, tuple(h)))
    producer.close()
    return acked


def confluent_consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[Rec]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused-manual-assignment", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Rec] = []
    deadline = time.time() + timeout
    try:
        while len(out) < expected and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            out.append(Rec(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ())))
    finally:
        consumer.close()
    return out


def aiokafka_consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def main() -> list[Rec]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
        await consumer.start()
        try:
            tps = [ATP(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            out: list[Rec] = []
            deadline = time.time() + timeout
            while len(out) < expected and time.time() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for msgs in batches.values():
                    out += [Rec(m.topic, m.partition, m.offset, m.key, m.value, tuple(m.headers)) for m in msgs]
            return out
        finally:
            await consumer.stop()

    return asyncio.run(main())


def records(n: int, partitions: int, tag: str) -> list[tuple[int, bytes, bytes, list]]:
    return [
        (i % partitions, f"{tag}-key-{i}".encode(), f"{tag}-value-{i}".encode() * (1 + i % 7), [("n", str(i).encode()), ("tag", tag.encode())])
        for i in range(n)
    ]


# -- one small produce/consume round trip per client, for listener tests (TLS, SASL) -------------


def confluent_round_trip(conf: dict, topic: str, count: int = 10) -> list[bytes]:
    """Create `topic`, produce v0..v{count-1} with confluent-kafka, read them back in a new group."""
    admin = AdminClient(conf)  # kept referenced: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(conf)
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(120):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) == count:
                break
    finally:
        consumer.close()
    return got


def kafka_python_round_trip(settings: dict, topic: str, group: str, count: int = 5) -> list[bytes]:
    """Produce k0..k{count-1} with kafka-python and read them back in `group`."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(**settings)
    for i in range(count):
        producer.send(topic, f"k{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=30_000, **settings)
    got: list[bytes] = []
    for message in consumer:
        got.append(message.value)
        if len(got) == count:
            break
    consumer.close()
    return got


def aiokafka_round_trip(settings: dict, topic: str, count: int = 5) -> list[bytes]:
    """Produce a0..a{count-1} with aiokafka and read them back in a new group (90 s at most)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for i in range(count):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{uuid.uuid4()}", auto_offset_reset="earliest", **settings)
        await consumer.start()
        got: list[bytes] = []
        try:
            async for message in consumer:
                got.append(message.value)
                if len(got) == count:
                    break
        finally:
            await consumer.stop()
        return got

    return asyncio.run(asyncio.wait_for(scenario(), 90))
