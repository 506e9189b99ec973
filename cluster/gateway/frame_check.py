"""A bounded walk of a request frame over its kio schema, before kio reads it.

kio's reader is native code that trusts the lengths it reads: a compact array of 2^32 - 1
elements is preallocated before a single element is read, and a failed allocation aborts the
process (SIGABRT), which no `except` catches. kio also hands a null array in a non-nullable field
to the handler as None. So the frame is walked first, in Python, with kio's wire rules and
Kafka's parser's checks (its generated readers refuse "a collection of size N, but there are
only M bytes remaining" and "non-nullable field X was serialized as null"), allocating nothing:
every length is checked against the bytes left before it is skipped, so when the walk passes,
everything kio allocates is bounded by the frame's size. We do not call kio's reader for this:
it is the thing that cannot be trusted with the frame, and its failure is not an exception.

Deliberately stricter than Kafka in two corners no client reaches: a varint length above 2^31-1
(Java reads it as a negative int, i.e. null) is refused, and a known tagged field must fill
exactly the size its tag declares (kio would read on from where the field ends).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import fields

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_JAVA_INT_MAX = 2**31 - 1

_FIXED = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}


class MalformedFrame(Exception):
    """The frame cannot be a request of this (api, version); the message says where and why."""


# A step walks one field: (frame, position, end of what it may read) -> position after it.
Step = Callable[[bytes, int, int], int]


_CLIENT_IDS: dict[bytes, str] = {}  # a client sends the same id on every request: decode once


def read_request_header(frame: bytes, flexible: bool) -> tuple[str | None, int]:
    """The client id (None for null) and where the body starts, for a request header v1
    (flexible False) or v2, with the checks of the walk above: read by hand because every
    request has one, and the generic walk and kio's reader together cost more than the body's."""
    end = len(frame)
    if end < 10:
        raise MalformedFrame(f"request header: {10 - min(end, 10)} bytes short")
    (n,) = _I16.unpack_from(frame, 8)
    pos = 10
    if n < 0:
        if n != -1:
            raise MalformedFrame(f"client_id: negative length {n}")
        client_id = None
    else:
        if n > end - pos:
            raise MalformedFrame(f"client_id: length {n}, but only {end - pos} bytes left")
        raw = frame[pos : pos + n]
        pos += n
        client_id = _CLIENT_IDS.get(raw)
        if client_id is None:
            try:
                client_id = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise MalformedFrame("client_id is not UTF-8") from None
            if len(_CLIENT_IDS) >= 4096:
                _CLIENT_IDS.clear()
            _CLIENT_IDS[raw] = client_id
    if flexible:
        after = _HEADER_TAGS(frame, pos, end)
        if frame[pos] != 0:  # kio's header reader refuses every tag, as it knows none: so do we
            raise MalformedFrame("RequestHeader tagged fields: unknown tag")
        pos = after
    return client_id, pos


def check_body(frame: bytes, offset: int, request_class: type) -> None:
    """Walk a request body starting at offset (its header read by read_request_header); raise
    MalformedFrame if any length does not fit in the bytes left, a varint is longer than 5 bytes, or
    a non-nullable field is null. Bytes after the body are allowed, as Kafka's parser ignores them."""
    _walker(request_class)(frame, offset, len(frame))


@functools.cache
def min_size(entity: type) -> int:
    """The fewest bytes one encoded entity can take (its array elements are checked against it)."""
    flexible = entity.__flexible__
    total = 1 if flexible else 0  # the tagged-field count
    for f in fields(entity):
        if get_field_tag(f) is None:
            total += _field_min_size(f, flexible)
    return total


def _field_min_size(f, flexible: bool) -> int:
    kind = classify_field(f)
    if kind.is_array:
        return 1 if flexible else 4
    if isinstance(kind, EntityField):
        return 1 if is_optional(f) else min_size(kind.type_)
    return _primitive_min_size(get_schema_field_type(f), flexible)


def _primitive_min_size(kafka_type: str, flexible: bool) -> int:
    if kafka_type in _FIXED:
        return _FIXED[kafka_type]
    if flexible:
        return 1
    return 2 if kafka_type == "string" else 4


def _fixed_size(entity: type) -> int | None:
    """The encoded size of an entity made only of fixed-width fields, else None."""
    if entity.__flexible__:
        return None
    total = 0
    for f in fields(entity):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        if kind.is_array or isinstance(kind, EntityField) or kafka_type not in _FIXED:
            return None
        total += _FIXED[kafka_type]
    return total


@functools.cache
def _walker(entity: type, header: bool = False) -> Step:
    flexible = entity.__flexible__
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    pending_fixed = 0
    for f in fields(entity):
        tag = get_field_tag(f)
        # Kafka reads RequestHeader.client_id as a legacy string even in flexible headers.
        legacy = header and f.name == "client_id"
        if tag is not None:
            tagged[int(tag)] = _field_step(f, flexible, nullable=False)
            continue
        kafka_type = f.metadata.get("kafka_type")
        if not classify_field(f).is_array and kafka_type in _FIXED:
            pending_fixed += _FIXED[kafka_type]
            continue
        if pending_fixed:
            steps.append(_fixed_step(pending_fixed, f"{entity.__name__} fields before {f.name}"))
            pending_fixed = 0
        steps.append(_field_step(f, flexible and not legacy, nullable=is_optional(f)))
    if pending_fixed:
        steps.append(_fixed_step(pending_fixed, f"{entity.__name__} fields"))
    if flexible:
        steps.append(_tagged_fields_step(entity.__name__, tagged))
    run = tuple(steps)
    if len(run) == 1:
        return run[0]

    def walk(frame: bytes, pos: int, end: int) -> int:
        for step in run:
            pos = step(frame, pos, end)
        return pos

    return walk


def _field_step(f, flexible: bool, nullable: bool) -> Step:
    kind = classify_field(f)
    name = f.name
    if isinstance(kind, EntityTupleField):
        return _array_step(name, flexible, nullable, min_size(kind.type_), _fixed_size(kind.type_), _walker(kind.type_))
    if isinstance(kind, PrimitiveTupleField):
        kafka_type = get_schema_field_type(f)
        element = _primitive_step(name, kafka_type, flexible, nullable=False)
        fixed = _FIXED.get(kafka_type)
        return _array_step(name, flexible, nullable, _primitive_min_size(kafka_type, flexible), fixed, element)
    if isinstance(kind, EntityField):
        walk = _walker(kind.type_)
        return _nullable_entity_step(name, walk) if nullable else walk
    return _primitive_step(name, get_schema_field_type(f), flexible, nullable)


def _primitive_step(name: str, kafka_type: str, flexible: bool, nullable: bool) -> Step:
    if kafka_type in _FIXED:
        return _fixed_step(_FIXED[kafka_type], name)
    if flexible:
        return _compact_bytes_step(name, nullable)
    return _legacy_bytes_step(name, nullable, _I16 if kafka_type == "string" else _I32)


def _fixed_step(size: int, what: str) -> Step:
    def step(frame: bytes, pos: int, end: int) -> int:
        if pos + size > end:
            raise MalformedFrame(f"{what}: {size} bytes needed, {end - pos} left")
        return pos + size

    return step


def read_uvarint(frame: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes that fits a Java int, and the position after it."""
    value = 0
    for i in range(5):
        if pos >= end:
            raise MalformedFrame(f"{what}: varint runs past the end")
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if value > _JAVA_INT_MAX:
                raise MalformedFrame(f"{what}: varint {value} is above 2^31-1")
            return value, pos
    raise MalformedFrame(f"{what}: varint longer than 5 bytes")


def _null(name: str) -> MalformedFrame:
    return MalformedFrame(f"non-nullable field {name} was serialized as null")


def _compact_bytes_step(name: str, nullable: bool) -> Step:
    def step(frame: bytes, pos: int, end: int) -> int:
        # Most lengths fit one varint byte: read it here, without a call.
        if pos < end and frame[pos] < 0x80:
            n = frame[pos]
            pos += 1
        else:
            n, pos = read_uvarint(frame, pos, end, name)
        if n == 0:
            if not nullable:
                raise _null(name)
            return pos
        if n - 1 > end - pos:
            raise MalformedFrame(f"{name}: length {n - 1}, but only {end - pos} bytes left")
        return pos + n - 1

    return step


def _legacy_bytes_step(name: str, nullable: bool, prefix: struct.Struct) -> Step:
    width = prefix.size

    def step(frame: bytes, pos: int, end: int) -> int:
        if pos + width > end:
            raise MalformedFrame(f"{name}: length runs past the end")
        (n,) = prefix.unpack_from(frame, pos)
        pos += width
        if n < 0:
            if n != -1:
                raise MalformedFrame(f"{name}: negative length {n}")
            if not nullable:
                raise _null(name)
            return pos
        if n > end - pos:
            raise MalformedFrame(f"{name}: length {n}, but only {end - pos} bytes left")
        return pos + n

    return step


def _array_step(name: str, flexible: bool, nullable: bool, element_min: int, element_fixed: int | None, element: Step) -> Step:
    element_min = max(element_min, 1)

    def step(frame: bytes, pos: int, end: int) -> int:
        if flexible:
            if pos < end and frame[pos] < 0x80:
                n = frame[pos]
                pos += 1
            else:
                n, pos = read_uvarint(frame, pos, end, name)
            count = n - 1
        else:
            if pos + 4 > end:
                raise MalformedFrame(f"{name}: array length runs past the end")
            (count,) = _I32.unpack_from(frame, pos)
            pos += 4
            if count < -1:
                raise MalformedFrame(f"{name}: negative array length {count}")
        if count == -1:
            if not nullable:
                raise _null(name)
            return pos
        if count * element_min > end - pos:
            raise MalformedFrame(
                f"{name}: tried to allocate a collection of size {count}, but there are only {end - pos} bytes remaining"
            )
        if element_fixed is not None:
            return pos + count * element_fixed
        for _ in range(count):
            pos = element(frame, pos, end)
        return pos

    return step


def _nullable_entity_step(name: str, walk: Step) -> Step:
    def step(frame: bytes, pos: int, end: int) -> int:
        if pos >= end:
            raise MalformedFrame(f"{name}: presence byte runs past the end")
        marker = frame[pos]
        # KIP-893: -1 null, 1 present. Kafka reads any negative as null; anything but the two
        # values kio writes is refused, so that kio cannot read the entity where we skipped it.
        if marker == 0xFF:
            return pos + 1
        if marker != 1:
            raise MalformedFrame(f"{name}: presence byte {marker} is neither -1 nor 1")
        return walk(frame, pos + 1, end)

    return step


def _tagged_fields_step(entity_name: str, known: dict[int, Step]) -> Step:
    what = f"{entity_name} tagged fields"

    def step(frame: bytes, pos: int, end: int) -> int:
        if pos < end and frame[pos] == 0:  # almost every entity carries no tags
            return pos + 1
        count, pos = read_uvarint(frame, pos, end, what)
        if count * 2 > end - pos:  # each tag takes at least its number and its size
            raise MalformedFrame(f"{what}: {count} tags, but only {end - pos} bytes left")
        for _ in range(count):
            tag, pos = read_uvarint(frame, pos, end, what)
            size, pos = read_uvarint(frame, pos, end, what)
            if size > end - pos:
                raise MalformedFrame(f"{what}: tag {tag} of {size} bytes, but only {end - pos} left")
            field = known.get(tag)
            if field is not None and field(frame, pos, pos + size) != pos + size:
                raise MalformedFrame(f"{what}: tag {tag} does not fill its {size} bytes")
            pos += size
        return pos

    return step


_HEADER_TAGS = _tagged_fields_step("RequestHeader", {})  # RequestHeader v2 knows no tags
