"""The controller's side of replication for hosts linked in one event loop (the manager's tests and
the partition leaders'): one partition's registration kept with the real registration functions,
who lives, AlterPartition answered as the controller's keeper answers it, and pushes."""

from __future__ import annotations

import asyncio
from typing import Any

from cluster.replication.push import ReplicaPush
from cluster.replication.registration import PartitionRegistration, answer_alter_partition, reconcile

TP = ("orders", 0)


class Link:
    """A follower's link to the host of `replica`; a host that is gone answers nothing, as a dead
    actor does."""

    def __init__(self, side: ControllerSide, replica: int) -> None:
        self.side, self.replica = side, replica

    async def replica_fetch(self, items, max_wait_ms):
        host = self.side.hosts.get(self.replica)
        if host is None:
            await asyncio.sleep(0.01)
            raise ConnectionError(f"replica {self.replica} is gone")
        return await host.replica_fetch(items, max_wait_ms)


class ControllerSide:
    """Subclasses say how a host starts, is told its registration and closes."""

    def __init__(self, replicas: tuple[int, ...]) -> None:
        self.hosts: dict[int, Any] = {}
        self.incarnations: dict[int, int] = {}
        self.registration = PartitionRegistration.new(replicas)
        self.last_alter = None

    def alive(self) -> dict[int, int]:
        return {r: self.incarnations[r] for r in self.hosts}

    def leader(self) -> Any:
        return self.hosts[self.registration.leader]

    async def stop(self, replica: int) -> None:
        await self.close_host(self.hosts.pop(replica))
        await self.register(reconcile(self.registration, self.alive()))

    async def alter_partition(self, tp, request):
        registration, self.last_alter = answer_alter_partition(self.registration, request, self.alive(), self.last_alter)
        await self.register(registration)
        return self.last_alter.error, self.last_alter.registration

    async def register(self, registration: PartitionRegistration) -> None:
        """Record a change, then push it to every host (soon: as the controller's pass does, not
        inside the call that caused it)."""
        if registration != self.registration:
            self.registration = registration
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.push()))

    async def push(self) -> None:
        for replica in list(self.hosts):
            await self.push_to(replica)

    async def close(self) -> None:
        for host in list(self.hosts.values()):
            await self.close_host(host)

    async def push_to(self, replica: int) -> None:
        raise NotImplementedError

    async def close_host(self, host: Any) -> None:
        raise NotImplementedError


class PushedHosts(ControllerSide):
    """Hosts of replicas (partition leaders, coordinators) started by `make_host` and pushed the
    one partition's registration as the controller's keeper pushes it (ReplicaPush)."""

    def make_host(self, replica: int) -> Any:
        raise NotImplementedError

    async def start(self, replica: int) -> Any:
        self.incarnations[replica] = self.incarnations.get(replica, 0) + 1
        host = self.hosts[replica] = self.make_host(replica)
        await self.push_to(replica)
        return host

    async def push_to(self, replica: int) -> None:
        host = self.hosts.get(replica)
        if host is not None:
            push = ReplicaPush(replica, self.incarnations[replica], {TP: self.registration}, {})
            await host.apply_replicas(push, lambda source: Link(self, source), self)

    async def close_host(self, host: Any) -> None:
        await host.shutdown()

    @property
    def epoch(self) -> int:
        return self.registration.leader_epoch


def run(world: ControllerSide, test) -> None:
    """test(world) in a loop of its own, within 60 s, the world's hosts closed after it."""
    async def main():
        try:
            await test(world)
        finally:
            await world.close()

    asyncio.run(asyncio.wait_for(main(), 60))
