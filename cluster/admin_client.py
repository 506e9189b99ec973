"""Client side of the operator API (`raygroups status/actors/kill/move`): one request, one answer."""

from __future__ import annotations

import socket
import struct
from typing import Any

import msgpack

from cluster.gateway.apis import ADMIN_API_KEY


class AdminError(Exception):
    pass


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise AdminError(f"bootstrap must be host:port, got {bootstrap!r}")
    return host, int(port)


def admin_call(bootstrap: str, op: str, timeout: float = 60.0, **args: Any) -> Any:
    host, port = parse_bootstrap(bootstrap)
    body = msgpack.packb({"op": op, "args": args})
    client = b"raygroups-cli"
    header = struct.pack(">hhih", ADMIN_API_KEY, 0, 1, len(client)) + client
    frame = header + body
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", _read_exactly(sock, 4))[0]
            payload = _read_exactly(sock, size)
    except OSError as exc:
        raise AdminError(f"cannot reach a raygroups gateway at {host}:{port}: {exc.strerror or exc}") from None
    answer = msgpack.unpackb(payload[4:], strict_map_key=False)
    if not answer.get("ok"):
        raise AdminError(answer.get("error", "admin request failed"))
    return answer["result"]


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed by the gateway")
        data += chunk
    return bytes(data)
