"""The address a gateway gives clients, apart from the one it binds (Kafka's `advertised.listeners`).

A gateway in a container or a pod binds every interface (`--host 0.0.0.0`) but must be reached at
the node's or the service's address: Metadata and FindCoordinator answer what this module decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.config import Config

# Kafka refuses these in advertised.listeners: a client cannot connect to "every interface".
WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})


@dataclass(frozen=True, slots=True)
class AdvertisedListener:
    name: str
    host: str  # "" : not given, decided by where the gateway binds
    port: int  # 0: the port the gateway bound


def parse_advertised(text: str) -> AdvertisedListener | None:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        return None
    if len(items) > 1:
        raise ValueError(f"advertised.listeners: raygroups advertises one client listener per gateway, got {len(items)}")
    name, sep, address = items[0].partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"advertised.listeners: expected NAME://host:port, got {items[0]!r}")
    host = host.strip("[]")
    if host in WILDCARDS - {""}:
        raise ValueError(f"advertised.listeners: {host} is not an address a client can connect to")
    return AdvertisedListener(name.upper(), host, int(port))


def advertised_address(config: Config, bind_host: str, bound_port: int, broker_id: int, node_ip: str) -> tuple[str, int]:
    """Where clients reach gateway `broker_id`: advertised.listeners' host (port + broker id, as
    listeners), else the bound host, or this node's IP when it binds every interface."""
    advertised = parse_advertised(config["advertised.listeners"])
    host = advertised.host if advertised and advertised.host else bind_host
    if host in WILDCARDS:
        host = node_ip
    port = advertised.port + broker_id if advertised and advertised.port else bound_port
    return host, port


def with_advertised_host(config: Config, host: str, listener_name: str = "PLAINTEXT") -> Config:
    """--advertised-host: the host of advertised.listeners, keeping a port given there."""
    current = parse_advertised(config["advertised.listeners"])
    name = current.name if current else listener_name
    port = current.port if current else 0
    return config.with_overrides({"advertised.listeners": f"{name}://{host}:{port}"})
