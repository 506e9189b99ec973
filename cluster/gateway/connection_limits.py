"""What all connections of one gateway share: request memory and connection counts (issue 10).

`RequestMemory` is Kafka's `queued.max.request.bytes` pool (SimpleMemoryPool, not strict): a frame's
whole size is reserved when its size prefix is read, before its body is buffered, and given back
once its answer is released or the connection ends, so partial frames and queued requests of every
connection count against one bound. As in Kafka, a reservation succeeds while anything is left,
even if it overshoots (one frame above the bound cannot wedge the gateway); a connection that cannot
reserve stops reading until memory comes back.

`ConnectionQuota` is `max.connections.per.ip` and `max.connections`: a connection past either is
closed as soon as it is accepted, as Kafka's acceptor does.
"""

from __future__ import annotations

import collections
from collections.abc import Callable


class RequestMemory:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # -1 (Kafka's "no pool"): unbounded
        self.used = 0
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()

    @property
    def bounded(self) -> bool:
        return self.limit >= 0

    def try_reserve(self, size: int) -> bool:
        if self.bounded and self.used >= self.limit:
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        if size <= 0:
            return
        self.used -= size
        while self._waiters and (not self.bounded or self.used < self.limit):
            self._waiters.popleft()()

    def wait(self, callback: Callable[[], None]) -> None:
        """Call back once memory is available again (each registration once)."""
        self._waiters.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        try:
            self._waiters.remove(callback)
        except ValueError:
            pass


class ConnectionQuota:
    def __init__(self, max_connections: int, max_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ip, or say why it is refused (then it is not counted)."""
        if self.per_ip[ip] >= self.max_per_ip:
            return f"too many connections from {ip} (max.connections.per.ip={self.max_per_ip})"
        if self.total >= self.max_connections:
            return f"too many connections (max.connections={self.max_connections})"
        self.total += 1
        self.per_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
