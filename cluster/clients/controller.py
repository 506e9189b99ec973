"""ControllerClient: the typed calls to the controller actor, and the only code that makes them.

Actors (gateways, routers) await the async methods; the driver that started the cluster (launcher,
`raygroups up`) uses the blocking ones, since it has no event loop of its own.

The calls that serve a Kafka request (topics, group configs) fail as ControllerFailed, carrying the
Kafka error the gateway answers and nothing else: what Ray hands back for a failed call is the
controller's traceback, under its process title, pid, node address and actor id, and the text of
the exception, which for a full disk names the data directory. That goes to the log, never to a
client (Kafka's ApiError.fromThrowable sends no message for UNKNOWN_SERVER_ERROR "to ensure we
don't leak sensitive information").
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import ray
from kio.schema.errors import ErrorCode
from ray.exceptions import RayActorError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from cluster.calls.kinds import ACTOR_OPTIONS
from cluster.config import Config
from cluster.leadership import Leadership
from cluster.metadata import ProducerIdBlock, TopicOutcome, TopicSpec
from cluster.runtime import StorageError

log = logging.getLogger(__name__)

CONTROLLER_NAME = "controller"


class ControllerFailed(Exception):
    """A controller call that got no answer, as the Kafka error to answer for it, with no message."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


def failure_code(exc: Exception) -> ErrorCode | None:
    """The Kafka error for a controller call that raised `exc`; None for an error of the caller's."""
    if isinstance(exc, StorageError):
        # Its metadata write failed (a full disk): Kafka's controller answers a failure it did not
        # expect with UNKNOWN_SERVER_ERROR (QuorumController's EventHandlerExceptionInfo), and its
        # metadata is as before, so the client may retry. Checked first: Ray's RayTaskError for it
        # is a StorageError too.
        return ErrorCode.unknown_server_error
    if isinstance(exc, RayActorError):
        # The controller is dead or unreachable: what a broker answers when the controller does
        # not answer a forwarded request (ForwardingManager's onTimeout), which clients retry.
        return ErrorCode.request_timed_out
    if isinstance(exc, RayError):
        return ErrorCode.unknown_server_error  # raised in the controller: a bug
    return None


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

    def actors_info_blocking(self, timeout: float) -> list[dict[str, Any]]:
        return ray.get(self.handle.actors_info.remote(), timeout=timeout)

    def metrics_blocking(self, timeout: float) -> list[dict[str, Any]]:
        """Every live actor's metrics snapshot; each actor gets `timeout`, the whole call a little more."""
        return ray.get(self.handle.metrics.remote(timeout), timeout=timeout + 2)

    def kill(self) -> None:
        ray.kill(self.handle, no_restart=True)

    # -- from actors ------------------------------------------------------------------------------

    async def leadership(self) -> Leadership:
        return await self.handle.leadership.remote()

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False) -> list[TopicOutcome]:
        return await _answer("CreateTopics", self.handle.create_topics.remote(specs, validate_only))

    async def delete_topics(self, names: list[str]) -> list[TopicOutcome]:
        return await _answer("DeleteTopics", self.handle.delete_topics.remote(names))

    async def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicOutcome:
        return await _answer("CreatePartitions", self.handle.create_partitions.remote(name, total, validate_only))

    async def alter_partition_reassignments(
        self, items: list[tuple[str, int, list[int] | None]], allow_replication_factor_change: bool = True
    ) -> list[tuple[int, str | None]]:
        return await _answer("AlterPartitionReassignments",
                             self.handle.alter_partition_reassignments.remote(items, allow_replication_factor_change))

    async def list_partition_reassignments(
        self, wanted: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        return await _answer("ListPartitionReassignments", self.handle.list_partition_reassignments.remote(wanted))

    async def alter_partition(self, tp: tuple[str, int], request: Any) -> tuple[Any, Any]:
        """A replicated partition's leader changes its ISR (the ControllerLink of
        cluster/replication/manager.py): (error, the registration that holds now)."""
        return await self.handle.alter_partition.remote(tp, request)

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
        return await _answer("IncrementalAlterConfigs", self.handle.alter_group_configs.remote(changes, validate_only))


async def _answer(request: str, call: Any) -> Any:
    """What the controller answered, or ControllerFailed; the reason goes to the log."""
    try:
        return await call
    except Exception as exc:
        code = failure_code(exc)
        if code is None:
            raise
        log.warning("the controller could not serve a %s request (answered %s): %s", request, code.name, exc)
        raise ControllerFailed(code) from exc
