"""The compiled entity writer writes exactly kio's bytes, for every request and response class the
gateway supports, and for request headers (cluster/entity_writer.py)."""

from __future__ import annotations

import datetime
import functools
import io
from dataclasses import MISSING, fields
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from cluster.entity_writer import encode_entity, uvarint
from cluster.gateway.apis import SUPPORTED, ApiKey, request_class, response_class
from cluster.gateway.answers import build_response

EVERY_ANSWER = sorted({(k, v) for k, (lo, hi) in SUPPORTED.items() for v in range(lo, hi + 1)})

_INTS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_UINTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def _primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        bits = _INTS[kafka_type]
        return st.integers(-(1 << bits), (1 << bits) - 1)
    if kafka_type in _UINTS:
        return st.integers(0, (1 << _UINTS[kafka_type]) - 1)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "error_code": st.sampled_from(list(ErrorCode)),
        "string": st.text(max_size=20),
        "bytes": st.binary(max_size=20),
        "records": st.binary(max_size=40),
        "uuid": st.uuids(),
        "datetime_i64": st.integers(0, 2**40).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)),
        "timedelta_i32": st.integers(0, 2**30).map(lambda ms: datetime.timedelta(milliseconds=ms)),
        "timedelta_i64": st.integers(0, 2**40).map(lambda ms: datetime.timedelta(milliseconds=ms)),
    }[kafka_type]


@functools.cache
def entities(cls: type) -> st.SearchStrategy[Any]:
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in fields(cls):
        kind = classify_field(field)
        if isinstance(kind, (EntityField, EntityTupleField)):
            one = st.deferred(lambda t=kind.type_: entities(t))
        else:
            one = _primitive(get_schema_field_type(field))
        value = st.lists(one, max_size=2).map(tuple) if kind.is_array else one
        if get_field_tag(field) is not None:  # a tagged field is left out at its default
            value = value if field.default is MISSING else st.just(field.default) | value
        elif is_optional(field):
            value = st.none() | value
        parts[field.name] = value
    return st.builds(cls, **parts)


def kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize("api_key,version", EVERY_ANSWER, ids=lambda x: str(x))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_same_bytes_as_kio(api_key: int, version: int, data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from([response_class(api_key, version), request_class(api_key, version),
                                     request_class(api_key, version).__header_schema__]))
    entity = data.draw(entities(cls))
    try:
        expected = kio_bytes(entity)
    except Exception as exc:  # a value kio refuses: the compiled writer refuses it too
        with pytest.raises(type(exc)):
            encode_entity(entity)
        return
    assert encode_entity(entity) == expected


@pytest.mark.parametrize("api_key,version", [(ApiKey.PRODUCE, 11), (ApiKey.OFFSET_COMMIT, 8), (ApiKey.FETCH, 4)])
def test_answers_the_handlers_build(api_key: int, version: int) -> None:
    entity = build_response(api_key, version, {"error_code": ErrorCode.none})
    assert encode_entity(entity) == kio_bytes(entity)


@given(st.integers(0, 2**35))
def test_uvarint(n: int) -> None:
    out = io.BytesIO()
    from kio.serial.writers import write_unsigned_varint

    write_unsigned_varint(out, n)
    assert uvarint(n) == out.getvalue()
