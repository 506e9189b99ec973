"""What all connections of one gateway share: request memory and connection counts (issues 10, 21).

`RequestMemory` is `queued.max.request.bytes`: the request bytes a gateway holds across its
connections, partial frames and requests not answered yet. Bytes count once they have arrived,
never for the size a prefix only announced: Kafka's pool (SimpleMemoryPool) reserves a frame's
whole declared size when its prefix is read, so three connections announcing 100 MB each and
sending nothing more filled a 256 MiB pool and every connection of the gateway stopped reading
(issue 21; Kafka's default is no pool at all). Past the bound a connection holding more than its
own allowance (`per_connection`, a request up to a record batch's size) stops reading until memory
comes back; a connection within its allowance is always read, so one connection's bytes never
block another connection's small request. Memory is bounded by the limit plus one allowance and
one socket read per connection (max.connections bounds those).

`ConnectionQuota` is `max.connections.per.ip` and `max.connections`: a connection past either is
closed as soon as it is accepted, as Kafka's acceptor does.

`ListenerLimits` are what Kafka applies to each connection of a listener: `connections.max.idle.ms`
(Selector's IdleExpiryManager), `sasl.server.max.receive.size` (SaslServerAuthenticator reads
every frame before and during authentication with it) and `connection.failed.authentication.delay.ms`
(Selector delays a failed authentication's answer and close by it).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


# What a connection may always hold, whatever the pool holds: a request carrying a record batch of
# message.max.bytes' default (1,048,588) with its headers.
PER_CONNECTION = 1024 * 1024 + 64 * 1024


class RequestMemory:
    def __init__(self, limit: int, per_connection: int = PER_CONNECTION) -> None:
        self.limit = limit  # -1 or 0 (Kafka: queuedMaxBytes <= 0 is MemoryPool.NONE): unbounded
        self.per_connection = per_connection
        self.used = 0
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()

    @property
    def bounded(self) -> bool:
        return self.limit > 0

    @property
    def spent(self) -> bool:
        return self.bounded and self.used >= self.limit

    def take(self, size: int) -> None:
        """size bytes arrived: they are in memory already, so they are counted, never refused."""
        self.used += size

    def must_wait(self, held: int) -> bool:
        """A connection holding `held` bytes reads no more for now."""
        return held > self.per_connection and self.spent

    def release(self, size: int) -> None:
        if size <= 0:
            return
        self.used -= size
        while self._waiters and not self.spent:
            self._waiters.popleft()()

    def wait(self, callback: Callable[[], None]) -> None:
        """Call back once memory is available again (each registration once; at once if it is)."""
        if not self.spent:
            callback()
            return
        self._waiters.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        try:
            self._waiters.remove(callback)
        except ValueError:
            pass


@dataclass(frozen=True, slots=True)
class Refusal:
    limit: str  # the setting: max.connections.per.ip or max.connections
    message: str


class ConnectionQuota:
    def __init__(self, max_connections: int, max_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()

    def admit(self, ip: str) -> Refusal | None:
        """Count a new connection from ip, or say why it is refused (then it is not counted)."""
        if self.per_ip[ip] >= self.max_per_ip:
            return Refusal("max.connections.per.ip",
                           f"too many connections from {ip} (max.connections.per.ip={self.max_per_ip})")
        if self.total >= self.max_connections:
            return Refusal("max.connections", f"too many connections (max.connections={self.max_connections})")
        self.total += 1
        self.per_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    connections_max_idle_ms: int = 600_000  # -1: never (Kafka's NO_IDLE_TIMEOUT_MS)
    sasl_server_max_receive_size: int = 524_288
    failed_authentication_delay_ms: int = 100

    @classmethod
    def from_config(cls, config: Any) -> "ListenerLimits":
        return cls(config["connections.max.idle.ms"], config["sasl.server.max.receive.size"],
                   config["connection.failed.authentication.delay.ms"])
