"""Request frames generated from kio's schemas with seeded random values, optionally with one
structured fault at a length-bearing field (null where non-nullable, huge, negative or overlong
length, an unknown tag). The encoder is ours, not kio's writer, because kio's writer cannot
write what the fault needs (a null where the type says non-nullable, a length that lies)."""

from __future__ import annotations

import random
import struct
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

from cluster.gateway.apis import SUPPORTED, request_class
from cluster.entity_writer import uvarint

FAULTS = ("null", "huge", "negative", "overlong", "unknown_tag")

_INTS = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint8": ">B", "uint16": ">H",
         "uint32": ">I", "uint64": ">Q", "error_code": ">h", "timedelta_i32": ">i", "timedelta_i64": ">q",
         "datetime_i64": ">q"}
_ASCII = b"abcdefghijklmnopqrstuvwxyz-_.0123456789"


def every_api_version(apis: set[int] | None = None) -> list[tuple[int, int]]:
    return [
        (key, v) for key, (lo, hi) in sorted(SUPPORTED.items()) if apis is None or key in apis for v in range(lo, hi + 1)
    ]


class Encoder:
    """Writes one request; `fault` is the fault to plant once, at a random length site."""

    def __init__(
        self, rng: random.Random, fault: str | None = None, fault_rate: float = 0.3, names: tuple[bytes, ...] = ()
    ) -> None:
        self.rng = rng
        # Against a live cluster strings come from a few names, so that a Metadata that parses
        # auto-creates a handful of topics, not one per frame.
        self.names = names
        self.fault = fault
        self.fault_rate = fault_rate
        self.planted: str | None = None

    def _plant(self) -> str | None:
        if self.fault is None or self.planted is not None or self.rng.random() >= self.fault_rate:
            return None
        self.planted = self.fault
        return self.fault

    def request(self, api_key: int, version: int, correlation_id: int) -> bytes:
        cls = request_class(api_key, version)
        header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz"
        if cls.__header_schema__.__flexible__:
            header += b"\x00"
        out = bytearray(header)
        self.entity(out, cls)
        if self.fault is not None and self.planted is None:  # no site drawn yet: plant at the end
            self.planted = self.fault
            out += b"\xff\xff\xff\xff\x0f" if self.fault == "huge" else b"\xff\xff\xff\xff"
        return bytes(out)

    def entity(self, out: bytearray, cls: type) -> None:
        flexible = cls.__flexible__
        tagged = []
        for f in fields(cls):
            if get_field_tag(f) is not None:
                tagged.append(f)
            else:
                self.field(out, f, flexible, is_optional(f))
        if not flexible:
            return
        present = [f for f in tagged if self.rng.random() < 0.3]
        extra = 1 if self._plant() == "unknown_tag" else 0
        out += uvarint(len(present) + extra)
        for f in present:
            content = bytearray()
            self.field(content, f, flexible, nullable=False)
            out += uvarint(int(get_field_tag(f))) + uvarint(len(content)) + content
        if extra:
            out += uvarint(1000 + self.rng.randrange(100)) + uvarint(3) + b"xyz"

    def field(self, out: bytearray, f, flexible: bool, nullable: bool) -> None:
        kind = classify_field(f)
        if isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
            count = self.rng.choice((0, 1, 1, 2, 3))
            if nullable and self.rng.random() < 0.1:
                count = -1
            if self._length(out, flexible, count, wide=True):
                return
            for _ in range(max(count, 0)):
                if isinstance(kind, EntityTupleField):
                    self.entity(out, kind.type_)
                else:
                    self.primitive(out, get_schema_field_type(f), flexible, nullable=False)
        elif isinstance(kind, EntityField):
            if nullable:
                if self.rng.random() < 0.2:
                    out += b"\xff"
                    return
                out += b"\x01"
            self.entity(out, kind.type_)
        else:
            self.primitive(out, get_schema_field_type(f), flexible, nullable)

    def primitive(self, out: bytearray, kafka_type: str, flexible: bool, nullable: bool) -> None:
        rng = self.rng
        if kafka_type in _INTS:
            fmt = _INTS[kafka_type]
            size = struct.calcsize(fmt)
            signed = fmt[1].islower()
            lo, hi = (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else (0, (1 << (8 * size)) - 1)
            if kafka_type.startswith("timedelta"):
                # kio reads these as datetime.timedelta, which ends at ~2^46 ms (a kio limit, not Kafka's).
                lo, hi = max(lo, -(1 << 40)), min(hi, 1 << 40)
            value = rng.choice((0, 1, 2, rng.randrange(0, 100), rng.randint(lo, hi), -1 if signed else 0))
            out += struct.pack(fmt, value)
        elif kafka_type == "bool":
            out.append(rng.randrange(2))
        elif kafka_type == "float64":
            out += struct.pack(">d", rng.random())
        elif kafka_type == "uuid":
            out += bytes(16) if rng.random() < 0.3 else rng.randbytes(16)
        else:  # string, bytes, records
            if kafka_type == "string" and self.names:
                data = rng.choice(self.names)
            elif kafka_type == "string":
                data = bytes(rng.choice(_ASCII) for _ in range(rng.randrange(9)))
            else:
                data = rng.randbytes(rng.randrange(17))
            count = -1 if nullable and rng.random() < 0.1 else len(data)
            if self._length(out, flexible, count, wide=kafka_type != "string"):
                return
            if count >= 0:
                out += data

    def _length(self, out: bytearray, flexible: bool, count: int, wide: bool) -> bool:
        """Write a length (-1: null); True if a fault was planted instead (its payload follows
        as whatever the rest of the request is)."""
        fault = self._plant()
        if fault in (None, "unknown_tag"):
            if fault == "unknown_tag":
                self.planted = None  # not a tag site: leave it for one
            out += uvarint(count + 1) if flexible else struct.pack(">i" if wide else ">h", count)
            return False
        rng = self.rng
        if fault == "null":
            out += b"\x00" if flexible else struct.pack(">i" if wide else ">h", -1)
        elif fault == "huge":
            out += rng.choice((b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x08")) if flexible \
                else struct.pack(">i", 2**31 - 1) if wide else struct.pack(">h", 32767)
        elif fault == "negative":
            out += b"\xff\xff\xff\xff\xff\x01" if flexible else struct.pack(">i" if wide else ">h", -rng.randint(2, 1000))
        else:  # overlong: a length past the end of the frame
            n = rng.randint(100, 10_000)
            out += uvarint(n) if flexible else struct.pack(">i" if wide else ">h", n)
        return True
