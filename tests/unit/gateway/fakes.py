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
    """CoordinatorClient answering from `answers`: op -> outcome, or a function of (group id, request);
    the fake gateway's GroupCoordinatorService too (the flows' own tests: test_coordinator_client.py's
    DeleteGroups tests, test_share_offsets_admin_client.py)."""

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


def gateway(coordinators: Any = None, partitions: Any = None, leadership: Any = None, groups: Any = None,
            **config: Any) -> Any:
    async def refresh() -> Any:
        return None

    coordinators = coordinators or FakeCoordinators()
    return SimpleNamespace(
        coordinators=coordinators,
        groups=groups or coordinators,
        partitions=partitions or FakePartitions(),
        leadership=leadership or empty_leadership(),
        router=SimpleNamespace(refresh=refresh),
        config={"offsets.topic.num.partitions": 50, **config},
    )


def run(handler: Callable, gw: Any, req: Request) -> Any:
    return asyncio.run(handler(gw, req))


LOADING = Failed(ErrorCode.coordinator_load_in_progress, "partition __consumer_offsets-3 is loading")


# -- an actor behind Ray's transport -------------------------------------------------------------------

CONTROLLER_ACTOR_ID = "a1b2c3d4e5f6a7b8c9d0e1f201000000"


def ray_task_error(exc: Exception, method: str, class_name: str = "ControllerActor") -> Exception:
    """`exc` raised in an actor's method as the caller receives it from Ray: a RayTaskError that is
    also an instance of the cause's class, whose text is the actor's traceback under its process
    title (in ANSI colour), pid, node address and actor id."""
    import traceback

    from ray.exceptions import RayTaskError

    function = f"{class_name}.{method}"
    text = "".join(traceback.format_exception(exc))
    return RayTaskError(function, text, exc, proctitle=f"ray::{function}()", pid=4242, ip="10.1.2.3",
                        actor_repr=class_name, actor_id=CONTROLLER_ACTOR_ID).as_instanceof_cause()


class OverRay:
    """An actor object's async methods as a Ray handle offers them: `handle.method.remote(*args)`
    is awaited for the answer, and an exception raised in the method arrives as `ray_task_error`."""

    def __init__(self, actor: Any, class_name: str) -> None:
        self.actor = actor
        self.class_name = class_name

    def __getattr__(self, method: str) -> Any:
        target = getattr(self.actor, method)

        async def call(*args: Any) -> Any:
            try:
                return await target(*args)
            except Exception as exc:
                raise ray_task_error(exc, method, self.class_name) from None

        return SimpleNamespace(remote=call)
