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

from cluster.gateway.apis import ADMIN_API_KEY, SUPPORTED, ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import (
    Close,
    KafkaConnection,
    PauseReading,
    Reply,
    Request,
    ResumeReading,
    encode_response,
    unsupported_api_versions_response,
)


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


# -- answers in request order, and back-pressure ------------------------------------------------------


def _requests(conn: KafkaConnection, n: int) -> list[Request]:
    data = b"".join(frame(ApiKey.METADATA, 12, METADATA, correlation_id=i) for i in range(n))
    return conn.receive(data)


def _correlation_ids(events) -> list[int]:
    return [struct.unpack_from(">i", e.data, 4)[0] for e in events if isinstance(e, Reply) and e.data is not None]


def _metadata_response():
    return build_response(ApiKey.METADATA, 12, {"brokers": [], "cluster_id": "c", "topics": []})


def test_answers_are_released_in_request_order_whatever_order_they_complete_in():
    conn = KafkaConnection()
    first, second, third = _requests(conn, 3)
    conn.respond(third, _metadata_response())
    conn.respond(second, _metadata_response())
    assert conn.next_events() == []  # the first is still being worked on
    conn.respond(first, _metadata_response())
    events = conn.next_events()
    assert _correlation_ids(events) == [0, 1, 2] and conn.outstanding == 0


def test_a_request_without_an_answer_releases_the_ones_behind_it():
    conn = KafkaConnection()
    produce_acks_0, metadata = _requests(conn, 2)
    conn.respond(metadata, _metadata_response())
    conn.respond(produce_acks_0, None)
    events = conn.next_events()
    assert [(e.request.correlation_id, e.data is None) for e in events] == [(0, True), (1, False)]


def test_a_failed_handler_closes_after_the_answers_before_it():
    conn = KafkaConnection()
    ok, broken, later = _requests(conn, 3)
    conn.respond(later, _metadata_response())
    conn.fail(broken, "handler of api 3 failed")
    conn.respond(ok, _metadata_response())
    events = conn.next_events()
    assert _correlation_ids(events) == [0] and isinstance(events[-1], Close)
    assert conn.receive(frame(ApiKey.METADATA, 12, METADATA)) == []


def test_an_answer_the_version_cannot_carry_closes_instead_of_raising():
    conn = KafkaConnection()
    (request,) = _requests(conn, 1)
    conn.respond(request, object())
    assert isinstance(conn.next_events()[-1], Close)


def test_reading_pauses_above_the_outstanding_limit_and_resumes_at_half():
    conn = KafkaConnection(max_outstanding=4)
    requests = _requests(conn, 5)
    assert conn.next_events() == [PauseReading()] and conn.reading_paused
    assert conn.next_events() == []  # said once
    for r in requests[:2]:
        conn.respond(r, _metadata_response())
    assert [type(e) for e in conn.next_events()] == [Reply, Reply]  # 3 left: above half
    conn.respond(requests[2], _metadata_response())
    assert [type(e) for e in conn.next_events()] == [Reply, ResumeReading] and not conn.reading_paused


def test_admin_answers_are_framed_as_admin_responses():
    conn = KafkaConnection()
    body = struct.pack(">hhih", ADMIN_API_KEY, 0, 42, -1) + b"\x80"
    (request,) = conn.receive(struct.pack(">i", len(body)) + body)
    conn.respond(request, b"\x81\xa2ok\xc3")
    (reply,) = conn.next_events()
    assert reply.data == struct.pack(">ii", 4 + 5, 42) + b"\x81\xa2ok\xc3"


def _kio_framed(correlation_id: int, response: object) -> bytes:
    header_cls = type(response).__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(correlation_id=correlation_id))
    entity_writer(type(response))(buf, response)
    return struct.pack(">i", len(buf.getvalue())) + buf.getvalue()


def test_answers_are_framed_as_kio_frames_them_at_every_version():
    # encode_response writes the response header by hand (v0, or v1 with its empty tag section).
    request = Request(ApiKey.HEARTBEAT, 4, 123456, None, None, 0)
    for api_key, (low, high) in SUPPORTED.items():
        for version in range(low, high + 1):
            response = build_response(api_key, version, {})
            assert encode_response(request, response) == _kio_framed(123456, response), (api_key, version)


def test_a_shared_answer_is_encoded_once_and_framed_per_request():
    shared = build_response(ApiKey.HEARTBEAT, 4, {"error_code": ErrorCode.rebalance_in_progress})
    for correlation_id in (1, 2, 1):
        request = Request(ApiKey.HEARTBEAT, 4, correlation_id, None, None, 0)
        assert encode_response(request, shared) == _kio_framed(correlation_id, shared)


def _with_header_bytes(data: bytes, at: int, replacement: bytes) -> bytes:
    body = data[4:at] + replacement + data[at + 1 :]
    return struct.pack(">i", len(body)) + body


def test_a_request_header_with_a_tag_or_a_bad_client_id_closes():
    good = frame(ApiKey.METADATA, 12, METADATA)
    tags_at = 4 + 10 + 1  # size, key/version/correlation id/client id length, "t"
    assert good[tags_at] == 0
    tagged = _with_header_bytes(good, tags_at, b"\x01\x02\x00")  # one tag (2) of no bytes
    not_utf8 = _with_header_bytes(good, tags_at - 1, b"\xff")
    for data in (tagged, not_utf8, struct.pack(">i", 9) + good[4:13]):
        events = KafkaConnection().receive(data)
        assert len(events) == 1 and isinstance(events[0], Close), data


def test_frames_and_a_partial_frame_in_one_read_parse_in_order():
    conn = KafkaConnection()
    data = b"".join(frame(ApiKey.METADATA, 12, METADATA, correlation_id=i) for i in range(4))
    cut = len(data) - 5
    first = conn.receive(data[:cut])
    rest = conn.receive(data[cut:])
    assert [e.correlation_id for e in first] == [0, 1, 2] and [e.correlation_id for e in rest] == [3]
    assert all(e.client_id == "t" and e.body == METADATA for e in first + rest)
