"""One client connection's framing, sans I/O: requests to bytes, bytes to (request id, response).

The request and response types are kio's, one class per (API, version); request headers are v2
for flexible versions and v1 otherwise, response headers follow the response class (ApiVersions
keeps v0), as Kafka's protocol defines.

Each request remembers its owner (the machine that sent it), so one connection can carry the
requests of many machines (a shared pool) and hand every answer back to the right one.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
import typing
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader

from cluster.entity_writer import compiled_writer
from cluster.gateway.apis import build, request_class, response_class
from loadtest.drivers.fast_requests import encode_fast
from loadtest.members.machine import Send

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class WireError(Exception):
    """The broker sent bytes that are not a response to a request on this connection."""


class ClientWire:
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._next_correlation = 0
        self._waiting: dict[int, tuple[Any, int, type]] = {}  # correlation id -> (owner, request id, response class)
        self._buffer = bytearray()

    def encode(self, send: Send, owner: Any = None) -> bytes:
        fast = encode_fast(send.api, send.version, self._next_correlation + 1, self.client_id, send.body)
        if fast is not None:
            self._next_correlation += 1
            self._waiting[self._next_correlation] = (owner, send.request_id, response_class(send.api, send.version))
            return fast
        cls = request_class(send.api, send.version)
        check_fields(cls, send.body)
        request = build(cls, send.body)
        self._next_correlation += 1
        correlation = self._next_correlation
        header_cls = RequestHeaderV2 if type(request).__flexible__ else RequestHeaderV1
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        compiled_writer(header_cls)(
            buf,
            header_cls(request_api_key=send.api, request_api_version=send.version, correlation_id=correlation,
                       client_id=self.client_id),
        )
        compiled_writer(type(request))(buf, request)
        data = buf.getbuffer()
        _SIZE.pack_into(data, 0, len(data) - 4)
        self._waiting[correlation] = (owner, send.request_id, response_class(send.api, send.version))
        out = bytes(data)
        del data
        return out

    def receive(self, data: bytes) -> list[tuple[Any, int, Any, int]]:
        """Responses complete in the bytes so far, as (owner, request id, response, size in bytes)."""
        self._buffer += data
        out = []
        while len(self._buffer) >= 4:
            (size,) = _SIZE.unpack_from(self._buffer, 0)
            if len(self._buffer) < 4 + size:
                break
            payload = bytes(self._buffer[4 : 4 + size])
            del self._buffer[: 4 + size]
            (correlation,) = _CORRELATION.unpack_from(payload, 0)
            waiting = self._waiting.pop(correlation, None)
            if waiting is None:
                raise WireError(f"response with unknown correlation id {correlation}")
            owner, request_id, cls = waiting
            _, offset = entity_reader(cls.__header_schema__)(payload, 0)
            response, _ = entity_reader(cls)(payload, offset)
            out.append((owner, request_id, response, size + 4))
        return out

    def unanswered(self) -> list[int]:
        """Request ids still waiting (to fail them when the connection ends)."""
        return [request_id for _, request_id in self.abandon()]

    def abandon(self) -> list[tuple[Any, int]]:
        """(owner, request id) of every request still waiting; none waits any longer."""
        waiting = [(owner, request_id) for owner, request_id, _ in self._waiting.values()]
        self._waiting.clear()
        return waiting


def check_fields(cls: type, body: dict[str, Any]) -> None:
    """Refuse a body naming a field the request class lacks: kio's builder would drop it silently
    (a `session_timeout_ms` for `session_timeout` would send 0). Nested entities are checked on
    their first element; each key set is checked once."""
    _check(cls, frozenset(body))
    for name, value in body.items():
        nested = _nested(cls).get(name)
        if nested is None or value is None:
            continue
        first = value[0] if isinstance(value, (list, tuple)) and value else value
        if isinstance(first, dict):
            check_fields(nested, first)


@functools.cache
def _check(cls: type, keys: frozenset[str]) -> None:
    unknown = keys - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"{cls.__qualname__} has no field(s) {sorted(unknown)}")


@functools.cache
def _nested(cls: type) -> dict[str, type]:
    out = {}
    for name, hint in typing.get_type_hints(cls).items():
        for candidate in (hint, *typing.get_args(hint)):
            inner = typing.get_args(candidate)[0] if typing.get_origin(candidate) is tuple else candidate
            if isinstance(inner, type) and dataclasses.is_dataclass(inner):
                out[name] = inner
    return out
