"""The actor pool: the one place that spawns, watches, kills, loads and unloads actors through Ray.

The controller decides; the pool carries it out. `ActorPool` is what the controller needs (a fake
one drives the controller in unit tests without Ray); `RayActorPool` is the real one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import ray
from ray.exceptions import RayActorError

from cluster.calls.kinds import ACTOR_OPTIONS, ActorKind
from cluster.config import Config
from cluster.leadership import Leadership

log = logging.getLogger(__name__)

TP = tuple[str, int]
# Actors that route calls to other actors and so follow the leadership map.
LEADERSHIP_FOLLOWERS = frozenset({ActorKind.GATEWAY, ActorKind.PARTITION_LEADER, ActorKind.GROUP_COORDINATOR})


class ActorPool(Protocol):
    def spawn(self, kind: ActorKind, name: str) -> Any: ...

    def spawn_gateway(self, name: str, node_id: int, host: str, port: int) -> Any: ...

    async def start_gateway(self, handle: Any, leadership: Leadership) -> tuple[str, int]: ...

    async def info(self, handle: Any, timeout: float | None = None) -> dict[str, Any]: ...

    async def watch(self, handle: Any) -> None:
        """Return once the actor is dead."""

    def kill(self, handle: Any) -> None: ...

    async def load(self, handle: Any, items: list[tuple[str, int, int]]) -> list[str]: ...

    async def unload(self, handle: Any, items: list[TP]) -> None: ...

    async def delete(self, handle: Any, items: list[TP]) -> None: ...

    async def update_leadership(self, handle: Any, leadership: Leadership, timeout: float) -> None: ...

    async def apply_replicas(self, handle: Any, push: Any) -> None:
        """Give a host the registrations of its replicas (cluster/control/replica_keeper.py)."""

    async def ping(self, handle: Any, timeout: float) -> bool:
        """True if the actor answers within `timeout` (raises otherwise)."""

    async def metrics(self, handle: Any, timeout: float) -> dict[str, Any]:
        """The actor's metrics snapshot (cluster/metrics/registry.py)."""

    async def shutdown(self, handle: Any, timeout: float) -> None: ...

    async def pause(self, node_id: str, pid: int, seconds: float) -> tuple[float, float]: ...


@runtime_checkable
class NodeAwarePool(Protocol):
    """A pool that knows the cluster's nodes and can start an actor on a chosen one. A pool
    without this (one process, a test's fake) runs everything on one node as far as placement knows."""

    async def nodes(self) -> list[str]:
        """The ids of the nodes alive now (level-triggered: polled by the reconciler)."""

    def spawn_on(self, kind: ActorKind, name: str, node_id: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class NodeChange:
    nodes: list[str]
    joined: list[str]
    left: list[str]

    def messages(self) -> list[str]:
        return [f"node {n} joined" for n in self.joined] + [f"node {n} left" for n in self.left]


class NodeMembership:
    """The nodes alive, as a node-aware pool last listed them: polled (level-triggered), since a
    node that joins sends no event and one that dies may take a while to fail its actors' calls."""

    def __init__(self, pool: NodeAwarePool, poll_seconds: float = 2.0) -> None:
        self.pool = pool
        self.poll_seconds = poll_seconds
        self.nodes: list[str] | None = None
        self.polled_at = 0.0

    @property
    def next_poll(self) -> float:
        return self.polled_at + self.poll_seconds

    async def poll(self, now: float) -> NodeChange | None:
        """The change since the last poll; None when nothing changed or the list could not be had."""
        try:
            nodes = sorted(await self.pool.nodes())
        except Exception as exc:
            log.warning("could not list the Ray nodes: %s", exc)
            return None
        self.polled_at = now
        if not nodes or nodes == self.nodes:
            return None
        before = set(self.nodes or nodes)
        self.nodes = nodes
        return NodeChange(nodes, sorted(set(nodes) - before), sorted(before - set(nodes)))


class RayActorPool:
    def __init__(self, config: Config, data_dir: Path, namespace: str) -> None:
        self.config = config
        self.data_dir = data_dir
        self.namespace = namespace
        self._incarnations: Counter[str] = Counter()

    def _controller(self) -> Any:
        return ray.get_runtime_context().current_actor

    def spawn(self, kind: ActorKind, name: str) -> Any:
        return self._spawn(kind, name, "SPREAD")

    def spawn_on(self, kind: ActorKind, name: str, node_id: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # Hard: Ray's soft affinity put 19 of 30 actors created at once on other nodes of a
        # three-node ray.cluster_utils cluster (hard: none), so a node waited for the reconciler's
        # next try to get its actors (and its data directory its replica host). A node that left
        # fails the creation at once (ActorUnschedulableError, 0.2 s here): bring_up counts a failed
        # start and the next pass places the actor on a live node. Actors reserve no CPU, so a
        # node is never too full to take one.
        return self._spawn(kind, name, NodeAffinitySchedulingStrategy(node_id=node_id, soft=False))

    async def nodes(self) -> list[str]:
        # ray.nodes() is a blocking call to the GCS: off the controller's event loop.
        return [n["NodeID"] for n in await asyncio.to_thread(ray.nodes) if n.get("Alive")]

    def _spawn(self, kind: ActorKind, name: str, strategy: Any) -> Any:
        from cluster.actors.group_coordinator import GroupCoordinatorActor
        from cluster.actors.partition_leader import PartitionLeaderActor
        from cluster.actors.share_coordinator import ShareCoordinatorActor

        cls = {
            ActorKind.GROUP_COORDINATOR: GroupCoordinatorActor,
            ActorKind.SHARE_COORDINATOR: ShareCoordinatorActor,
            ActorKind.PARTITION_LEADER: PartitionLeaderActor,
        }[kind]
        # Every kind gets the controller: the leadership followers pull the map from it, and each
        # kind hosts replicas whose leaders send it their ISR changes (AlterPartition).
        args: tuple[Any, ...] = (name, self.config, str(self.data_dir), self._controller())
        return cls.options(name=name, namespace=self.namespace, scheduling_strategy=strategy, **ACTOR_OPTIONS).remote(*args)

    def spawn_gateway(self, name: str, node_id: int, host: str, port: int) -> Any:
        return self._spawn_gateway(name, node_id, host, port, "DEFAULT")

    def _spawn_gateway(self, name: str, node_id: int, host: str, port: int, strategy: Any) -> Any:
        from cluster.actors.gateway import GatewayActor

        # Each incarnation under its own Ray name: after a death Ray did not order (SIGKILL, OOM)
        # it keeps the old name registered for a while, and re-using it fails the restart.
        incarnation = self._incarnations[name]
        self._incarnations[name] += 1
        ray_name = name if incarnation == 0 else f"{name}.{incarnation}"
        return GatewayActor.options(
            name=ray_name, namespace=self.namespace, scheduling_strategy=strategy, **ACTOR_OPTIONS
        ).remote(
            node_id, host, port, self.config, self._controller()
        )

    def spawn_gateway_on(self, name: str, node_id: int, host: str, port: int, node: str) -> Any:
        """A gateway pinned to `node` (hard: a node's gateway runs there or not at all)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self._spawn_gateway(name, node_id, host, port, NodeAffinitySchedulingStrategy(node_id=node, soft=False))

    def own_node(self) -> str:
        """The node this process (the controller) runs on."""
        return ray.get_runtime_context().get_node_id()

    async def start_gateway(self, handle: Any, leadership: Leadership) -> tuple[str, int]:
        return await handle.start.remote(leadership)

    async def info(self, handle: Any, timeout: float | None = None) -> dict[str, Any]:
        return await _with_timeout(handle.info.remote(), timeout)

    async def watch(self, handle: Any) -> None:
        try:
            await handle.wait_forever.remote()
        except RayActorError:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # any other failure of the call also means the actor is gone
            log.exception("watch of an actor failed")

    def kill(self, handle: Any) -> None:
        ray.kill(handle, no_restart=True)

    async def load(self, handle: Any, items: list[tuple[str, int, int]]) -> list[str]:
        return await handle.load.remote(items)

    async def unload(self, handle: Any, items: list[TP]) -> None:
        await handle.unload.remote(items)

    async def delete(self, handle: Any, items: list[TP]) -> None:
        await handle.delete.remote(items)

    async def update_leadership(self, handle: Any, leadership: Leadership, timeout: float) -> None:
        await _with_timeout(handle.update_leadership.remote(leadership), timeout)

    async def apply_replicas(self, handle: Any, push: Any) -> None:
        # Bounded: a host that hangs must not hold the reconciler's pass; the next pass pushes again.
        await _with_timeout(handle.apply_replicas.remote(push), 10)

    async def ping(self, handle: Any, timeout: float) -> bool:
        return await _with_timeout(handle.ping.remote(), timeout)

    async def shutdown(self, handle: Any, timeout: float) -> None:
        await _with_timeout(handle.shutdown.remote(), timeout)

    async def metrics(self, handle: Any, timeout: float) -> dict[str, Any]:
        return await _with_timeout(handle.metrics.remote(), timeout)

    async def pause(self, node_id: str, pid: int, seconds: float) -> tuple[float, float]:
        """Signals come from a task on the actor's own node, so this works wherever it runs."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        return await _pause_process.options(scheduling_strategy=strategy).remote(pid, seconds)


@ray.remote(num_cpus=0, max_retries=0)
def _pause_process(pid: int, seconds: float) -> tuple[float, float]:
    import os
    import signal

    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.time()
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return stopped_at, time.time()


async def _with_timeout(awaitable: Any, seconds: float | None) -> Any:
    return await asyncio.wait_for(asyncio.ensure_future(awaitable), seconds)
