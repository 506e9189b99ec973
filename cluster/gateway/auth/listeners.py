"""Kafka's `listeners` and `listener.security.protocol.map`, for raygroups' one client listener.

`listeners=NAME://host:port`: the name maps to a security protocol through the map (the default
map names each protocol after itself, so `SASL_SSL://:9093` just works). raygroups gives each
gateway one client listener (gateway i on port+i) because Metadata advertises one address per
broker; a second listener, with its own advertised addresses, is not built yet and is refused
with that reason rather than ignored.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: SecurityProtocol
    host: str  # "" as in Kafka: every interface
    port: int


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    out = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        try:
            out[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise ValueError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                             f"with PROTOCOL one of {', '.join(p.value for p in SecurityProtocol)}") from None
        if not sep:
            raise ValueError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
    return out


def parse_listener(listeners: str, protocol_map: str) -> Listener | None:
    """The client listener `listeners` names, or None when it is empty (PLAINTEXT on --host/--port)."""
    items = [item.strip() for item in listeners.split(",") if item.strip()]
    if not items:
        return None
    if len(items) > 1:
        raise ValueError("listeners: raygroups serves one client listener per gateway "
                         f"(Metadata advertises one address per broker), got {len(items)}")
    name, sep, address = items[0].partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listeners: expected NAME://host:port, got {items[0]!r}")
    protocols = parse_protocol_map(protocol_map)
    protocol = protocols.get(name.upper())
    if protocol is None:
        raise ValueError(f"listeners: {name!r} is not in listener.security.protocol.map")
    return Listener(name.upper(), protocol, host.strip("[]"), int(port))
