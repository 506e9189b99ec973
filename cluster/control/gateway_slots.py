"""The reconciler's gateways: how many, on which nodes, under which broker ids and ports.

A gateway is a broker as clients see it (a broker id and an address), so unlike a worker actor a
dead gateway is restarted under the same id and port. With `raygroups.gateways=per-node` each Ray
node runs one, pinned to it: a node that joins gets a new broker id; a node that leaves takes its
gateway with it, and the gateway is dropped from the map at once (Metadata and FindCoordinator stop
naming it) rather than restarted elsewhere, where clients would find a broker on a node that is gone.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from cluster.control.actor_state import ActorEntry, ActorState
from cluster.calls.kinds import ActorKind
from cluster.leadership import GatewayAddress
from cluster.control.placement import retry_delay



class KeeperHost(Protocol):
    """What the gateway keeper needs of the reconciler that owns it (named here so the keeper does not
    import its owner: the reconciler imports the keeper)."""

    pool: Any
    config: Any
    actors: dict[str, ActorEntry]
    nodes: Any
    clock: Callable[[], float]

    def snapshot(self) -> Any: ...
    async def publish(self) -> None: ...
    def event(self, kind: str, detail: str) -> None: ...
    def died(self, entry: ActorEntry, handle: Any, quiet: bool = False) -> None: ...
    def _track(self, coro: Awaitable[None]) -> None: ...
    async def _await_ready(self, entry: ActorEntry) -> None: ...

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GatewaySlot:
    broker_id: int
    host: str  # where it binds (the address clients get is the gateway's answer)
    port: int  # 0: a free port, kept across restarts once bound
    node: str | None  # the node it is pinned to (per-node), None: wherever Ray puts it


def gateway_mode(setting: int | str, nodes: list[str] | None, pinnable: bool) -> int | str:
    """A count or "per-node": auto is per-node when there is more than one node to pin to."""
    if setting == "auto":
        return "per-node" if pinnable and nodes and len(nodes) > 1 else 1
    if setting == "per-node" and not (pinnable and nodes):
        return 1
    return setting


def nodes_without_gateway(nodes: list[str], slots: dict[str, GatewaySlot], own_node: str | None) -> list[str]:
    """The nodes a per-node deployment still lacks a gateway on, this process's node first (so
    that broker 0, the first bootstrap address, runs next to the controller)."""
    taken = {s.node for s in slots.values()}
    return sorted((n for n in nodes if n not in taken), key=lambda n: (n != own_node, n))


class GatewayKeeper:
    def __init__(self, rec: KeeperHost) -> None:
        self.rec = rec
        self.slots: dict[str, GatewaySlot] = {}
        self.mode: int | str = 1
        self.host = "127.0.0.1"
        self.base_port = 0
        # Never reused: a client that cached a gone broker's id must not reach another node under it.
        self.next_broker_id = 0

    @property
    def pinnable(self) -> bool:
        return hasattr(self.rec.pool, "spawn_gateway_on") and self.rec.nodes is not None

    def plan_start(self, host: str, base_port: int, own_node: str | None) -> list[ActorEntry]:
        """Spawn the gateways the cluster starts with."""
        self.host, self.base_port = host, base_port
        self.mode = gateway_mode(self.rec.config["raygroups.gateways"], self.rec.nodes, self.pinnable)
        if self.mode == "per-node":
            return [self._new(node) for node in nodes_without_gateway(self.rec.nodes or [], self.slots, own_node)]
        return [self._new(None) for _ in range(int(self.mode))]

    def _new(self, node: str | None) -> ActorEntry:
        broker_id = self.next_broker_id
        self.next_broker_id += 1
        slot = GatewaySlot(broker_id, self.host, self.base_port + broker_id if self.base_port else 0, node)
        return self.spawn(slot)

    def spawn(self, slot: GatewaySlot) -> ActorEntry:
        name = f"gateway-{slot.broker_id}"
        self.slots[name] = slot
        entry = ActorEntry(name, ActorKind.GATEWAY, self._spawn_handle(slot, name), node_id=slot.node,
                           gateway=GatewayAddress(slot.broker_id, slot.host, slot.port))
        self.rec.actors[name] = entry
        return entry

    def _spawn_handle(self, slot: GatewaySlot, name: str) -> Any:
        if slot.node is not None and hasattr(self.rec.pool, "spawn_gateway_on"):
            return self.rec.pool.spawn_gateway_on(name, slot.broker_id, slot.host, slot.port, slot.node)
        return self.rec.pool.spawn_gateway(name, slot.broker_id, slot.host, slot.port)

    async def start(self, entry: ActorEntry) -> None:
        host, port = await self.rec.pool.start_gateway(entry.handle, self.rec.snapshot())
        slot = self.slots[entry.name]
        if not slot.port:  # a restart binds the port clients already know
            self.slots[entry.name] = GatewaySlot(slot.broker_id, slot.host, port, slot.node)
        entry.gateway = GatewayAddress(slot.broker_id, host, port)
        await self.rec._await_ready(entry)
        await self.rec.publish()

    # -- each pass --------------------------------------------------------------------------------

    async def step(self, now: float) -> None:
        nodes = self.rec.nodes
        dropped = False
        for name, slot in list(self.slots.items()):
            entry = self.rec.actors.get(name)
            if entry is None or entry.state is not ActorState.DEAD:
                continue
            if slot.node is not None and nodes is not None and slot.node not in nodes:
                del self.slots[name], self.rec.actors[name]
                self.rec.event("gateway-dropped", f"{name} left with its node {slot.node}")
                dropped = True
            elif entry.restart_at <= now:
                self._restart(entry)
        if self.mode == "per-node" and nodes:
            for node in nodes_without_gateway(nodes, self.slots, None):
                self.rec._track(self._bring_up_new(self._new(node)))
        if dropped:
            await self.rec.publish()

    def restart_times(self) -> list[float]:
        return [e.restart_at for name in self.slots if (e := self.rec.actors.get(name)) and e.state is ActorState.DEAD]

    async def _bring_up_new(self, entry: ActorEntry) -> None:
        try:
            await self.start(entry)
        except Exception as exc:
            log.warning("%s did not start on node %s: %s", entry.name, entry.node_id, exc)
            self._failed(entry, entry.handle)
            return
        self.rec.event("gateway-started", f"{entry.name} on node {entry.node_id} at {entry.gateway.host}:{entry.gateway.port}")

    def _restart(self, entry: ActorEntry) -> None:
        """A broker restart as clients see it: same broker id, same port, same node."""
        slot = self.slots[entry.name]
        entry.move_to(ActorState.RESTARTING)
        entry.handle = self._spawn_handle(slot, entry.name)
        entry.started_at = time.time()
        self.rec._track(self._restarted(entry))

    async def _restarted(self, entry: ActorEntry) -> None:
        handle = entry.handle
        try:
            await self.start(entry)
        except Exception as exc:
            log.warning("%s did not restart (%d tries): %s", entry.name, entry.failed_restarts + 1, exc)
            self._failed(entry, handle)
            return
        entry.failed_restarts = 0
        self.rec.event("gateway-restarted", f"{entry.name} listening again on {entry.gateway.host}:{entry.gateway.port}")

    def _failed(self, entry: ActorEntry, handle: Any) -> None:
        entry.failed_restarts += 1
        try:
            self.rec.pool.kill(handle)
        except Exception:
            pass
        self.rec.died(entry, handle, quiet=True)
        entry.restart_at = self.rec.clock() + retry_delay(entry.failed_restarts)
