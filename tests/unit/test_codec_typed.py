"""The typed codec (issue 12) against the reflective one it replaced (codec_reference.py): every
record type, both ways, byte for byte, over generated field values."""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid

import msgpack
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.records import CODEC as GROUP_CODEC
from kernel.codec import CorruptRecord, Record, RecordCodec
from sharestate.records import CODEC as SHARE_CODEC
from tests.unit import codec_reference

INT = st.integers(-(2**63), 2**64 - 1)


def strategy(tp: typing.Any) -> st.SearchStrategy:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else strategy(a) for a in args))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy(args[0]), max_size=3).map(tuple)
        return st.tuples(*(strategy(a) for a in args))
    if origin is dict:
        return st.dictionaries(strategy(args[0]), strategy(args[1]), max_size=3)
    if dataclasses.is_dataclass(tp) or (isinstance(tp, type) and issubclass(tp, msgspec.Struct)):
        hints = typing.get_type_hints(tp)
        names = tp.__struct_fields__ if issubclass(tp, msgspec.Struct) else [f.name for f in dataclasses.fields(tp)]
        return st.builds(tp, **{name: strategy(hints[name]) for name in names})
    simple = {int: INT, str: st.text(max_size=40), bytes: st.binary(max_size=40), bool: st.booleans(),
              uuid.UUID: st.uuids()}
    return simple[tp]


def durable_types(codec: RecordCodec) -> list[tuple[str, type, type]]:
    return [(name, t.key_cls, t.value_cls) for name, t in codec._by_name.items() if not t.transient]


CASES = [(codec, name, k, v) for codec in (GROUP_CODEC, SHARE_CODEC) for name, k, v in durable_types(codec)]


def reference_of(codec: RecordCodec) -> codec_reference.RecordCodec:
    ref = codec_reference.RecordCodec(codec.family)
    for name, t in codec._by_name.items():
        ref.register(t.key_cls, t.value_cls, name=name, version=t.version, transient=t.transient)
    return ref


def test_every_durable_type_is_covered():
    names = {name for _, name, _, _ in CASES}
    assert {"GroupMetadata", "OffsetCommit", "ShareSnapshot", "ShareUpdate", "ShareGroupMetadata",
            "ConsumerGroupMetadata", "ConsumerGroupCurrentMemberAssignment", "ConsumerGroupRegularExpression"} <= names
    assert len(CASES) == 16


@pytest.mark.parametrize("codec,name,key_cls,value_cls", CASES, ids=[c[1] for c in CASES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_same_bytes_both_ways(codec, name, key_cls, value_cls, data):
    ref = reference_of(codec)
    key = data.draw(strategy(key_cls))
    value = data.draw(st.none() | strategy(value_cls))
    record = Record(key, value)
    old_key, old_value = ref.encode(codec_reference.Record(key, value))
    assert codec.encode(record) == (old_key, old_value)
    assert codec.decode(old_key, old_value) == record
    assert codec.decode(memoryview(old_key), None if old_value is None else memoryview(old_value)) == record
    back = ref.decode(*codec.encode(record))
    assert (back.key, back.value) == (key, value)


def test_a_key_whose_type_is_not_its_first_entry_still_decodes():
    key = msgpack.packb({"group_id": "g", "type": "OffsetCommit", "topic": "t", "version": 0, "partition": 1})
    assert GROUP_CODEC.decode(key, None).key == GROUP_CODEC.decode(*GROUP_CODEC.encode(Record(
        type(GROUP_CODEC.decode(key, None).key)("g", "t", 1), None))).key


def test_a_value_of_the_wrong_shape_is_a_corrupt_record():
    key, _ = GROUP_CODEC.encode(Record(GROUP_CODEC.decode(
        msgpack.packb({"type": "OffsetCommit", "version": 0, "group_id": "g", "topic": "t", "partition": 1}), None).key, None))
    with pytest.raises(CorruptRecord):
        GROUP_CODEC.decode(key, msgpack.packb({"version": 0, "offset": "not a number"}))


def test_a_codec_survives_pickling_as_ray_pickles_the_actors_that_hold_it():
    import pickle

    from cluster.actors.group_coordinator import CODEC as GROUP_CODEC

    copy = pickle.loads(pickle.dumps(GROUP_CODEC))
    for record_type in GROUP_CODEC._by_name.values():
        assert copy._by_name[record_type.name].key.decoder.type is record_type.key_cls


def test_keys_and_values_in_writable_buffers_decode_too():
    record = Record(SHARE_CODEC.decode(*SHARE_CODEC.encode(Record(
        SHARE_CODEC._by_name["ShareUpdate"].key_cls("g", uuid.UUID(int=1), 0, 2), None))).key, None)
    key, _ = SHARE_CODEC.encode(record)
    assert SHARE_CODEC.decode(memoryview(bytearray(key)), None) == record
    assert SHARE_CODEC.decode(bytearray(key), None) == record
