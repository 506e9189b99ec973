"""Topics, metadata, coordinator discovery, operator commands and bad input on a live cluster."""

from __future__ import annotations

import io
import socket
import struct
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from coordinator.hashing import group_partition
from tests.clients import confluent_consume_all, confluent_produce, create_topic, records


def admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def test_metadata_shows_gateways_as_brokers_and_internal_topics(cluster):
    md = admin(cluster).list_topics(timeout=10)
    assert sorted(b.port for b in md.brokers.values()) == sorted(cluster.ports)
    assert len(md.topics["__consumer_offsets"].partitions) == 50
    assert len(md.topics["__share_group_state"].partitions) == 50
    from kafka import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    described = {t.get("topic") or t.get("name"): t for t in kp.describe_topics(["__consumer_offsets"])}
    assert described["__consumer_offsets"]["is_internal"] is True
    kp.close()


def test_create_topic_errors_are_kafkas(cluster):
    a = admin(cluster)
    create_topic(cluster.bootstrap, "dup", 1)
    cases = {
        "dup": (NewTopic("dup", 1, 1), KafkaError.TOPIC_ALREADY_EXISTS),
        "bad name": (NewTopic("bad name!", 1, 1), KafkaError.TOPIC_EXCEPTION),
        "rf3": (NewTopic("rf3", 1, 3), KafkaError.INVALID_REPLICATION_FACTOR),
        "zero": (NewTopic("zero", 0, 1), KafkaError.INVALID_PARTITIONS),
    }
    for label, (spec, code) in cases.items():
        (future,) = a.create_topics([spec]).values()
        with pytest.raises(KafkaException) as info:
            future.result(30)
        assert info.value.args[0].code() == code, label


def test_create_partitions_and_delete_topics(cluster):
    a = admin(cluster)
    create_topic(cluster.bootstrap, "grow", 2)
    (future,) = a.create_partitions([NewPartitions("grow", 5)]).values()
    future.result(30)
    assert len(a.list_topics("grow", timeout=10).topics["grow"].partitions) == 5
    acked = confluent_produce(cluster.bootstrap, "grow", records(50, 5, "g"))
    assert {r.partition for r in acked} == set(range(5))
    (future,) = a.create_partitions([NewPartitions("grow", 3)]).values()
    with pytest.raises(KafkaException) as info:
        future.result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    (future,) = a.delete_topics(["grow"]).values()
    future.result(30)
    assert "grow" not in a.list_topics(timeout=10).topics
    (future,) = a.delete_topics(["never-was"]).values()
    with pytest.raises(KafkaException) as info:
        future.result(30)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    (future,) = a.delete_topics(["__consumer_offsets"]).values()
    with pytest.raises(KafkaException):
        future.result(30)


def test_produce_to_unknown_topic_auto_creates_it(cluster):
    acked = confluent_produce(cluster.bootstrap, "auto-created", [(0, b"k", b"v", [])])
    assert acked[0].offset == 0
    assert len(admin(cluster).list_topics("auto-created", timeout=10).topics["auto-created"].partitions) == 1


def test_describe_cluster_lists_gateways(cluster):
    client = admin(cluster)
    result = client.describe_cluster().result(30)
    assert sorted(n.port for n in result.nodes) == sorted(cluster.ports)
    assert result.cluster_id == "raygroups"


def _request(port: int, api_key: int, version: int, body, response_cls):
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=3, client_id="t"))
    entity_writer(type(body))(buf, body)
    data = buf.getvalue()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", _recv(s, 4))[0]
        payload = _recv(s, size)
    # Flexible responses carry response header v1: correlation id then an empty tag buffer.
    parsed, _ = entity_reader(response_cls)(payload, 5)
    return parsed


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def test_find_coordinator_batched_group_and_share_keys(cluster):
    topic_id = uuid.uuid4()
    from coordinator.hashing import kafka_uuid_str

    keys = ("group-a", "group-b")
    response = _request(
        cluster.port, 10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=keys), FindCoordinatorResponse
    )
    assert [c.key for c in response.coordinators] == list(keys)
    assert all(c.error_code == ErrorCode.none and c.port in cluster.ports for c in response.coordinators)
    # Coordinators are spread over gateways by the group's partition, as Kafka spreads them over brokers.
    expected = [cluster.ports[group_partition(k, 50) % len(cluster.ports)] for k in keys]
    assert [c.port for c in response.coordinators] == expected

    share = _request(
        cluster.port,
        10,
        4,
        FindCoordinatorRequest(key_type=2, coordinator_keys=(f"g:{kafka_uuid_str(topic_id)}:0", "malformed")),
        FindCoordinatorResponse,
    )
    assert share.coordinators[0].error_code == ErrorCode.none
    assert share.coordinators[1].error_code == ErrorCode.invalid_request


def _closed_by_peer(s: socket.socket) -> bool:
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x00\x00\x00\x10" + b"\xde\xad\xbe\xef" * 4, id="garbage"),
        pytest.param(struct.pack(">i", 104857601), id="oversize-length-prefix"),
        pytest.param(struct.pack(">i", 6) + b"\x00\x12\x00", id="truncated-frame-then-hangup"),
        pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 31999, 0, 1, -1), id="unknown-api-key"),
    ],
)
def test_bad_input_closes_only_that_connection(cluster, payload):
    with socket.create_connection(("127.0.0.1", cluster.port), timeout=10) as s:
        s.sendall(payload)
        if payload.startswith(struct.pack(">i", 6)):
            s.shutdown(socket.SHUT_WR)  # the frame never completes
        assert _closed_by_peer(s)
    # Everything else keeps working.
    create_topic(cluster.bootstrap, f"after-{abs(hash(payload)) % 10**8}", 1)


def test_unsupported_version_closes_but_api_versions_negotiates(cluster):
    from cluster.gateway.apis import SUPPORTED

    beyond = SUPPORTED[0][1] + 1  # one Produce version past what we advertise
    data = struct.pack(">hhih", 0, beyond, 1, -1) + b"\x00" * 16
    with socket.create_connection(("127.0.0.1", cluster.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(data)) + data)  # an unadvertised version: Kafka closes
        assert _closed_by_peer(s)
    frame = struct.pack(">hhih", 18, 77, 9, -1) + b"\x00anything"
    with socket.create_connection(("127.0.0.1", cluster.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        payload = _recv(s, size)
    assert struct.unpack(">i", payload[:4])[0] == 9
    parsed, _ = entity_reader(ApiVersionsV0)(payload, 4)
    assert parsed.error_code == ErrorCode.unsupported_version and len(parsed.api_keys) > 5


def test_corrupt_produce_batch_is_rejected_and_changes_nothing(cluster):
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.produce.v9.response import ProduceResponse

    create_topic(cluster.bootstrap, "crc", 1)
    good = confluent_produce(cluster.bootstrap, "crc", records(3, 1, "ok"))
    from cluster.recordbatch import encode_records

    batch = bytearray(encode_records([(0, b"k", b"v")], 1_700_000_000_000))
    batch[-1] ^= 0xFF  # break the CRC
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=__import__("datetime").timedelta(seconds=5),
        topic_data=(TopicProduceData(name="crc", partition_data=(PartitionProduceData(index=0, records=bytes(batch)),)),),
    )
    response = _request(cluster.port, 0, 9, request, ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
    assert len(confluent_consume_all(cluster.bootstrap, "crc", 1, expected=4, timeout=5)) == len(good)


def test_operator_commands(cluster):
    result = cluster.cli("actors")
    assert result.returncode == 0, result.stderr
    for kind in ("controller", "group-coordinator", "share-coordinator", "partition-leader", "gateway"):
        if kind != "controller":
            assert kind in result.stdout
    status = cluster.cli("status")
    assert status.returncode == 0 and "__consumer_offsets" in status.stdout
    bad = cluster.cli("kill", "no-such-actor")
    assert bad.returncode == 2 and "no actor named" in bad.stderr and "Traceback" not in bad.stderr
    wrong_kind = cluster.cli("move", "__consumer_offsets", "0", "partition-leader-0")
    assert wrong_kind.returncode == 2 and "group-coordinator" in wrong_kind.stderr
