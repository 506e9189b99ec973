"""One pipelined Kafka connection: many requests in flight, answers matched by correlation id."""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from cluster.gateway.apis import build, request_class, response_class


class ConnectionClosed(ConnectionError):
    pass


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._next_id = 0
        self._waiting: dict[int, tuple[asyncio.Future, type]] = {}
        self._reading = asyncio.ensure_future(self._read_loop())
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int, client_id: str = "raygroups-load") -> "Connection":
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 24)
        return cls(reader, writer, client_id)

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        if self.closed:
            raise ConnectionClosed("connection closed")
        request = build(request_class(api_key, version), body)
        self._next_id += 1
        correlation_id = self._next_id
        header_cls = RequestHeaderV2 if type(request).__flexible__ else RequestHeaderV1
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        entity_writer(header_cls)(
            buf,
            header_cls(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=self._client_id),
        )
        entity_writer(type(request))(buf, request)
        data = buf.getbuffer()
        struct.pack_into(">i", data, 0, len(data) - 4)
        future = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = (future, response_class(api_key, version))
        self._writer.write(bytes(data))
        return await future

    async def _read_loop(self) -> None:
        try:
            while True:
                size = struct.unpack(">i", await self._reader.readexactly(4))[0]
                payload = await self._reader.readexactly(size)
                correlation_id = struct.unpack_from(">i", payload, 0)[0]
                future, cls = self._waiting.pop(correlation_id)
                header, offset = entity_reader(cls.__header_schema__)(payload, 0)
                response, _ = entity_reader(cls)(payload, offset)
                if not future.done():
                    future.set_result(response)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self._fail(ConnectionClosed(str(exc) or "connection closed by the broker"))
        except asyncio.CancelledError:
            self._fail(ConnectionClosed("connection closed"))

    def _fail(self, exc: Exception) -> None:
        self.closed = True
        for future, _ in self._waiting.values():
            if not future.done():
                future.set_exception(exc)
        self._waiting.clear()

    async def close(self) -> None:
        self.closed = True
        self._reading.cancel()
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass
