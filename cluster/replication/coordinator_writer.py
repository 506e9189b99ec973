"""A coordinator's partition writer over replicated logs (Kafka's CoordinatorPartitionWriter with
its high-watermark listener): a batch of a partition whose replica leads here is appended to the
replica's log as the leader, and commits at the partition's high watermark; a partition kept in one
copy (not registered with the controller) goes to the runtime's local writer as before.

Kafka's coordinators append with acks=1 and time out below min.insync.replicas; here a batch is
refused before anything is written, as an acks=all Produce is (issue 25), and the runtime answers
COORDINATOR_NOT_AVAILABLE for it at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from cluster.log import PartitionLog
from cluster.replication.host import ReplicaHost
from cluster.replication.log_replica import LogReplica
from cluster.runtime.errors import NotCoordinator, NotEnoughReplicas, StorageError
from cluster.runtime.partition import Partition, TopicPartition
from cluster.runtime.writer import PartitionWriter


@dataclass(slots=True)
class _Served:
    """A partition served from the replica here (Partition.source): that replica, its leadership
    term at the load (a later one means it stopped leading since, and what it wrote may be cut),
    and the task telling the runtime of its high watermark."""

    replica: LogReplica
    term: int
    watcher: asyncio.Task | None = None


class ReplicaWriter:
    def __init__(self, host: ReplicaHost, local: PartitionWriter, on_committed: Callable[[TopicPartition], None]) -> None:
        self.host = host
        self.local = local
        self.on_committed = on_committed  # CoordinatorRuntime.committed: the listener

    def _replica(self, tp: TopicPartition) -> LogReplica | None:
        manager = self.host.manager
        return manager.replicas.get(tp) if manager is not None else None

    async def open(self, partition: Partition) -> PartitionLog:
        tp = partition.tp
        replica = self._replica(tp)
        if replica is None:
            return await self.local.open(partition)
        if not replica.leads:
            raise NotCoordinator(f"{tp[0]}-{tp[1]}: the replica here does not lead")
        served = partition.source = _Served(replica, replica.term)
        served.watcher = asyncio.ensure_future(self._watch(tp, replica))
        return replica.log

    async def close(self, partition: Partition) -> None:
        served = partition.source
        if served is None:
            await self.local.close(partition)
            return
        if served.watcher is not None:
            served.watcher.cancel()
        # The log stays open: it is the replica's, which goes on following or leading.

    async def append(self, partition: Partition, batches: list[bytearray]) -> int:
        tp, served = partition.tp, partition.source
        if served is None:
            return await self.local.append(partition, batches)
        manager = self.host.manager
        if manager is None or self.committed(partition) is None:
            raise NotCoordinator(f"{tp[0]}-{tp[1]}: the replica here no longer leads")
        write = await manager.write(tp, batches, None, acks_all=True)
        if write.error is ErrorCode.not_enough_replicas:
            raise NotEnoughReplicas(f"{tp[0]}-{tp[1]}: fewer in-sync replicas than min.insync.replicas")
        if write.error is ErrorCode.not_leader_or_follower or write.term != served.term:
            raise NotCoordinator(f"{tp[0]}-{tp[1]}: the replica here no longer leads")
        if write.error is not ErrorCode.none:
            raise StorageError(f"{tp[0]}-{tp[1]}: the append failed ({write.error.name})")
        return write.end

    def committed(self, partition: Partition) -> int | None:
        served = partition.source
        if served is None:
            return self.local.committed(partition)
        replica = served.replica
        if self._replica(partition.tp) is not replica or not replica.leads or replica.term != served.term:
            return None
        return replica.high_watermark

    async def compact(self, partition: Partition, now_ms: int) -> None:
        if partition.source is None:
            await self.local.compact(partition, now_ms)
            return
        manager = self.host.manager
        if manager is not None and self.committed(partition) is not None:
            await manager.compact(partition.tp, now_ms)

    async def recover(self, partition: Partition) -> None:
        if partition.source is None:
            await self.local.recover(partition)
        # A replica's failed append: its log refuses appends from now on (PartitionLog's rule)
        # and the next batches fail (COORDINATOR_NOT_AVAILABLE) until this host restarts and the
        # controller elects another in-sync replica (not noticed sooner: see docs/scale-out.md).

    async def _watch(self, tp: TopicPartition, replica: LogReplica) -> None:
        """Tell the runtime each time the partition changes here (its high watermark above all),
        while it is this replica's."""
        while True:
            manager = self.host.manager
            event = manager.changed(tp) if manager is not None else None
            if event is None or manager.replicas.get(tp) is not replica:
                self.on_committed(tp)  # gone: the waiting answers find out
                return
            await event.wait()
            self.on_committed(tp)
