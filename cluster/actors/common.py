"""What every raygroups actor shares: its kind, Ray options, identity and lifecycle calls."""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from typing import Any

ACTOR_OPTIONS: dict[str, Any] = {
    # Actors mostly wait on I/O and on each other; a CPU reservation would only stop a small
    # machine from hosting the cluster. Fault tolerance is the controller's, not Ray restarts.
    "num_cpus": 0,
    "max_restarts": 0,
    "max_concurrency": 100_000,
}


class ActorKind(str, enum.Enum):
    CONTROLLER = "controller"
    GROUP_COORDINATOR = "group-coordinator"
    SHARE_COORDINATOR = "share-coordinator"
    PARTITION_LEADER = "partition-leader"
    GATEWAY = "gateway"


def kind_for_topic(topic: str) -> ActorKind:
    from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE

    if topic == CONSUMER_OFFSETS:
        return ActorKind.GROUP_COORDINATOR
    if topic == SHARE_GROUP_STATE:
        return ActorKind.SHARE_COORDINATOR
    return ActorKind.PARTITION_LEADER


def identity(name: str, kind: ActorKind) -> dict[str, Any]:
    import ray

    ctx = ray.get_runtime_context()
    return {"name": name, "kind": kind.value, "node_id": ctx.get_node_id(), "pid": os.getpid()}


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


async def wait_forever() -> None:
    """Never returns: the controller awaits it to learn, through Ray, that the actor died."""
    await asyncio.Event().wait()
