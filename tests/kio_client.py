"""A minimal blocking Kafka client on kio, for speaking any API at any version in tests."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from cluster.gateway.apis import build, request_class, response_class


class KioClient:
    def __init__(self, bootstrap: str, timeout: float = 30) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        request = build(request_class(api_key, version), body)
        self.correlation_id += 1
        header_cls = RequestHeaderV2 if type(request).__flexible__ else RequestHeaderV1
        buf = io.BytesIO()
        entity_writer(header_cls)(
            buf,
            header_cls(request_api_key=api_key, request_api_version=version, correlation_id=self.correlation_id, client_id="kio-test"),
        )
        entity_writer(type(request))(buf, request)
        data = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", self._recv(4))[0]
        payload = self._recv(size)
        cls = response_class(api_key, version)
        header, offset = entity_reader(cls.__header_schema__)(payload, 0)
        assert header.correlation_id == self.correlation_id
        response, _ = entity_reader(cls)(payload, offset)
        return response

    def _recv(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the gateway")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "KioClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
