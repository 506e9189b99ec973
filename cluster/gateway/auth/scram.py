"""SCRAM credentials and the server side of one SCRAM exchange (RFC 5802, RFC 7677), and PLAIN.

Credentials are salted as Kafka stores them (ScramCredential: salt, iterations, StoredKey,
ServerKey); the password itself is never kept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Callable

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism bounds (both mechanisms): AlterUserScramCredentials refuses iterations outside
# them (credential_admin.py) and so does `raygroups user add`, as kafka-storage's ScramParser does.
# Above them, each PLAIN check costs more PBKDF2 (200,000 iterations took 158 ms, issue 21).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class AuthenticationFailed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def verifies(self, password: str) -> bool:
        other = make_credential(self.mechanism, password, self.salt, self.iterations)
        return hmac.compare_digest(other.stored_key, self.stored_key)


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    name = HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(mechanism, salt, iterations, hashlib.new(name, client_key).digest(),
                           hmac.digest(salted, b"Server Key", name))


def make_credential(mechanism: str, password: str, salt: bytes | None = None,
                    iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    if mechanism not in HASHES:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    # ScramParser's messages, without its add-scram flag.
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for {mechanism}")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for {mechanism}")
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations),
                                  salt, iterations)


Lookup = Callable[[str, str], "ScramCredential | None"]  # (user, mechanism) -> credential


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise AuthenticationFailed("malformed SCRAM message")
        out[key] = value
    return out


def _username(text: str) -> str:
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """client-first -> server-first -> client-final -> server-final, then `user` is set."""

    def __init__(self, mechanism: str, lookup: Lookup) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._step = 0
        self.user: str | None = None

    def respond(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM messages are UTF-8") from None
        if self._step == 0:
            return self._first(text)
        if self._step == 1:
            return self._final(text)
        raise AuthenticationFailed("unexpected SCRAM message after the exchange ended")

    def _first(self, text: str) -> bytes:
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or parts[1] and not parts[1].startswith("a="):
            raise AuthenticationFailed("malformed SCRAM client-first message")
        self._gs2 = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        if "n" not in attrs or "r" not in attrs:
            raise AuthenticationFailed("malformed SCRAM client-first message")
        user = _username(attrs["n"])
        credential = self._lookup(user, self.mechanism)
        if credential is None:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}")
        self._credential, self._user = credential, user
        self._nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        self._server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof = text.rpartition(",p=")
        attrs = _attributes(without_proof) if sep else {}
        if not sep or attrs.get("r") != self._nonce or attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise AuthenticationFailed("invalid SCRAM client-final message")
        name = HASHES[self.mechanism]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(self._credential.stored_key, auth_message, name)
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except ValueError:
            raise AuthenticationFailed("invalid SCRAM client proof") from None
        if len(client_proof) != len(signature):
            raise AuthenticationFailed("invalid SCRAM client proof")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), self._credential.stored_key):
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}")
        self._step = 2
        self.user = self._user
        server_signature = hmac.digest(self._credential.server_key, auth_message, name)
        return b"v=" + base64.b64encode(server_signature)


class PlainExchange:
    """SASL/PLAIN: one message, authzid NUL user NUL password.

    Kafka's PLAIN checks JAAS-configured users; raygroups has one user store, the salted SCRAM
    credentials, so PLAIN verifies the password against them (either SCRAM mechanism's entry)."""

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup
        self.user: str | None = None

    def respond(self, message: bytes) -> bytes:
        if self.user is not None:
            raise AuthenticationFailed("unexpected PLAIN message after the exchange ended")
        parts = message.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is different from username")
        for mechanism in HASHES:
            credential = self._lookup(user, mechanism)
            if credential is not None and credential.verifies(password):
                self.user = user
                return b""
        raise AuthenticationFailed("Authentication failed: Invalid username or password")


def exchange_for(mechanism: str, lookup: Lookup) -> ScramExchange | PlainExchange:
    if mechanism == "PLAIN":
        return PlainExchange(lookup)
    return ScramExchange(mechanism, lookup)
