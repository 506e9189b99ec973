"""KafkaConnection, sans I/O: framing, partial frames, and Kafka's treatment of bad input."""

from __future__ import annotations

import io
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from cluster.gateway.apis import SUPPORTED, ApiKey, build_response
from cluster.gateway.connection import Close, KafkaConnection, Request, encode_response, unsupported_api_versions_response


def frame(api_key: int, version: int, body: object | None = None, correlation_id: int = 7, raw: bytes = b"") -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf, RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id="t")
    )
    if body is not None:
        entity_writer(type(body))(buf, body)
    data = buf.getvalue() + raw
    return struct.pack(">i", len(data)) + data


METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_a_request_split_across_reads_parses_once_complete():
    conn = KafkaConnection()
    data = frame(ApiKey.METADATA, 12, METADATA) * 2
    events = []
    for i in range(len(data)):
        events += conn.receive(data[i : i + 1])
    assert [type(e) for e in events] == [Request, Request]
    assert events[0].body == METADATA and events[0].correlation_id == 7


def test_oversize_length_prefix_closes_before_the_body_arrives():
    conn = KafkaConnection(max_request_bytes=1000)
    events = conn.receive(struct.pack(">i", 1001))
    assert len(events) == 1 and isinstance(events[0], Close)
    assert "socket.request.max.bytes" in events[0].reason
    assert conn.receive(frame(ApiKey.METADATA, 12, METADATA)) == []  # closed for good


def test_negative_length_closes():
    assert isinstance(KafkaConnection().receive(struct.pack(">i", -5))[0], Close)


def test_garbage_body_closes_the_connection():
    events = KafkaConnection().receive(frame(ApiKey.METADATA, 12, raw=b"\xff\xff\xff\xff\xff"))
    assert isinstance(events[-1], Close) and "malformed" in events[-1].reason


def test_frame_shorter_than_a_header_closes():
    events = KafkaConnection().receive(struct.pack(">i", 3) + b"abc")
    assert isinstance(events[0], Close)


def test_unknown_api_key_closes_like_kafka():
    events = KafkaConnection().receive(frame(31999, 0, raw=b""))
    assert isinstance(events[0], Close) and "not supported" in events[0].reason


def test_unsupported_version_of_a_known_api_closes_like_kafka():
    lo, hi = SUPPORTED[ApiKey.PRODUCE]
    events = KafkaConnection().receive(frame(ApiKey.PRODUCE, hi + 1, raw=b"\x00" * 16))
    assert isinstance(events[0], Close) and f"version {hi + 1}" in events[0].reason


def test_api_versions_at_an_unknown_version_is_answered_v0_with_unsupported_version():
    # KIP-511: the body of a future ApiVersions version is not parsed; the answer lists our ranges.
    events = KafkaConnection().receive(frame(ApiKey.API_VERSIONS, 99, raw=b"\x00\x00\x00whatever"))
    (request,) = events
    assert request.unsupported_api_versions
    response = unsupported_api_versions_response(SUPPORTED)
    data = encode_response(request, response)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    (correlation_id,) = struct.unpack_from(">i", data, 4)
    parsed, _ = entity_reader(ApiVersionsResponseV0)(data, 8)
    assert correlation_id == 7 and parsed.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in parsed.api_keys} == set(SUPPORTED)


def test_requests_before_a_bad_frame_are_still_delivered():
    good = frame(ApiKey.METADATA, 12, METADATA, correlation_id=1)
    events = KafkaConnection().receive(good + struct.pack(">i", 5) + b"\x00\x03\x00\x0c\x00")
    assert isinstance(events[0], Request) and isinstance(events[1], Close)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data):
    conn = KafkaConnection(max_request_bytes=10_000)
    for event in conn.receive(data):
        assert isinstance(event, (Request, Close))


def test_build_response_fills_version_specific_fields():
    v1 = build_response(ApiKey.METADATA, 1, {"brokers": [{"node_id": 0, "host": "h", "port": 1}], "topics": []})
    v12 = build_response(
        ApiKey.METADATA, 12, {"brokers": [{"node_id": 0, "host": "h", "port": 1}], "cluster_id": "c", "topics": []}
    )
    assert v1.brokers[0].host == "h" and not hasattr(v1, "cluster_id")
    assert v12.cluster_id == "c" and v12.controller_id == -1
