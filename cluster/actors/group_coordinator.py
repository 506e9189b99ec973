"""Group coordinator actor: leads partitions of __consumer_offsets (a thin shell over its runtime)."""

from __future__ import annotations

from pathlib import Path

import ray

from coordinator.records import CODEC
from coordinator.shard import GroupCoordinatorShard

from cluster.actors.common import ActorKind, setup_logging
from cluster.actors.coordinator_host import CoordinatorActorBody, CoordinatorHost
from cluster.config import Config


@ray.remote
class GroupCoordinatorActor(CoordinatorActorBody):
    def __init__(self, name: str, config: Config, data_dir: str) -> None:
        setup_logging()
        self.host = CoordinatorHost(
            name, ActorKind.GROUP_COORDINATOR, CODEC, GroupCoordinatorShard, config, Path(data_dir)
        )
