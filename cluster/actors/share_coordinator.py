"""Share coordinator actor: leads partitions of __share_group_state (a thin shell over its runtime).

Partition leaders and group coordinators call `execute` (Endpoint.SHARE_STATE) through their
Persister (cluster/clients/persister.py), batched per actor per loop tick; each item names the
share-state operation (ShareStateOp), the `__share_group_state` partition, the leader epoch the
caller routed with, and the request for one (group, topic id, partition).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import ray

from sharestate.config import ShareCoordinatorConfig
from sharestate.coordinator_shard import ShareCoordinatorShard
from sharestate.records import CODEC

from cluster.actors.common import node_storage, setup_process
from cluster.actors.coordinator_host import CoordinatorActorBody, CoordinatorHost, Seams
from cluster.calls import CoordinatorItem
from cluster.calls.kinds import ActorKind
from cluster.clients.controller import ControllerClient
from cluster.clients.replica_links import ReplicaLinks
from cluster.config import Config
from cluster.metadata import SHARE_GROUP_STATE

def share_coordinator_config(config: Config) -> ShareCoordinatorConfig:
    return ShareCoordinatorConfig(
        snapshot_update_records_per_snapshot=config["share.coordinator.snapshot.update.records.per.snapshot"],
    )


class ShareCoordinator(CoordinatorActorBody):
    """The actor's body, a plain object (the simulation runs it without Ray)."""

    def __init__(self, name: str, config: Config, data_dir: str, controller: Any = None, seams: Seams = Seams()) -> None:
        factory = functools.partial(ShareCoordinatorShard, config=share_coordinator_config(config))
        self.host = CoordinatorHost(name, ActorKind.SHARE_COORDINATOR, CODEC, factory, config, Path(data_dir), seams)

    async def execute(self, items: list[CoordinatorItem]) -> list[Any]:
        return await self.host.execute_all(SHARE_GROUP_STATE, items)


@ray.remote
class ShareCoordinatorActor(ShareCoordinator):
    def __init__(self, name: str, config: Config, data_dir: str, controller: Any = None) -> None:
        setup_process()
        root, directory = node_storage(data_dir)
        super().__init__(name, config, str(root), controller)
        self.host.directory_id = directory
        self.replicate_through(ReplicaLinks(), ControllerClient(controller))
