"""Encoding of kio entities (answers, and the load client's requests), compiled once per class.

kio reads natively but writes in Python by reflection: for every field of every answer it calls a
generic writer through a closure, one `struct.pack` per integer and a temporary buffer per tag
section. Under produce load that was the gateway's largest single item after the socket write
and the Ray call (about 11% of its samples, docs/performance.md "Gateway"). This module reads the
same schema metadata kio reads (its `_introspect` helpers) and generates one function per entity
class: neighbouring fixed-size fields go out in one `struct.pack`, strings and arrays are written
inline, and an entity without tagged fields ends with a constant empty tag section. Types that are
rare in answers (uuids, timestamps, durations, nullable primitives) and non-default tagged fields
are written by kio's own writers, so their encoding cannot drift. A differential test
(tests/unit/test_entity_writer.py) compares the bytes with kio's for every request and response
class the gateway supports.
"""

from __future__ import annotations

import io
import itertools
import struct
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer

Writer = Callable[[io.BytesIO, Any], None]

# kafka type -> (struct code, how the value becomes a number)
_FIXED = {
    "int8": ("b", ""), "int16": ("h", ""), "int32": ("i", ""), "int64": ("q", ""),
    "uint8": ("B", ""), "uint16": ("H", ""), "uint32": ("I", ""), "uint64": ("Q", ""),
    "float64": ("d", ""), "bool": ("?", ""), "error_code": ("h", ".value"),
}
_UVARINT_1 = [bytes((i,)) for i in range(128)]
_NULL_ENTITY, _ENTITY = struct.pack(">b", -1), struct.pack(">b", 1)
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


def uvarint(n: int) -> bytes:
    if n < 128:
        return _UVARINT_1[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact(write: Callable[[Any], Any], value: str | bytes) -> None:
    data = value.encode() if isinstance(value, str) else value
    write(uvarint(len(data) + 1))
    write(data)


def _compact_nullable(write: Callable[[Any], Any], value: str | bytes | None) -> None:
    if value is None:
        write(b"\x00")
    else:
        _compact(write, value)


def _legacy_string(write: Callable[[Any], Any], value: str | None) -> None:
    if value is None:
        write(_I16.pack(-1))
    else:
        data = value.encode()
        write(_I16.pack(len(data)))
        write(data)


def _legacy_bytes(write: Callable[[Any], Any], value: bytes | None) -> None:
    if value is None:
        write(_I32.pack(-1))
    else:
        write(_I32.pack(len(value)))
        write(value)


def _required(value: Any) -> Any:
    if value is None:
        raise TypeError("Unexpectedly received None value")
    return value


_COMPILED: dict[type, Writer] = {}
_names = itertools.count()


def compiled_writer(entity_type: type) -> Writer:
    """`writer(buffer, entity)`, writing exactly the bytes kio's `entity_writer` writes."""
    writer = _COMPILED.get(entity_type)
    if writer is None:
        writer = _COMPILED[entity_type] = _compile(entity_type)
    return writer


def encode_entity(entity: Any) -> bytes:
    buffer = io.BytesIO()
    compiled_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _compile(entity_type: type) -> Writer:
    flexible = entity_type.__flexible__
    env: dict[str, Any] = {
        "_compact": _compact, "_compact_nullable": _compact_nullable, "_legacy_string": _legacy_string,
        "_legacy_bytes": _legacy_bytes, "_required": _required, "uvarint": uvarint, "_I32": _I32,
        "_NULL_ENTITY": _NULL_ENTITY, "_ENTITY": _ENTITY,
    }
    lines = ["def write_entity(buffer, e):", "    write = buffer.write"]
    run: list[tuple[str, str]] = []  # pending fixed-size fields: (struct code, value expression)

    def flush() -> None:
        if run:
            name = f"_S{next(_names)}"
            env[name] = struct.Struct(">" + "".join(code for code, _ in run))
            lines.append(f"    write({name}.pack({', '.join(expr for _, expr in run)}))")
            run.clear()

    tagged: list[tuple[int, Field, Writer, Any]] = []
    # Kafka writes RequestHeader.client_id as a legacy nullable string even in flexible headers.
    header = entity_type.__name__ == "RequestHeader"
    for field in fields(entity_type):
        tag = get_field_tag(field)
        if tag is not None:
            tagged.append((tag, field, get_field_writer(field, flexible, False, True), get_tagged_field_default(field)))
            continue
        kind, optional = classify_field(field), is_optional(field)
        primitive = isinstance(kind, (PrimitiveField, PrimitiveTupleField))
        kafka_type = get_schema_field_type(field) if primitive else ""
        value = f"e.{field.name}"
        if isinstance(kind, PrimitiveField) and not optional and kafka_type in _FIXED:
            code, suffix = _FIXED[kafka_type]
            run.append((code, value + suffix))
            continue
        flush()
        if header and field.name == "client_id":
            lines.append(f"    _legacy_string(write, {value})")
        elif isinstance(kind, PrimitiveField) and kafka_type in ("string", "bytes", "records"):
            lines.append(_string_line(value, kafka_type, flexible, optional))
        elif isinstance(kind, EntityField):
            inner = f"_w{next(_names)}"
            env[inner] = compiled_writer(kind.type_)
            if optional:
                lines += [f"    v = {value}", "    if v is None:", "        write(_NULL_ENTITY)", "    else:",
                          "        write(_ENTITY)", f"        {inner}(buffer, v)"]
            else:
                lines.append(f"    {inner}(buffer, {value})")
        elif isinstance(kind, EntityTupleField):
            inner = f"_w{next(_names)}"
            env[inner] = compiled_writer(kind.type_)
            lines += _array_lines(value, flexible, [f"{inner}(buffer, x)"])
        elif isinstance(kind, PrimitiveTupleField) and kafka_type in _FIXED:
            code, suffix = _FIXED[kafka_type]
            name = f"_S{next(_names)}"
            env[name] = struct.Struct(">" + code)
            lines += _array_lines(value, flexible, [f"write({name}.pack(x{suffix}))"])
        else:
            # Rare in answers: kio writes it, so its format stays kio's.
            name = f"_k{next(_names)}"
            env[name] = get_field_writer(field, flexible, False, False)
            lines.append(f"    {name}(buffer, {value})")
    flush()
    if flexible:
        if tagged:
            name = f"_t{next(_names)}"
            env[name] = _tag_writer(sorted(tagged, key=lambda t: t[0]))
            lines.append(f"    {name}(buffer, e)")
        else:
            lines.append("    write(b'\\x00')")
    elif tagged:
        raise ValueError(f"{entity_type.__name__}: tagged fields on a non-flexible entity")
    exec("\n".join(lines), env)  # noqa: S102 - the source is generated above from the schema alone
    return env["write_entity"]


def _string_line(value: str, kafka_type: str, flexible: bool, optional: bool) -> str:
    if flexible:
        return f"    _compact_nullable(write, {value})" if optional else f"    _compact(write, _required({value}))"
    if kafka_type == "string":
        return f"    _legacy_string(write, {value if optional else f'_required({value})'})"
    return f"    _legacy_bytes(write, {value if optional else f'_required({value})'})"


def _array_lines(value: str, flexible: bool, body: list[str]) -> list[str]:
    if flexible:
        head = ["    v = " + value, "    if v is None:", "        write(b'\\x00')", "    else:",
                "        write(uvarint(len(v) + 1))"]
    else:
        head = ["    v = " + value, "    if v is None:", "        write(_I32.pack(-1))", "    else:",
                "        write(_I32.pack(len(v)))"]
    return [*head, "        for x in v:", *("            " + b for b in body)]


def _tag_writer(tagged: list[tuple[int, Field, Writer, Any]]) -> Writer:
    """The tag section as kio writes it: fields at their default are left out, the rest in tag order."""

    def write_tags(buffer: io.BytesIO, entity: Any) -> None:
        sections = []
        for tag, field, writer, implicit_default in tagged:
            value = getattr(entity, field.name)
            if value == field.default or (field.default is MISSING and value == implicit_default):
                continue
            encoded = io.BytesIO()
            writer(encoded, value)
            sections.append(uvarint(tag) + uvarint(len(encoded.getvalue())) + encoded.getvalue())
        buffer.write(uvarint(len(sections)))
        for section in sections:
            buffer.write(section)

    return write_tags
