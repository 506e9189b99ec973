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

from kio.schema.errors import ErrorCode

from cluster.log import PartitionLog
from cluster.replication.host import ReplicaHost
from cluster.replication.log_replica import LogReplica
from cluster.runtime.errors import NotCoordinator, NotEnoughReplicas, StorageError
from cluster.runtime.partition import Partition, TopicPartition
from cluster.runtime.writer import PartitionWriter


class ReplicaWriter:
    def __init__(self, host: ReplicaHost, local: PartitionWriter, on_committed: Callable[[TopicPartition], None]) -> None:
        self.host = host
        self.local = local
        self.on_committed = on_committed  # CoordinatorRuntime.committed: the listener
        # Per partition served from a replica: that replica and its leadership term at the load;
        # a later term means it stopped leading since, and what it wrote may be cut.
        self._served: dict[TopicPartition, tuple[LogReplica, int]] = {}
        self._watchers: dict[TopicPartition, asyncio.Task] = {}

    def serves_replica(self, tp: TopicPartition) -> bool:
        return tp in self._served

    def replica_served(self, tp: TopicPartition) -> LogReplica | None:
        served = self._served.get(tp)
        return served[0] if served is not None else None

    def _replica(self, tp: TopicPartition) -> LogReplica | None:
        manager = self.host.manager
        return manager.replicas.get(tp) if manager is not None else None

    async def open(self, tp: TopicPartition) -> PartitionLog:
        replica = self._replica(tp)
        if replica is None:
            return await self.local.open(tp)
        if not replica.leads:
            raise NotCoordinator(f"{tp[0]}-{tp[1]}: the replica here does not lead")
        self._served[tp] = (replica, replica.term)
        self._watchers[tp] = asyncio.ensure_future(self._watch(tp))
        return replica.log

    async def close(self, partition: Partition) -> None:
        tp = partition.tp
        if self._served.pop(tp, None) is None:
            await self.local.close(partition)
            return
        watcher = self._watchers.pop(tp, None)
        if watcher is not None:
            watcher.cancel()
        # The log stays open: it is the replica's, which goes on following or leading.

    async def append(self, partition: Partition, batches: list[bytearray]) -> int:
        tp = partition.tp
        if tp not in self._served:
            return await self.local.append(partition, batches)
        manager = self.host.manager
        assert manager is not None
        write = await manager.write(tp, batches, None, acks_all=True)
        if write.error is ErrorCode.not_enough_replicas:
            raise NotEnoughReplicas(f"{tp[0]}-{tp[1]}: fewer in-sync replicas than min.insync.replicas")
        if write.error is ErrorCode.not_leader_or_follower:
            raise NotCoordinator(f"{tp[0]}-{tp[1]}: the replica here no longer leads")
        if write.error is not ErrorCode.none:
            raise StorageError(f"{tp[0]}-{tp[1]}: the append failed ({write.error.name})")
        return write.end

    def committed(self, partition: Partition) -> int | None:
        served = self._served.get(partition.tp)
        if served is None:
            return self.local.committed(partition)
        replica, term = served
        if self._replica(partition.tp) is not replica or not replica.leads or replica.term != term:
            return None
        return replica.high_watermark

    async def compact(self, partition: Partition, now_ms: int) -> None:
        if partition.tp not in self._served:
            await self.local.compact(partition, now_ms)
            return
        manager = self.host.manager
        if manager is not None:
            await manager.compact(partition.tp, now_ms)

    async def recover(self, partition: Partition) -> None:
        if partition.tp not in self._served:
            await self.local.recover(partition)
        # A replica's failed append: its log refuses appends from now on (PartitionLog's rule),
        # the next batches fail, and the controller's next leader takes over from its own log.

    async def _watch(self, tp: TopicPartition) -> None:
        """Tell the runtime each time the partition changes here (its high watermark above all)."""
        while True:
            manager = self.host.manager
            event = manager.changed(tp) if manager is not None else None
            if event is None:
                self.on_committed(tp)  # gone: the waiting answers find out
                return
            await event.wait()
            self.on_committed(tp)
