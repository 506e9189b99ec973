"""The reflective codec as it was before issue 12 (kept verbatim as the reference the typed codec must
match byte for byte, and to write logs "with today's code" in tests), except that it reads the
record classes now written as msgspec Structs (OffsetCommit's) the way it read the dataclasses they
replaced: fields in order."""
from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import msgpack
import msgspec


@dataclass(frozen=True, slots=True)
class Record:
    key: Any
    value: Any | None  # None: tombstone


class UnknownRecordType(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _RecordType:
    name: str
    version: int
    key_cls: type
    value_cls: type | None
    transient: bool


class RecordCodec:
    """The registry of one shard family's record types."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._by_key_cls: dict[type, _RecordType] = {}
        self._by_name: dict[str, _RecordType] = {}

    def register(
        self,
        key_cls: type,
        value_cls: type | None,
        *,
        name: str,
        version: int = 0,
        transient: bool = False,
    ) -> None:
        if name in self._by_name or key_cls in self._by_key_cls:
            raise ValueError(f"{self.family}: record type {name} registered twice")
        rtype = _RecordType(name, version, key_cls, value_cls, transient)
        self._by_key_cls[key_cls] = rtype
        self._by_name[name] = rtype

    def is_transient(self, record: Record) -> bool:
        return self._type_of(record).transient

    def encode(self, record: Record) -> tuple[bytes, bytes | None]:
        rtype = self._type_of(record)
        if rtype.transient:
            raise ValueError(f"{rtype.name} is transient and never written")
        key = {"type": rtype.name, "version": rtype.version, **_fields(record.key)}
        value = None
        if record.value is not None:
            value = msgpack.packb({"version": rtype.version, **_fields(record.value)})
        return msgpack.packb(key), value

    def encode_all(self, records: Iterable[Record]) -> list[tuple[bytes, bytes | None]]:
        return [self.encode(r) for r in records if not self._type_of(r).transient]

    def decode(self, key: bytes, value: bytes | None) -> Record:
        raw_key = msgpack.unpackb(key)
        if not isinstance(raw_key, dict) or "type" not in raw_key:
            raise UnknownRecordType(f"{self.family}: record key is not a typed msgpack map")
        rtype = self._by_name.get(raw_key["type"])
        if rtype is None:
            raise UnknownRecordType(f"{self.family}: unknown record type {raw_key['type']!r}")
        decoded_value = None
        if value is not None:
            if rtype.value_cls is None:
                raise UnknownRecordType(f"{self.family}: {rtype.name} carries no value")
            decoded_value = from_primitive(rtype.value_cls, msgpack.unpackb(value))
        return Record(from_primitive(rtype.key_cls, raw_key), decoded_value)

    def _type_of(self, record: Record) -> _RecordType:
        rtype = self._by_key_cls.get(type(record.key))
        if rtype is None:
            raise UnknownRecordType(f"{self.family}: {type(record.key).__name__} is not a record key")
        return rtype


# -- dataclass <-> msgpack-able primitives, driven by the dataclasses' type hints -------------


def _names(cls: Any) -> list[str]:
    if isinstance(cls, msgspec.Struct) or (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        return list(cls.__struct_fields__)
    return [f.name for f in dataclasses.fields(cls)]


def _is_record(tp: Any) -> bool:
    return dataclasses.is_dataclass(tp) or isinstance(tp, msgspec.Struct) or (isinstance(tp, type) and issubclass(tp, msgspec.Struct))


def _fields(obj: Any) -> dict[str, Any]:
    return {name: to_primitive(getattr(obj, name)) for name in _names(obj)}


def to_primitive(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, UUID):
        return value.bytes
    if _is_record(value):
        return _fields(value)
    if isinstance(value, (list, tuple)):
        return [to_primitive(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_primitive(v) for v in value)
    if isinstance(value, dict):
        return {to_primitive(k): to_primitive(v) for k, v in value.items()}
    raise TypeError(f"cannot encode {type(value).__name__} in a record")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_primitive(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(options) == 1:
            return from_primitive(options[0], data)
        return data  # a union of primitives: msgpack already restored the value
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_primitive(args[0], v) for v in data)
        return tuple(from_primitive(a, v) for a, v in zip(args, data))
    if origin is list:
        (arg,) = typing.get_args(tp)
        return [from_primitive(arg, v) for v in data]
    if origin in (set, frozenset):
        (arg,) = typing.get_args(tp)
        return origin(from_primitive(arg, v) for v in data)
    if origin is dict:
        k_tp, v_tp = typing.get_args(tp)
        return {from_primitive(k_tp, k): from_primitive(v_tp, v) for k, v in data.items()}
    if isinstance(tp, type):
        if _is_record(tp):
            hints = _hints(tp)
            kwargs = {}
            for name in _names(tp):
                if name in data:
                    kwargs[name] = from_primitive(hints[name], data[name])
            return tp(**kwargs)
        if issubclass(tp, enum.Enum):
            return tp(data)
        if tp is UUID:
            return UUID(bytes=data)
    return data
