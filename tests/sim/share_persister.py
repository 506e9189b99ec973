"""The Persister as a partition leader's share partitions use it, over the simulated runtime.

cluster/clients/persister.py reaches the share coordinator actor through Ray and retries retriable
errors with a wall-clock back-off; that would make a seed depend on time. Here a call runs on
the runtime directly, with cluster/actors/coordinator_host.py's mapping of runtime failures to
error codes, and answers a retriable error at once (the real Persister after its timeout).
Every answer is kept, so the invariants can tell what a leader was told.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.runtime import CoordinatorRuntime, LoadInProgress, NotCoordinator, StorageError
from sharestate import messages as m


@dataclass
class SimPersister:
    runtime: CoordinatorRuntime
    tp: tuple[str, int]
    epoch: Callable[[], int]  # the coordinator partition's epoch the router would route with
    reads: list[tuple[m.ReadShareGroupStateRequest, Any]] = field(default_factory=list)
    writes: list[tuple[m.WriteShareGroupStateRequest, Any]] = field(default_factory=list)

    async def _call(self, method: str, request: Any, response: type) -> Any:
        tp = self.tp
        runtime = self.runtime
        try:
            return await runtime.write(tp, self.epoch(), lambda token: getattr(runtime.shard(tp), method)(request, token))
        except NotCoordinator as exc:
            return response(ErrorCode.not_coordinator, str(exc))
        except LoadInProgress as exc:
            return response(ErrorCode.coordinator_load_in_progress, str(exc))
        except StorageError as exc:
            return response(ErrorCode.coordinator_not_available, str(exc))

    async def initialize(self, request: m.InitializeShareGroupStateRequest) -> m.InitializeShareGroupStateResponse:
        return await self._call("initialize_state", request, m.InitializeShareGroupStateResponse)

    async def read(self, request: m.ReadShareGroupStateRequest) -> m.ReadShareGroupStateResponse:
        answer = await self._call("read_state", request, m.ReadShareGroupStateResponse)
        self.reads.append((request, answer))
        return answer

    async def write(self, request: m.WriteShareGroupStateRequest) -> m.WriteShareGroupStateResponse:
        answer = await self._call("write_state", request, m.WriteShareGroupStateResponse)
        self.writes.append((request, answer))
        return answer
