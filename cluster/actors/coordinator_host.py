"""The shared body of the group and share coordinator actors: a runtime over their partitions."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from coordinator.codec import RecordCodec

from cluster.actors.common import ActorKind, identity, wait_forever
from cluster.config import Config
from cluster.log import FlushPolicy, LogConfig
from cluster.runtime import CoordinatorRuntime, RuntimeConfig, ShardFactory


def coordinator_log_config(config: Config) -> LogConfig:
    return LogConfig(
        segment_bytes=config["raygroups.coordinator.log.segment.bytes"],
        flush=FlushPolicy(config["raygroups.log.flush"]),
        compacted=True,
        tombstone_retention_ms=config["raygroups.log.tombstone.retention.ms"],
    )


class CoordinatorHost:
    def __init__(
        self,
        name: str,
        kind: ActorKind,
        codec: RecordCodec,
        shard_factory: ShardFactory,
        config: Config,
        data_dir: Path,
    ) -> None:
        self.name = name
        self.kind = kind
        self.config = config
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"{name}-io")
        self.runtime = CoordinatorRuntime(
            codec=codec,
            shard_factory=shard_factory,
            config=RuntimeConfig(
                data_dir=Path(data_dir),
                log_config=coordinator_log_config(config),
                compaction_records=config["raygroups.coordinator.compaction.records"],
            ),
            executor=self.executor,
        )

    async def load(self, items: list[tuple[str, int, int]]) -> list[str]:
        """Load partitions; returns what log recovery cut, one line per partition that needed it."""
        reports = await asyncio.gather(*(self.runtime.load((topic, p), epoch) for topic, p, epoch in items))
        return [f"{t}-{p}: {r}" for (t, p, _), r in zip(items, reports) if r]

    async def unload(self, items: list[tuple[str, int]]) -> None:
        await asyncio.gather(*(self.runtime.unload(tp) for tp in items))

    def led(self) -> list[dict[str, Any]]:
        return [
            {"topic": tp[0], "partition": tp[1], "epoch": epoch, "status": status}
            for tp, (epoch, status) in sorted(self.runtime.led().items())
        ]

    async def shutdown(self) -> None:
        await self.runtime.close()
        self.executor.shutdown(wait=True)


class CoordinatorActorBody:
    """What the group and share coordinator actors have in common (their Ray shells subclass it)."""

    host: CoordinatorHost

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
