"""TLS without SASL on a live cluster (issue 10): an SSL listener from a PEM keystore; confluent-kafka,
kafka-python and aiokafka each produce and consume through it; a plaintext client is not served."""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid

import pytest
import trustme
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_process import ClusterProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore = data.parent / "keystore.pem"
    keystore.write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems) + cert.private_key_pem.bytes())
    ca_file = data.parent / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    config = ["listeners=SSL://127.0.0.1:0", f"ssl.keystore.location={keystore}"]
    proc = ClusterProcess(data, *[arg for pair in config for arg in ("--config", pair)], gateways=1).start()
    proc.ca_file = str(ca_file)
    yield proc
    proc.stop()


def conf(cluster) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SSL", "ssl.ca.location": cluster.ca_file}


def test_confluent_produces_and_consumes(tls):
    admin = AdminClient(conf(tls))  # kept: a collected client cancels its futures
    admin.create_topics([NewTopic("c-tls", 1, 1)])["c-tls"].result(30)
    producer = Producer(conf(tls))
    for i in range(10):
        producer.produce("c-tls", value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf(tls), "group.id": str(uuid.uuid4()), "auto.offset.reset": "earliest"})
    consumer.subscribe(["c-tls"])
    got = []
    try:
        for _ in range(120):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) == 10:
                break
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(10)]


def test_kafka_python_produces_and_consumes(tls):
    from kafka import KafkaConsumer, KafkaProducer

    settings = dict(bootstrap_servers=tls.bootstrap, security_protocol="SSL", ssl_cafile=tls.ca_file)
    producer = KafkaProducer(**settings)
    for i in range(5):
        producer.send("kp-tls", f"k{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kp-tls", group_id="kp-tls", auto_offset_reset="earliest", consumer_timeout_ms=30_000, **settings)
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 5:
            break
    consumer.close()
    assert got == [f"k{i}".encode() for i in range(5)]


def test_aiokafka_produces_and_consumes(tls):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    settings = dict(bootstrap_servers=tls.bootstrap, security_protocol="SSL",
                    ssl_context=create_ssl_context(cafile=tls.ca_file))

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("aio-tls", f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-tls", group_id=f"g-{uuid.uuid4()}", auto_offset_reset="earliest", **settings)
        await consumer.start()
        got = []
        try:
            async for message in consumer:
                got.append(message.value)
                if len(got) == 5:
                    break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(asyncio.wait_for(scenario(), 90)) == [f"a{i}".encode() for i in range(5)]


def test_a_plaintext_client_is_not_served(tls):
    host, _, port = tls.bootstrap.split(",")[0].rpartition(":")
    api_versions_v0 = struct.pack(">hhih", 18, 0, 1, -1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(api_versions_v0)) + api_versions_v0)
        answer = sock.recv(64)
    # The TLS server reads the bytes as a broken handshake: a TLS alert record (type 21) or a close.
    assert answer == b"" or answer[:1] == b"\x15"
