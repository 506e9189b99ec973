"""Workloads that drive a broker with a real client: confluent-kafka produce and fetch, and raw
ApiVersions/Metadata round trips over sockets (any broker: raygroups, the responder, tansu)."""

from __future__ import annotations

import asyncio
import io
import struct
import time


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(30)


def produce_rate(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> dict[str, float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.num.messages": 100})
    value = b"v" * value_bytes
    acked = 0

    def on_delivery(err, _msg) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    start, cpu = time.perf_counter(), time.process_time()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"key-%06d" % i, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(120)
    return {"acked": acked, "produce_rps": acked / (time.perf_counter() - start),
            **_client_cpu("produce", records, time.process_time() - cpu, time.perf_counter() - start)}


def fetch_rate(bootstrap: str, topic: str, records: int, partitions: int) -> dict[str, float]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start, cpu = time.perf_counter(), time.process_time()
    deadline = start + 300
    while got < records and time.perf_counter() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if not msg.error():
                got += 1
    fetch_s = time.perf_counter() - start
    used = time.process_time() - cpu
    consumer.close()
    return {"consumed": got, "fetch_rps": got / fetch_s, **_client_cpu("fetch", got, used, fetch_s)}


def _client_cpu(phase: str, records: int, cpu_s: float, wall_s: float) -> dict[str, float]:
    """The client's own CPU (this process: the Python loop and librdkafka's threads) per record and
    in cores: near one core, the Python loop (one thread) sets the rate, not the broker."""
    return {f"{phase}_client_us": cpu_s / max(records, 1) * 1e6, f"{phase}_client_cores": cpu_s / max(wall_s, 1e-9)}


def produce_fetch_rates(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> dict[str, float]:
    from loadtest.bench.systems import console

    create_topic(bootstrap, topic, partitions)
    rates = {**produce_rate(bootstrap, topic, records, partitions, value_bytes),
             **fetch_rate(bootstrap, topic, records, partitions)}
    console.print("    client CPU: " + ", ".join(
        f"{phase} {rates[f'{phase}_client_us']:.2f} µs/record ({rates[f'{phase}_client_cores']:.2f} cores)"
        for phase in ("produce", "fetch")))
    return rates


def frame(api_key: int, version: int, body: object) -> bytes:
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=api_key, request_api_version=version,
                                                    correlation_id=0, client_id="bench"))
    entity_writer(type(body))(buf, body)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


async def round_trips(bootstrap: str, request: bytes, seconds: float, connections: int) -> float:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)

    async def one() -> int:
        reader, writer = await asyncio.open_connection(host, int(port))
        done = 0
        deadline = time.perf_counter() + seconds
        buf = bytearray(request)
        while time.perf_counter() < deadline:
            struct.pack_into(">i", buf, 8, done)  # correlation id
            writer.write(buf)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
            done += 1
        writer.close()
        return done

    start = time.perf_counter()
    counts = await asyncio.gather(*(one() for _ in range(connections)))
    return sum(counts) / (time.perf_counter() - start)


def api_rates(bootstrap: str, seconds: float, connections: int) -> dict[str, float]:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    api_versions = frame(18, 3, ApiVersionsRequest(client_software_name="bench", client_software_version="1"))
    metadata = frame(3, 12, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="bench-md"),),
                                            allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    create_topic(bootstrap, "bench-md", 6)
    return {
        "api_versions_rps": asyncio.run(round_trips(bootstrap, api_versions, seconds, connections)),
        "metadata_rps": asyncio.run(round_trips(bootstrap, metadata, seconds, connections)),
    }
