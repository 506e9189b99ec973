"""A share coordinator in the test's own process: the real ShareCoordinatorShard behind the
Persister interface, its records replayed as the runtime would, with a switch to refuse writes."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kernel.clock import ManualClock
from sharestate import messages as m
from sharestate.coordinator_shard import ShareCoordinatorShard, SharePartitionKey


class LocalPersister:
    def __init__(self, clock: ManualClock | None = None) -> None:
        clock = clock or ManualClock()
        self.shard = ShareCoordinatorShard(("__share_group_state", 0), clock)
        self.refuse_writes: ErrorCode | None = None
        self.writes: list[m.WriteShareGroupStateRequest] = []

    def _run(self, method: str, request: Any) -> Any:
        result = getattr(self.shard, method)(request)
        for record in result.records:
            self.shard.replay(record)
        return result.response

    async def initialize(self, request: m.InitializeShareGroupStateRequest) -> m.InitializeShareGroupStateResponse:
        return self._run("initialize_state", request)

    async def read(self, request: m.ReadShareGroupStateRequest) -> m.ReadShareGroupStateResponse:
        return self._run("read_state", request)

    async def write(self, request: m.WriteShareGroupStateRequest) -> m.WriteShareGroupStateResponse:
        if self.refuse_writes is not None:
            return m.WriteShareGroupStateResponse(self.refuse_writes, "refused by the test")
        self.writes.append(request)
        return self._run("write_state", request)

    async def delete(self, request: m.DeleteShareGroupStateRequest) -> m.DeleteShareGroupStateResponse:
        return self._run("delete_state", request)

    async def summary(self, request: m.ReadShareGroupStateSummaryRequest) -> m.ReadShareGroupStateSummaryResponse:
        return self._run("read_state_summary", request)

    def state(self, group_id: str, topic_id: Any, partition: int):
        return self.shard.state_of(SharePartitionKey(group_id, topic_id, partition))
