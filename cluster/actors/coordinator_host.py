"""The shared body of the group and share coordinator actors: a runtime over their partitions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kernel.codec import RecordCodec

from cluster.actors.common import ActorKind, identity, wait_forever
from cluster.config import Config
from cluster.log import FlushPolicy, LogConfig
from cluster.runtime import CoordinatorRuntime, LoadInProgress, NotCoordinator, RuntimeConfig, ShardFactory, StorageError


@dataclass(frozen=True, slots=True)
class CoordinatorError:
    """An operation the coordinator could not run; the gateway answers the API's error response."""

    error_code: ErrorCode
    message: str = ""


# An item of a batched call: (operation name, partition, leader epoch the gateway routed with, request).
Item = tuple[str, int, int, Any]


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

    async def execute(self, topic: str, operations: dict[str, str], item: Item) -> Any:
        """Run one operation on its partition's shard, in order; runtime failures become error codes.

        A storage failure answers COORDINATOR_NOT_AVAILABLE (SPEC §4): the client finds the
        coordinator again and retries, while the partition reverts to its last durable state.
        """
        op, partition, epoch, request = item
        tp = (topic, partition)
        method = operations[op]
        try:
            return await self.runtime.write(tp, epoch, lambda token: getattr(self.runtime.shard(tp), method)(request, token))
        except NotCoordinator as exc:
            return CoordinatorError(ErrorCode.not_coordinator, str(exc))
        except LoadInProgress as exc:
            return CoordinatorError(ErrorCode.coordinator_load_in_progress, str(exc))
        except StorageError as exc:
            return CoordinatorError(ErrorCode.coordinator_not_available, str(exc))

    async def execute_all(self, topic: str, operations: dict[str, str], items: list[Item]) -> list[Any]:
        return list(await asyncio.gather(*(self.execute(topic, operations, item) for item in items)))

    async def execute_as_answered(
        self, topic: str, operations: dict[str, str], items: list[Item]
    ) -> AsyncIterator[list[tuple[int, Any]]]:
        """Yield (index, outcome) pairs as operations finish: one parked JoinGroup must not hold
        back the others of its batch."""
        tasks = {asyncio.ensure_future(self.execute(topic, operations, item)): i for i, item in enumerate(items)}
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            yield [(tasks[t], t.result()) for t in done]

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
