"""The kinds of actor a raygroups cluster runs, which kind leads a topic's partitions, and how Ray
runs every one of them. Part of the contract: clients route by kind, the control plane spawns by it."""

from __future__ import annotations

import enum
from typing import Any

from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE

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
    if topic == CONSUMER_OFFSETS:
        return ActorKind.GROUP_COORDINATOR
    if topic == SHARE_GROUP_STATE:
        return ActorKind.SHARE_COORDINATOR
    return ActorKind.PARTITION_LEADER
