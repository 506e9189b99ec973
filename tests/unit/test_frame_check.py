"""The bounded pre-check of request frames (cluster/gateway/frame_check.py)."""

from __future__ import annotations

import io
import struct
from dataclasses import fields

import pytest
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.serial._introspect import EntityTupleField, classify_field

from cluster.gateway.apis import SUPPORTED, ApiKey, request_class
from cluster.gateway.connection import Close, KafkaConnection, Request
from cluster.gateway.frame_check import MalformedFrame, min_size, read_uvarint

EVERY_VERSION = [(k, v) for k, (lo, hi) in SUPPORTED.items() for v in range(lo, hi + 1)]


def header(api_key: int, version: int) -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf, RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="t")
    )
    return buf.getvalue()


def framed(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def receive(data: bytes):
    return KafkaConnection().receive(framed(data))


def _entities(cls: type, seen: set[type]) -> None:
    seen.add(cls)
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField) and kind.type_ not in seen:
            _entities(kind.type_, seen)


@pytest.mark.parametrize("api_key,version", EVERY_VERSION)
def test_every_array_element_takes_at_least_one_byte(api_key, version):
    # Otherwise a length check of count * min_size against the bytes left would bound nothing.
    root = request_class(api_key, version)
    seen: set[type] = set()
    _entities(root, seen)
    assert all(min_size(cls) >= 1 for cls in seen - {root})


def test_a_null_array_in_a_non_nullable_field_closes_instead_of_reaching_the_handler():
    # FindCoordinator v4: key_type, then coordinator_keys (non-nullable) as compact-array null.
    events = receive(header(ApiKey.FIND_COORDINATOR, 4) + b"\x00" + b"\x00" + b"\x00")
    assert isinstance(events[-1], Close)
    assert "non-nullable field coordinator_keys was serialized as null" in events[-1].reason


def test_a_null_legacy_string_in_a_non_nullable_field_closes():
    # Heartbeat v0 is not flexible and takes header v1; group_id as int16 -1.
    data = struct.pack(">hhih", ApiKey.HEARTBEAT, 0, 1, -1) + struct.pack(">h", -1) + b"\0" * 4 + b"\0\0"
    events = receive(data)
    assert isinstance(events[-1], Close) and "group_id" in events[-1].reason


def test_a_legacy_array_longer_than_the_frame_closes():
    # Metadata v1 (header v1): topics as int32 2^31-1, nothing after.
    data = struct.pack(">hhih", ApiKey.METADATA, 1, 1, -1) + struct.pack(">i", 2**31 - 1)
    events = receive(data)
    assert isinstance(events[-1], Close) and "tried to allocate a collection of size 2147483647" in events[-1].reason


def test_a_negative_legacy_array_length_other_than_minus_one_closes():
    data = struct.pack(">hhih", ApiKey.METADATA, 1, 1, -1) + struct.pack(">i", -2)
    assert "negative array length" in receive(data)[-1].reason


def test_a_null_metadata_topic_list_stays_legal():
    data = struct.pack(">hhih", ApiKey.METADATA, 1, 1, -1) + struct.pack(">i", -1)
    (event,) = receive(data)
    assert isinstance(event, Request) and event.body.topics is None


def test_varints_longer_than_five_bytes_are_refused():
    with pytest.raises(MalformedFrame, match="longer than 5 bytes"):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0, 6, "x")
    assert read_uvarint(b"\xff\xff\xff\xff\x07", 0, 5, "x") == (2**31 - 1, 5)
    with pytest.raises(MalformedFrame, match="above 2"):
        read_uvarint(b"\xff\xff\xff\xff\x0f", 0, 5, "x")


def test_a_compact_string_longer_than_the_frame_closes():
    # Metadata v12: one topic (length 2): topic id, name with length 1000.
    body = b"\x02" + b"\0" * 16 + b"\xe9\x07" + b"abc"
    events = receive(header(ApiKey.METADATA, 12) + body)
    assert isinstance(events[-1], Close) and "name: length 1000" in events[-1].reason


def test_a_tag_larger_than_the_frame_closes():
    body = b"\x00\x00\x00" + b"\x01\x00\xff\xff\x03"  # topics null, two bools, one tag of 65535 bytes
    events = receive(header(ApiKey.METADATA, 12) + body)
    assert isinstance(events[-1], Close) and "tag 0 of 65535 bytes" in events[-1].reason


def test_tag_counts_are_bounded_by_the_bytes_left():
    body = b"\x00\x00\x00" + b"\xff\xff\xff\xff\x07"
    events = receive(header(ApiKey.METADATA, 12) + body)
    assert isinstance(events[-1], Close) and "tags, but only" in events[-1].reason


def test_bytes_after_the_body_are_still_ignored():
    body = b"\x00\x00\x00\x00" + b"junk"
    (event,) = receive(header(ApiKey.METADATA, 12) + body)
    assert isinstance(event, Request)
