"""What an actor that keeps replicas holds, whatever it serves from them: the replica manager of
its data directory, made at the controller's first push, and the pushes applied one at a time.

A partition leader serves user topics from the replicas it leads (cluster/actors/
partition_leader.py); the coordinators will serve their internal topics the same way
(docs/scale-out.md, "The plan for replicated coordinators", step 4). Each says through `on_role`
what a partition's registration means for what it serves: called after every push for every
partition the push named, once the replica is what its registration says; `on_demote` before a
replica leading here stops leading, so that nothing serves from a log a truncation may cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.config import Config
from cluster.log import LogConfig
from cluster.replication.log_replica import ReplicaFetch, ReplicaFetched, ReplicationConfig
from cluster.replication.manager import ControllerLink, FetcherConfig, LeaderLink, ReplicaManager
from cluster.replication.push import ReplicaPush

TP = tuple[str, int]
RoleChanged = Callable[[TP], Awaitable[None]]


def replication_config(config: Config) -> ReplicationConfig:
    return ReplicationConfig(
        min_insync_replicas=config["min.insync.replicas"],
        lag_time_max_ms=config["replica.lag.time.max.ms"],
        fetch_max_bytes=config["replica.fetch.max.bytes"],
    )


def fetcher_config(config: Config) -> FetcherConfig:
    return FetcherConfig(max_wait_ms=config["replica.fetch.wait.max.ms"], backoff_ms=config["replica.fetch.backoff.ms"])


class ReplicaHost:
    def __init__(self, name: str, config: Config, data_dir: Path, log_config: LogConfig, clock: Any,
                 on_role: RoleChanged, on_demote: RoleChanged | None = None) -> None:
        self.name = name
        self.config = config
        self.data_dir = Path(data_dir)
        self.log_config = log_config
        self.clock = clock
        self.on_role = on_role
        self.on_demote = on_demote  # ReplicaManager.on_demote
        self.manager: ReplicaManager | None = None  # from the controller's first push
        self._pushes = asyncio.Lock()

    async def apply(self, push: ReplicaPush, leader_link: Callable[[int], LeaderLink],
                    controller: ControllerLink) -> None:
        """The controller's registrations of the replicas kept here (cluster/control/
        replica_keeper.py): each replica leads or follows as its registration says, then `on_role`
        for each. One push at a time, both steps together: two overlapping pushes (the keeper's
        pass and an AlterPartition's, or a push sent again after a timeout) would otherwise both
        find a partition unserved and both start serving it."""
        async with self._pushes:
            if self.manager is None:
                self.manager = ReplicaManager(
                    push.replica_id, push.incarnation, self.data_dir, self.log_config, replication_config(self.config),
                    self.clock, leader_link, controller, fetcher_config(self.config), self.on_demote,
                )
            elif (self.manager.replica_id, self.manager.incarnation) != (push.replica_id, push.incarnation):
                raise ValueError(f"{self.name} keeps replica {self.manager.replica_id} (incarnation "
                                 f"{self.manager.incarnation}), not {push.replica_id} ({push.incarnation})")
            await self.manager.apply(push.registrations, push.topic_ids)
            for tp in push.registrations:
                await self.on_role(tp)

    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]:
        """A follower host's fetch (Kafka's FetchRequest from a replica)."""
        if self.manager is None:
            return [ReplicaFetched(ErrorCode.not_leader_or_follower) for _ in items]
        return await self.manager.replica_fetch(items, max_wait_ms)

    async def delete(self, items: list[TP]) -> None:
        if self.manager is not None:
            await self.manager.delete(items)

    async def close(self) -> None:
        if self.manager is not None:
            await self.manager.close()
