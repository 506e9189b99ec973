"""Client side of the operator API (`raygroups status/actors/kill/move`): one request, one answer.

A gateway serves operator requests on its operator listener (localhost by default), not on the
Kafka port. Given the Kafka address, the gateway refuses the request and names its operator
listener; the client then asks there, if it can reach it: a loopback operator address is followed
only when the gateway is on this machine. `--bootstrap` may also name the operator listener itself.
"""

from __future__ import annotations

import ipaddress
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


def admin_call(bootstrap: str, op: str, timeout: float = 60.0, follow: bool = True, **args: Any) -> Any:
    host, port = parse_bootstrap(bootstrap)
    answer = _ask(host, port, op, args, timeout)
    operator = answer.get("operator")
    if follow and answer.get("refused") and operator:
        op_host, op_port = parse_bootstrap(operator)
        if _is_loopback(op_host) and not _is_this_machine(host):
            raise AdminError(
                f"{answer.get('error')}, on the gateway's machine: run the command there, or set "
                "raygroups.operator.host to an address this machine reaches"
            )
        answer = _ask(op_host, op_port, op, args, timeout)
    if not answer.get("ok"):
        raise AdminError(answer.get("error", "admin request failed"))
    return answer["result"]


def _ask(host: str, port: int, op: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
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
    return msgpack.unpackb(payload[4:], strict_map_key=False)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_this_machine(host: str) -> bool:
    """Whether host names this machine: loopback, or an address a socket here can bind."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, _type, _proto, _name, sockaddr in infos:
        if _is_loopback(sockaddr[0]):
            return True
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((sockaddr[0], 0))
            return True
        except OSError:
            continue
    return False


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed by the gateway")
        data += chunk
    return bytes(data)
