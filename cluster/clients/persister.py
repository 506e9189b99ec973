"""The share-state persister: share-state operations sent to the share coordinator actors.

Kafka's partition leaders and group coordinators reach the share coordinator through a
`Persister` (DefaultStatePersister) that finds the coordinator of each share-state key and
retries while it moves. Ours does the same over Ray: the state of (group, topic id, partition)
lives on partition `share_state_partition(...)` of `__share_group_state`, and the call goes to the
actor leading that partition, batched with every other call to that actor in the same loop tick.
While the partition moves (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, the actor dead) the
call is retried with a backoff, until `timeout_ms`; then the caller gets the error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.hashing import share_state_partition
from sharestate import messages as m

from cluster.calls import CoordinatorItem, Endpoint, Failed, ShareStateOp
from cluster.metadata import SHARE_GROUP_STATE
from cluster.clients.routing import NoLeader, Router

# The coordinator is moving or loading: worth asking again (Kafka's persister retries these).
RETRIABLE = frozenset(
    {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}
)


class Persister:
    def __init__(self, router: Router, num_partitions: int, timeout_ms: int = 30_000, backoff_ms: int = 50) -> None:
        self.router = router
        self.num_partitions = num_partitions
        self.timeout_ms = timeout_ms
        self.backoff_ms = backoff_ms

    def partition_for(self, group_id: str, topic_id: Any, partition: int) -> int:
        return share_state_partition(group_id, topic_id, partition, self.num_partitions)

    async def initialize(self, request: m.InitializeShareGroupStateRequest) -> m.InitializeShareGroupStateResponse:
        return await self.call(ShareStateOp.INITIALIZE, request)

    async def read(self, request: m.ReadShareGroupStateRequest) -> m.ReadShareGroupStateResponse:
        return await self.call(ShareStateOp.READ, request)

    async def write(self, request: m.WriteShareGroupStateRequest) -> m.WriteShareGroupStateResponse:
        return await self.call(ShareStateOp.WRITE, request)

    async def delete(self, request: m.DeleteShareGroupStateRequest) -> m.DeleteShareGroupStateResponse:
        return await self.call(ShareStateOp.DELETE, request)

    async def summary(self, request: m.ReadShareGroupStateSummaryRequest) -> m.ReadShareGroupStateSummaryResponse:
        return await self.call(ShareStateOp.SUMMARY, request)

    async def call(self, op: ShareStateOp, request: Any) -> Any:
        """One share-state operation; retriable failures are retried until the timeout."""
        p = self.partition_for(request.group_id, request.topic_id, request.partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        backoff = self.backoff_ms / 1000
        while True:
            try:
                result = await self.router.call_leader(
                    SHARE_GROUP_STATE,
                    p,
                    Endpoint.SHARE_STATE,
                    lambda epoch: CoordinatorItem(op, p, epoch, request),
                    lambda r: isinstance(r, Failed) and r.error_code == ErrorCode.not_coordinator,
                )
            except NoLeader as exc:
                result = Failed(ErrorCode.coordinator_not_available, str(exc))
            if not isinstance(result, Failed):
                return result
            if result.error_code not in RETRIABLE or loop.time() + backoff > deadline:
                return op.response_type(result.error_code, result.message or None)
            await asyncio.sleep(backoff)
            await self.router.refresh()
            backoff = min(backoff * 2, 1.0)
