"""What the controller tells a replica host (cluster/control/replica_keeper.py sends it; the actor
that keeps the replicas applies it: cluster/actors/partition_leader.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from cluster.replication.registration import PartitionRegistration

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ReplicaPush:
    """The registrations of the replicas a host keeps (one per partition, its replica among the
    registration's replicas, or no longer: then it removes its copy), as replica `replica_id` in
    `incarnation`, and the actor to fetch from for each other replica id of its kind."""

    replica_id: int
    incarnation: int
    registrations: dict[TP, PartitionRegistration]
    sources: dict[int, Any]  # replica id -> the Ray handle of its host (of this host's kind)
    # each topic's id (KIP-516): a log left by a deleted topic of the same name is not this one's
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
