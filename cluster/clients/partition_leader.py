"""PartitionLeaderClient: Produce and ListOffsets on the actor leading a user partition.

Calls to one actor within one loop tick travel in one Ray call (the router's batchers); a leader
that says it no longer leads at the routed epoch, or a dead actor, refreshes the map and is
retried once, after which the client answers NOT_LEADER_OR_FOLLOWER for the Kafka client to retry.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.calls import LogEnd, PartitionOp
from cluster.partition import ProduceOutcome
from cluster.routing import NoLeader

LATEST = -1
NO_EPOCH = -1


class PartitionLeaderClient:
    def __init__(self, router: Any) -> None:
        self.router = router

    async def produce(self, topic: str, partition: int, records: bytes) -> ProduceOutcome:
        try:
            return await self.router.call_leader(
                topic,
                partition,
                PartitionOp.PRODUCE.value,
                lambda epoch: (topic, partition, epoch, records),
                lambda outcome: outcome.error_code == ErrorCode.not_leader_or_follower,
            )
        except NoLeader as exc:
            return ProduceOutcome(ErrorCode.not_leader_or_follower, message=str(exc))

    async def list_offsets(
        self, topic: str, partition: int, timestamp: int = LATEST, client_epoch: int = NO_EPOCH
    ) -> LogEnd:
        try:
            error, offset, ts, epoch = await self.router.call_leader(
                topic,
                partition,
                PartitionOp.LIST_OFFSETS.value,
                lambda routed: (topic, partition, routed, client_epoch, timestamp),
                lambda r: r[0] == ErrorCode.not_leader_or_follower.value,
            )
        except NoLeader:
            return LogEnd(ErrorCode.not_leader_or_follower)
        return LogEnd(ErrorCode(error), offset, ts, epoch)
