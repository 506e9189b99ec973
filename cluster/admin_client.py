"""Client side of the operator API (`raygroups status/actors/kill/move`): one request, one answer.

A gateway serves operator requests on its operator listener (localhost by default), not on the
Kafka port. Given the Kafka address, the gateway refuses the request and names its operator
listener; the client then asks there, if it can reach it: a loopback operator address is followed
only when the gateway is on this machine. `--bootstrap` may also name the operator listener itself.

A super user may instead operate over a client listener from anywhere it is reachable: given a
`Security` (Kafka's security.protocol, sasl.mechanism, sasl.username/password, ssl.ca.location),
the connection is wrapped in TLS and authenticates with SASL (PLAIN, SCRAM-SHA-256/512, framed as
Kafka clients do: SaslHandshake v1 then SaslAuthenticate) before the operator request.

A listener that wants TLS or SASL closes a connection that comes without them, unanswered (as
Kafka's brokers do). The client then asks the listener what it speaks, on a fresh connection: a
TLS handshake (not verified: nothing secret is sent) and a SaslHandshake, which a SASL listener
answers before authentication with its mechanisms. The error says which settings it needs and
where the operator listener is, instead of only that the connection was closed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import ipaddress
import os
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

import msgpack
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from cluster.gateway.apis import ADMIN_API_KEY, ApiKey, build, request_class, response_class
from cluster.gateway.auth.scram import HASHES, salted_password


class AdminError(Exception):
    pass


@dataclass(frozen=True)
class Security:
    """How to reach a client listener, with the Kafka client settings' names and values."""

    protocol: str = "PLAINTEXT"  # security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    mechanism: str = "PLAIN"  # sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None  # ssl.ca.location; None: the system's trust store

    @property
    def tls(self) -> bool:
        return self.protocol.upper() in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.upper() in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise AdminError(f"bootstrap must be host:port, got {bootstrap!r}")
    return host, int(port)


def admin_call(bootstrap: str, op: str, timeout: float = 60.0, follow: bool = True,
               security: Security | None = None, **args: Any) -> Any:
    host, port = parse_bootstrap(bootstrap)
    answer = _ask(host, port, op, args, timeout, security)
    operator = answer.get("operator")
    if follow and answer.get("refused") and operator:
        op_host, op_port = parse_bootstrap(operator)
        if is_loopback(op_host) and not _is_this_machine(host):
            raise AdminError(
                f"{answer.get('error')}, on the gateway's machine: run the command there, or set "
                "raygroups.operator.host to an address this machine reaches"
            )
        answer = _ask(op_host, op_port, op, args, timeout)
    if not answer.get("ok"):
        raise AdminError(answer.get("error", "admin request failed"))
    return answer["result"]


_CLIENT_ID = "raygroups-cli"


def _ask(host: str, port: int, op: str, args: dict[str, Any], timeout: float,
         security: Security | None = None) -> dict[str, Any]:
    body = msgpack.packb({"op": op, "args": args})
    client = _CLIENT_ID.encode()
    header = struct.pack(">hhih", ADMIN_API_KEY, 0, 1, len(client)) + client
    frame = header + body
    try:
        with socket.create_connection((host, port), timeout=timeout) as plain:
            sock = _secure(plain, host, security)
            if security is not None and security.sasl:
                _authenticate(sock, security)
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", _read_exactly(sock, 4))[0]
            payload = _read_exactly(sock, size)
    except (OSError, ssl.SSLError) as exc:
        # A listener wanting what the caller did not give closes unanswered (a TLS listener may
        # also reset the plain connection): say what it wants rather than only that it closed.
        closed = isinstance(exc, (Closed, ConnectionError, ssl.SSLError))
        needs = _what_the_listener_needs(host, port, timeout, security) if closed else None
        raise AdminError(needs or f"cannot reach a raygroups gateway at {host}:{port}: {exc.strerror or exc}") from None
    return msgpack.unpackb(payload[4:], strict_map_key=False)


class Closed(OSError):
    """The gateway closed the connection before it answered."""


_OPERATOR_LISTENER = (
    "or, on the gateway's machine, use its operator listener, which needs none: "
    "raygroups.operator.host:raygroups.operator.port (127.0.0.1 and a free port by default; "
    "`raygroups up` prints it as 'operator API at host:port')"
)


def _what_the_listener_needs(host: str, port: int, timeout: float, security: Security | None) -> str | None:
    """Why a listener closed an operator request unanswered, as one line saying what to set; None
    when it does not want TLS or SASL the caller left out (then it closed for another reason)."""
    has_tls = security is not None and security.tls
    tls = has_tls or _speaks_tls(host, port, timeout)
    mechanisms = None if security is not None and security.sasl else _sasl_mechanisms(host, port, timeout, tls)
    if mechanisms is not None:
        protocol = "SASL_SSL" if tls else "SASL_PLAINTEXT"
        ca = ", RAYGROUPS_SSL_CA_LOCATION (its CA)" if tls else ""
        return (
            f"{host}:{port} is a {protocol} listener (SASL {', '.join(mechanisms) or 'with no mechanism enabled'}): "
            f"operator commands there need a super user's credentials: set RAYGROUPS_SECURITY_PROTOCOL={protocol}, "
            f"RAYGROUPS_SASL_MECHANISM, RAYGROUPS_SASL_USERNAME and RAYGROUPS_SASL_PASSWORD{ca}; {_OPERATOR_LISTENER}"
        )
    if tls and not has_tls:
        return (
            f"{host}:{port} is an SSL listener: set RAYGROUPS_SECURITY_PROTOCOL=SSL and RAYGROUPS_SSL_CA_LOCATION "
            f"(its CA); {_OPERATOR_LISTENER}"
        )
    return None


def _speaks_tls(host: str, port: int, timeout: float) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only asks whether the listener speaks TLS; nothing is sent
    try:
        with socket.create_connection((host, port), timeout=timeout) as plain, context.wrap_socket(plain):
            return True
    except (OSError, ssl.SSLError):
        return False


def _sasl_mechanisms(host: str, port: int, timeout: float, tls: bool) -> list[str] | None:
    """The mechanisms a SASL listener offers, from its answer to a SaslHandshake (which it serves
    before authentication); None if the listener does not do SASL or does not answer."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as plain:
            sock = context.wrap_socket(plain) if tls else plain
            answer = _kafka_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    except (OSError, ssl.SSLError, ValueError):
        return None
    # A listener without SASL answers ILLEGAL_SASL_STATE: its connections are authenticated already.
    if answer.error_code not in (ErrorCode.none, ErrorCode.unsupported_sasl_mechanism):
        return None
    return list(answer.mechanisms)


def _secure(sock: socket.socket, host: str, security: Security | None) -> socket.socket:
    if security is None or not security.tls:
        return sock
    context = ssl.create_default_context(cafile=security.ca_file)
    return context.wrap_socket(sock, server_hostname=host)


def _kafka_request(sock: socket.socket, api_key: int, version: int, data: dict[str, Any]) -> Any:
    cls = request_class(api_key, version)
    header_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                              correlation_id=1, client_id=_CLIENT_ID))
    entity_writer(cls)(buf, build(cls, data))
    sock.sendall(struct.pack(">i", buf.tell()) + buf.getvalue())
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    answer = _read_exactly(sock, size)
    response_cls = response_class(api_key, version)
    _header, used = entity_reader(response_cls.__header_schema__)(answer, 0)
    return entity_reader(response_cls)(answer[used:], 0)[0]


def _authenticate(sock: socket.socket, security: Security) -> None:
    mechanism = security.mechanism.upper()
    if mechanism != "PLAIN" and mechanism not in HASHES:
        raise AdminError(f"unknown SASL mechanism {security.mechanism!r}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    if security.username is None or security.password is None:
        raise AdminError("SASL needs a username and a password")
    handshake = _kafka_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    if handshake.error_code != ErrorCode.none:
        raise AdminError(f"SASL handshake refused ({handshake.error_code.name}); the gateway offers "
                         f"{', '.join(handshake.mechanisms) or 'no mechanism'}")

    def step(token: bytes) -> bytes:
        answer = _kafka_request(sock, ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": token})
        if answer.error_code != ErrorCode.none:
            raise AdminError(f"SASL authentication failed: {answer.error_message or answer.error_code.name}")
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        step(b"\0" + security.username.encode() + b"\0" + security.password.encode())
        return
    scram = _ScramClient(mechanism, security.username, security.password)
    scram.check_server_final(step(scram.final(step(scram.first()))))


class _ScramClient:
    """The client side of RFC 5802 / 7677, as Kafka's ScramSaslClient (no channel binding)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._hash = HASHES[mechanism]
        self._mechanism = mechanism
        self._password = password.encode()
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._bare = f"n={name},r={base64.b64encode(os.urandom(24)).decode()}"

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce = self._bare.split(",r=", 1)[1]
        if not attrs.get("r", "").startswith(nonce) or "s" not in attrs or not attrs.get("i", "").isdigit():
            raise AdminError("SASL authentication failed: invalid SCRAM server-first message")
        salted = salted_password(self._mechanism, self._password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._expected = hmac.digest(hmac.digest(salted, b"Server Key", self._hash), auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check_server_final(self, server_final: bytes) -> None:
        # The gateway proves it holds the credential too: a false server cannot pass as one.
        text = server_final.decode()
        if not text.startswith("v=") or not hmac.compare_digest(base64.b64decode(text[2:]), self._expected):
            raise AdminError("SASL authentication failed: the gateway's SCRAM signature is wrong")


def is_loopback(host: str) -> bool:
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
        if is_loopback(sockaddr[0]):
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
            raise Closed("connection closed by the gateway")
        data += chunk
    return bytes(data)
