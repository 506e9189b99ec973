"""Coordinator records and their on-log form: msgpack maps with a record type and a version.

A record is a (key, value) pair of frozen dataclasses; a `None` value is a tombstone, and the
log's compaction keeps only the latest value per encoded key. The key encodes as
`{"type": name, "version": v, **key fields}` and the value as `{"version": v, **value fields}`.

Compatibility rule (PROTOCOL.md §4, a newer raygroups reads an older data directory): decoding
fills a field missing from an older record with its default and ignores fields it does not know.
A record type the codec does not know is an error, never skipped: replaying part of a log is
worse than refusing to load it.

Some record types are *transient*: replayed into memory like any other so that state changes
only through replay, but never written, because Kafka keeps that state in memory only (e.g. a
classic member waiting in JoinGroup). They are lost on failover exactly as in Kafka.

Speed (issue 12): replay decodes every record of a log, so each record type gets its msgspec
encoder/decoder once, at registration, instead of walking type hints per field of every record.
The bytes are those of the reflective codec before it (tests/unit/codec_reference.py holds it and
tests/unit/test_codec_typed.py checks both ways): msgspec writes a dataclass as a map in field
order, so the "type"/"version" entries are spliced in front of that map's body.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import msgpack
import msgspec


class Record(msgspec.Struct, frozen=True):
    """A frozen record; a Struct rather than a dataclass because replay builds one per record of a
    log and a frozen dataclass's __init__ costs five times as much."""

    key: Any
    value: Any | None  # None: tombstone


class UnknownRecordType(ValueError):
    pass


class CorruptRecord(ValueError):
    """A record of a known type whose fields do not decode to that type."""


Buffer = bytes | bytearray | memoryview

_ENCODER = msgspec.msgpack.Encoder(uuid_format="bytes")
_NO_KEY_STARTS_WITH = b"\xc1"  # the one byte msgpack never uses
_ANY = msgspec.msgpack.Decoder()


def _map_header(entries: int) -> bytes:
    return msgpack.packb({i: None for i in range(entries)})[: 1 if entries < 16 else 3]


def _entries(pairs: dict[str, Any]) -> bytes:
    return b"".join(msgpack.packb(k) + msgpack.packb(v) for k, v in pairs.items())


class _Body:
    """A dataclass as the body of a msgpack map (no header) that starts with fixed entries."""

    def __init__(self, cls: type, fixed: dict[str, Any]) -> None:
        count = len(field_names(cls))
        self.head = _map_header(count + len(fixed)) + _entries(fixed)
        self.skip = 1 if count < 16 else 3
        self.decoder = msgspec.msgpack.Decoder(cls)
        # A set has no order of its own: the reflective codec sorted it, msgspec would not.
        self.reflective = _has_set(cls)

    # Ray pickles the actor classes, and with them the codec they hold; a msgspec Decoder does not
    # pickle, so it is rebuilt from the class on the other side.
    def __getstate__(self) -> dict[str, Any]:
        return {"head": self.head, "skip": self.skip, "reflective": self.reflective, "cls": self.decoder.type}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.head, self.skip, self.reflective = state["head"], state["skip"], state["reflective"]
        self.decoder = msgspec.msgpack.Decoder(state["cls"])

    def encode(self, obj: Any) -> bytes:
        if self.reflective:
            return self.head + msgpack.packb(_fields(obj))[self.skip :]
        return self.head + _ENCODER.encode(obj)[self.skip :]


@dataclass(frozen=True, slots=True)
class _RecordType:
    name: str
    version: int
    key_cls: type
    value_cls: type | None
    transient: bool
    key: _Body
    value: _Body | None


class RecordCodec:
    """The registry of one shard family's record types."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._by_key_cls: dict[type, _RecordType] = {}
        self._by_name: dict[str, _RecordType] = {}
        # A key written by encode() starts with its "type" entry: these bytes name its type.
        self._by_tag: dict[bytes, _RecordType] = {}

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
        key = _Body(key_cls, {"type": name, "version": version})
        value = _Body(value_cls, {"version": version}) if value_cls is not None else None
        rtype = _RecordType(name, version, key_cls, value_cls, transient, key, value)
        self._by_key_cls[key_cls] = rtype
        self._by_name[name] = rtype
        self._by_tag[_entries({"type": name})] = rtype

    def is_transient(self, record: Record) -> bool:
        return self._type_of(record).transient

    def encode(self, record: Record) -> tuple[bytes, bytes | None]:
        rtype = self._type_of(record)
        if rtype.transient:
            raise ValueError(f"{rtype.name} is transient and never written")
        value = None
        if record.value is not None:
            value = rtype.value.encode(record.value)
        return rtype.key.encode(record.key), value

    def encode_all(self, records: Iterable[Record]) -> list[tuple[bytes, bytes | None]]:
        return [self.encode(r) for r in records if not self._type_of(r).transient]

    def decode(self, key: Buffer, value: Buffer | None) -> Record:
        rtype = self._tagged(key) or self._named(key)
        try:
            decoded_value = None
            if value is not None:
                if rtype.value is None:
                    raise UnknownRecordType(f"{self.family}: {rtype.name} carries no value")
                decoded_value = rtype.value.decoder.decode(value)
            return Record(rtype.key.decoder.decode(key), decoded_value)
        except msgspec.DecodeError as exc:
            raise CorruptRecord(f"{self.family}: {rtype.name}: {exc}") from exc

    def decode_all(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> list[Record]:
        """decode() of each (key, value) of a log batch, keys as bytes (the batch reader's).

        Replay's path (issue 12): a batch is mostly one record type, so a key that starts with the
        previous record's type header (its map header, "type" and "version" entries, fixed per
        type) reuses that type's decoders; any other key takes decode() and sets the type.
        """
        out: list[Record] = []
        append = out.append
        head = _NO_KEY_STARTS_WITH
        decode_key = decode_value = None
        rtype: _RecordType | None = None
        try:
            for key, value in pairs:
                if key.startswith(head):
                    append(Record(decode_key(key), None if value is None else decode_value(value)))
                    continue
                record = self.decode(key, value)
                append(record)
                rtype = self._by_key_cls[type(record.key)]
                # A type without values keeps decode(), which refuses a value it cannot carry.
                head = rtype.key.head if rtype.value is not None else _NO_KEY_STARTS_WITH
                decode_key = rtype.key.decoder.decode
                decode_value = rtype.value.decoder.decode if rtype.value is not None else None
        except msgspec.DecodeError as exc:
            raise CorruptRecord(f"{self.family}: {rtype.name if rtype else '?'}: {exc}") from exc
        return out

    def _tagged(self, key: Buffer) -> _RecordType | None:
        """The fast path: the type read from the bytes of the key's first entry."""
        try:
            pos = 1 if key[0] < 0x90 else 3  # fixmap or map16 header
            size = key[pos + 5]
            if 0xA0 <= size <= 0xBF:
                end = pos + 6 + (size & 0x1F)
            elif size == 0xD9:
                end = pos + 7 + key[pos + 6]
            else:
                return None
            return self._by_tag.get(key[pos:end])  # a bytes or read-only memoryview slice
        except (IndexError, TypeError, ValueError):  # too short, or a writable (unhashable) buffer
            return None

    def _named(self, key: Buffer) -> _RecordType:
        try:
            raw_key = _ANY.decode(key)
        except msgspec.DecodeError as exc:
            raise UnknownRecordType(f"{self.family}: record key is not msgpack: {exc}") from exc
        if not isinstance(raw_key, dict) or "type" not in raw_key:
            raise UnknownRecordType(f"{self.family}: record key is not a typed msgpack map")
        rtype = self._by_name.get(raw_key["type"])
        if rtype is None:
            raise UnknownRecordType(f"{self.family}: unknown record type {raw_key['type']!r}")
        return rtype

    def _type_of(self, record: Record) -> _RecordType:
        rtype = self._by_key_cls.get(type(record.key))
        if rtype is None:
            raise UnknownRecordType(f"{self.family}: {type(record.key).__name__} is not a record key")
        return rtype


# -- the reflective encoding, for record types holding sets (sorted, as they always were) -----


def field_names(cls: Any) -> tuple[str, ...]:
    """A record class's fields in order: a dataclass's, or a msgspec Struct's (the record types
    replay builds most of are Structs: decoded faster, and left alone by the garbage collector)."""
    if isinstance(cls, msgspec.Struct) or (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        return cls.__struct_fields__
    return tuple(f.name for f in dataclasses.fields(cls))


def is_record_class(tp: Any) -> bool:
    return dataclasses.is_dataclass(tp) or (isinstance(tp, type) and issubclass(tp, msgspec.Struct))


def _has_set(tp: Any, seen: frozenset = frozenset()) -> bool:
    origin = typing.get_origin(tp)
    if origin in (set, frozenset) or tp in (set, frozenset):
        return True
    if is_record_class(tp) and tp not in seen:
        hints = typing.get_type_hints(tp)
        return any(_has_set(hints[name], seen | {tp}) for name in field_names(tp))
    return any(_has_set(arg, seen) for arg in typing.get_args(tp))


def _fields(obj: Any) -> dict[str, Any]:
    return {name: to_primitive(getattr(obj, name)) for name in field_names(obj)}


def to_primitive(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, UUID):
        return value.bytes
    if is_record_class(type(value)):
        return _fields(value)
    if isinstance(value, (list, tuple)):
        return [to_primitive(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_primitive(v) for v in value)
    if isinstance(value, dict):
        return {to_primitive(k): to_primitive(v) for k, v in value.items()}
    return msgspec.to_builtins(value)  # an enum: its value
