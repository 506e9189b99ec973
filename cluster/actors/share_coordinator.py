"""Share coordinator actor: leads partitions of __share_group_state (a thin shell over its runtime)."""

from __future__ import annotations

from pathlib import Path

import ray

from sharestate.coordinator_shard import ShareCoordinatorShard
from sharestate.records import CODEC

from cluster.actors.common import ActorKind, setup_logging
from cluster.actors.coordinator_host import CoordinatorActorBody, CoordinatorHost
from cluster.config import Config


@ray.remote
class ShareCoordinatorActor(CoordinatorActorBody):
    def __init__(self, name: str, config: Config, data_dir: str) -> None:
        setup_logging()
        self.host = CoordinatorHost(
            name, ActorKind.SHARE_COORDINATOR, CODEC, ShareCoordinatorShard, config, Path(data_dir)
        )
