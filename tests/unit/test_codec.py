import uuid
from dataclasses import dataclass, field

import msgpack
import pytest

from kernel.codec import Record, RecordCodec, UnknownRecordType


@dataclass(frozen=True, slots=True)
class K:
    group: str
    n: int


@dataclass(frozen=True, slots=True)
class Inner:
    a: int
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class V:
    members: tuple[Inner, ...]
    topic: uuid.UUID
    note: str | None = None
    extra: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class T:
    x: int


def make_codec() -> RecordCodec:
    codec = RecordCodec("test")
    codec.register(K, V, name="K", version=1)
    codec.register(T, None, name="T", transient=True)
    return codec


def test_round_trip_nested_values():
    codec = make_codec()
    record = Record(K("g", 3), V((Inner(1, ("x",)), Inner(2)), uuid.uuid4(), None, {"a": 1}))
    key, value = codec.encode(record)
    assert msgpack.unpackb(key) == {"type": "K", "version": 1, "group": "g", "n": 3}
    assert codec.decode(key, value) == record


def test_tombstone_has_no_value():
    codec = make_codec()
    key, value = codec.encode(Record(K("g", 1), None))
    assert value is None
    assert codec.decode(key, None) == Record(K("g", 1), None)


def test_older_record_missing_a_field_gets_its_default_and_unknown_fields_are_ignored():
    codec = make_codec()
    key = msgpack.packb({"type": "K", "version": 0, "group": "g", "n": 1, "future": True})
    value = msgpack.packb({"version": 0, "members": [], "topic": uuid.UUID(int=1).bytes})
    decoded = codec.decode(key, value)
    assert decoded.value == V((), uuid.UUID(int=1), None, {})


def test_unknown_record_type_is_refused():
    codec = make_codec()
    with pytest.raises(UnknownRecordType):
        codec.decode(msgpack.packb({"type": "Nope", "version": 0}), None)
    with pytest.raises(UnknownRecordType):
        codec.decode(msgpack.packb([1, 2]), None)


def test_transient_records_are_never_written():
    codec = make_codec()
    records = [Record(T(1), None), Record(K("g", 1), None)]
    assert codec.is_transient(records[0])
    assert len(codec.encode_all(records)) == 1
    with pytest.raises(ValueError):
        codec.encode(records[0])
