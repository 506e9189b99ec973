"""The client listener a gateway opens, from its configuration: security protocol, TLS context,
the limits each of its connections gets, and what a new connection's session starts as
(unauthenticated on a SASL listener)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from cluster.gateway.auth.listeners import SecurityProtocol, parse_listener
from cluster.gateway.auth.session import ListenerKind, Session
from cluster.gateway.auth.tls import server_context
from cluster.gateway.connection_limits import ListenerLimits


@dataclass(frozen=True)
class ClientListener:
    protocol: SecurityProtocol
    ssl: ssl.SSLContext | None
    limits: ListenerLimits = ListenerLimits()

    def new_session(self) -> Session:
        return Session(ListenerKind.CLIENT, principal=None if self.protocol.sasl else Session().principal,
                       limits=self.limits)


def client_listener(config: Any) -> ClientListener:
    listener = parse_listener(config["listeners"], config["listener.security.protocol.map"])
    protocol = listener.protocol if listener is not None else SecurityProtocol.PLAINTEXT
    return ClientListener(protocol, server_context(config) if protocol.tls else None, ListenerLimits.from_config(config))
