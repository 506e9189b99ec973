"""ControllerClient: the typed calls to the controller actor, and the only code that makes them.

Actors (gateways, routers) await the async methods; the driver that started the cluster (launcher,
`raygroups up`) uses the blocking ones, since it has no event loop of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from cluster.actors.common import ACTOR_OPTIONS
from cluster.config import Config
from cluster.leadership import Leadership
from cluster.metadata import ProducerIdBlock, TopicOutcome, TopicSpec

CONTROLLER_NAME = "controller"


class ControllerClient:
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    @classmethod
    def spawn(
        cls, actor_class: Any, config: Config, data_dir: Path, host: str, port: int, namespace: str
    ) -> "ControllerClient":
        """Start the controller actor. The caller names its class: the client sits below the actors
        (gateways use it), so it must not import them."""
        # On this (the driver's) node: every worker actor is owned by the controller and dies with it
        # (Ray's owner fate-sharing), and the driver owns the controller, so a controller that Ray put
        # on another node made that node's loss the whole cluster's.
        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        handle = actor_class.options(
            name=CONTROLLER_NAME, namespace=namespace, scheduling_strategy=here, **ACTOR_OPTIONS
        ).remote(config, str(data_dir), host, port, namespace)
        return cls(handle)

    # -- from the driver (blocking) -----------------------------------------------------------------

    def start_blocking(self) -> list[str]:
        """Start the actors and gateways; the gateways' addresses once they listen."""
        return ray.get(self.handle.start.remote())

    def shutdown_blocking(self, timeout: float) -> None:
        ray.get(self.handle.shutdown.remote(), timeout=timeout)

    def events_since_blocking(self, index: int, timeout: float) -> tuple[int, list[dict[str, Any]]]:
        return ray.get(self.handle.events_since.remote(index), timeout=timeout)

    def metrics_blocking(self, timeout: float) -> list[dict[str, Any]]:
        """Every live actor's metrics snapshot; each actor gets `timeout`, the whole call a little more."""
        return ray.get(self.handle.metrics.remote(timeout), timeout=timeout + 2)

    def kill(self) -> None:
        ray.kill(self.handle, no_restart=True)

    # -- from actors ------------------------------------------------------------------------------

    async def leadership(self) -> Leadership:
        return await self.handle.leadership.remote()

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False) -> list[TopicOutcome]:
        return await self.handle.create_topics.remote(specs, validate_only)

    async def delete_topics(self, names: list[str]) -> list[TopicOutcome]:
        return await self.handle.delete_topics.remote(names)

    async def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicOutcome:
        return await self.handle.create_partitions.remote(name, total, validate_only)

    async def allocate_producer_ids(self, gateway: str) -> ProducerIdBlock:
        return await self.handle.allocate_producer_ids.remote(gateway)

    async def status(self) -> dict[str, Any]:
        return await self.handle.status.remote()

    async def actors_info(self) -> list[dict[str, Any]]:
        return await self.handle.actors_info.remote()

    async def check_kill(self, name: str) -> str:
        return await self.handle.check_kill.remote(name)

    async def kill_actor(self, name: str) -> str:
        return await self.handle.kill.remote(name)

    def kill_actor_soon(self, name: str) -> None:
        """Send the kill without waiting for it: the actor killed may be the caller's own gateway,
        which must first write its answer (see the admin handler's after_reply)."""
        self.handle.kill.remote(name)

    async def move(self, topic: str, partition: int, actor: str) -> int:
        return await self.handle.move.remote(topic, partition, actor)

    async def pause(self, name: str, seconds: float) -> dict[str, Any]:
        return await self.handle.pause.remote(name, seconds)

    async def events_since(self, index: int) -> tuple[int, list[dict[str, Any]]]:
        return await self.handle.events_since.remote(index)

    async def leadership_changes(self, index: int) -> dict[str, Any]:
        return await self.handle.leadership_changes.remote(index)

    async def alter_group_configs(self, changes: list[tuple[str, list[Any]]], validate_only: bool) -> list[tuple[int, str | None]]:
        """IncrementalAlterConfigs on GROUP resources: (error code, message) per group, in order."""
        return await self.handle.alter_group_configs.remote(changes, validate_only)
