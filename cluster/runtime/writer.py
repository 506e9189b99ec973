"""Where a coordinator partition's batches go, and when they count as committed (Kafka's
PartitionWriter with its high-watermark listener).

The runtime answers an operation only once the batch holding its records is committed. The local
writer's appends are durable before they return (flush=batch), so what it has written is
committed: one data directory behaves as before. A replicated writer commits at the partition's
high watermark, later than the append; the runtime then waits for `CoordinatorRuntime.committed`
to be told, or for the write timeout.
"""

from __future__ import annotations

from typing import Protocol

from cluster.log import PartitionLog
from cluster.runtime.disk import LogDisk
from cluster.runtime.partition import Partition


class PartitionWriter(Protocol):
    async def open(self, partition: Partition) -> PartitionLog:
        """The partition's log, to replay and then append to (a load); what the writer keeps for
        it until its close goes in `partition.source`."""
        ...

    async def close(self, partition: Partition) -> None:
        """The partition is no longer served here (an unload, or a load that failed)."""
        ...

    async def append(self, partition: Partition, batches: list[bytearray]) -> int:
        """Append to partition.log at partition.epoch; the log's end offset after it.

        Raises NotEnoughReplicas or NotCoordinator when it refuses before writing anything, and
        what PartitionLog.append raises (a LogError) when the write failed."""
        ...

    def committed(self, partition: Partition) -> int | None:
        """The offset below which the partition's log is committed; None once this replica no
        longer leads it (its uncommitted tail may be truncated)."""
        ...

    async def compact(self, partition: Partition, now_ms: int) -> None:
        """Compact the log below its committed offset (PartitionLog.compact says why)."""
        ...

    async def recover(self, partition: Partition) -> None:
        """After a failed append: make partition.log match the reverted state again."""
        ...


class LocalWriter:
    """The partition's log in this actor's data directory and nowhere else: committed = durable."""

    def __init__(self, disk: LogDisk) -> None:
        self.disk = disk

    async def open(self, partition: Partition) -> PartitionLog:
        return await self.disk.open(partition.tp)

    async def close(self, partition: Partition) -> None:
        if partition.log is not None:
            await self.disk.run(partition.log.close)

    async def append(self, partition: Partition, batches: list[bytearray]) -> int:
        await self.disk.append(partition.log, batches, partition.epoch)
        return partition.log.end_offset

    def committed(self, partition: Partition) -> int | None:
        return partition.log.end_offset

    async def compact(self, partition: Partition, now_ms: int) -> None:
        await self.disk.compact(partition, now_ms, partition.committed)

    async def recover(self, partition: Partition) -> None:
        await self.disk.reopen(partition)
