"""Fakes for gateway unit tests: a gateway context, clients that answer from a table, a router."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Callable

from kio.schema.errors import ErrorCode

from cluster.calls import CoordinatorOp, Failed, Listing, LogEnd
from cluster.gateway.apis import build, request_class
from cluster.gateway.connection import Request
from cluster.leadership import empty_leadership


def request(api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1) -> Request:
    entity = build(request_class(api_key, version), body)
    return Request(api_key, version, correlation_id, "client", entity, 0, client_host="10.0.0.1")


class FakeCoordinators:
    """CoordinatorClient answering from `answers`: op -> outcome, or a function of (group id, request)."""

    def __init__(self, answers: dict[CoordinatorOp, Any] | None = None, listing: Listing | None = None) -> None:
        self.answers = answers or {}
        self.listing = listing or Listing(ErrorCode.none)
        self.calls: list[tuple[CoordinatorOp, Any]] = []

    def _answer(self, op: CoordinatorOp, group_id: str, req: Any) -> Any:
        self.calls.append((op, group_id))
        answer = self.answers[op]
        return answer(group_id, req) if callable(answer) else answer

    async def group(self, op: CoordinatorOp, group_id: str, req: Any) -> Any:
        return self._answer(op, group_id, req)

    async def per_group(self, op: CoordinatorOp, group_ids: Any) -> dict[str, Any]:
        return {g: self._answer(op, g, None) for g in group_ids}

    async def delete_groups(self, group_ids: Any) -> dict[str, Any]:
        return await self.per_group(CoordinatorOp.DELETE, group_ids)

    async def list_groups(self, states: Any = (), types: Any = ()) -> Listing:
        self.calls.append(("list", (states, types)))
        return self.listing


class FakePartitions:
    def __init__(self, log_end: int = -1) -> None:
        self.log_end = log_end

    async def list_offsets(self, topic: str, partition: int, timestamp: int = -1, client_epoch: int = -1) -> LogEnd:
        return LogEnd(ErrorCode.none, self.log_end)


def gateway(coordinators: Any = None, partitions: Any = None, leadership: Any = None, **config: Any) -> Any:
    async def refresh() -> Any:
        return None

    return SimpleNamespace(
        coordinators=coordinators or FakeCoordinators(),
        partitions=partitions or FakePartitions(),
        leadership=leadership or empty_leadership(),
        router=SimpleNamespace(refresh=refresh),
        config={"offsets.topic.num.partitions": 50, **config},
    )


def run(handler: Callable, gw: Any, req: Request) -> Any:
    return asyncio.run(handler(gw, req))


LOADING = Failed(ErrorCode.coordinator_load_in_progress, "partition __consumer_offsets-3 is loading")
