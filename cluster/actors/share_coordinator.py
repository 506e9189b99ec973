"""Share coordinator actor: leads partitions of __share_group_state (a thin shell over its runtime)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray

from sharestate.coordinator_shard import ShareCoordinatorShard
from sharestate.records import CODEC

from cluster.actors.common import ActorKind, identity, setup_logging, wait_forever
from cluster.actors.coordinator_host import CoordinatorHost
from cluster.config import Config


@ray.remote
class ShareCoordinatorActor:
    def __init__(self, name: str, config: Config, data_dir: str) -> None:
        setup_logging()
        self.host = CoordinatorHost(
            name, ActorKind.SHARE_COORDINATOR, CODEC, ShareCoordinatorShard, config, Path(data_dir)
        )

    async def ping(self) -> bool:
        return True

    async def wait_forever(self) -> None:
        await wait_forever()

    async def info(self) -> dict[str, Any]:
        return {**identity(self.host.name, self.host.kind), "partitions": self.host.led()}

    async def load(self, items: list[tuple[str, int, int]]) -> list[str]:
        return await self.host.load(items)

    async def unload(self, items: list[tuple[str, int]]) -> None:
        await self.host.unload(items)

    async def shutdown(self) -> None:
        await self.host.shutdown()
