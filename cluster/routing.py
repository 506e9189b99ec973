"""Routing requests to the actors that lead their partitions, batched per actor.

A Ray call costs far more than the work of a heartbeat or a small produce, so every call to
an actor method made within one event-loop tick travels in one Ray call (`ActorBatcher`).
The leadership map comes from the controller (pushed on every change, pulled on a miss); a
call that finds its actor dead, or a leader that says it no longer leads at that epoch,
refreshes the map and is retried once, so a failover the controller already handled is
invisible to the client; otherwise the client gets Kafka's retriable error and retries itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ray.exceptions import RayActorError, RayError

from cluster.leadership import Leadership

log = logging.getLogger(__name__)


class NoLeader(Exception):
    """No live actor leads the partition right now (a failover is in progress)."""


ACTOR_GONE = (RayActorError, RayError, asyncio.CancelledError)


async def answer_or_none(ref: Any) -> Any:
    """What a Ray call answered, or None if there was no actor to call or it died meanwhile."""
    if ref is None:
        return None
    try:
        return await ref
    except ACTOR_GONE:
        return None


class ActorBatcher:
    def __init__(self, handle: Any, method: str) -> None:
        self._method = getattr(handle, method)
        self._items: list[Any] = []
        self._futures: list[asyncio.Future] = []
        self._scheduled = False

    def call(self, item: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._items.append(item)
        self._futures.append(future)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        items, futures = self._items, self._futures
        self._items, self._futures, self._scheduled = [], [], False
        ref = self._method.remote(items)
        asyncio.ensure_future(self._deliver(ref, futures))

    @staticmethod
    async def _deliver(ref: Any, futures: list[asyncio.Future]) -> None:
        try:
            results = await ref
        except BaseException as exc:  # the actor died or the call failed: every caller learns it
            for f in futures:
                if not f.done():
                    f.set_exception(exc if isinstance(exc, Exception) else RayActorError())
            return
        for f, r in zip(futures, results):
            if not f.done():
                f.set_result(r)


class StreamingBatcher(ActorBatcher):
    """For operations that may park (JoinGroup, SyncGroup): one Ray streaming call per tick whose
    answers come back as each operation completes, so one long wait holds back no one else."""

    def _flush(self) -> None:
        items, futures = self._items, self._futures
        self._items, self._futures, self._scheduled = [], [], False
        stream = self._method.options(num_returns="streaming").remote(items)
        asyncio.ensure_future(self._deliver_stream(stream, futures))

    @staticmethod
    async def _deliver_stream(stream: Any, futures: list[asyncio.Future]) -> None:
        try:
            async for ref in stream:
                for index, result in await ref:
                    if not futures[index].done():
                        futures[index].set_result(result)
        except BaseException as exc:
            error = exc if isinstance(exc, Exception) else RayActorError()
            for f in futures:
                if not f.done():
                    f.set_exception(error)
            return
        for f in futures:  # the stream ended: anything unanswered is a bug in the actor
            if not f.done():
                f.set_exception(RuntimeError("actor stream ended without an answer"))


class Router:
    def __init__(self, controller: Any, leadership: Leadership) -> None:
        self.controller = controller
        self.leadership = leadership
        self._batchers: dict[tuple[str, str], ActorBatcher] = {}
        self._refresh: asyncio.Future | None = None
        self.refreshes = 0

    def update(self, leadership: Leadership) -> None:
        if leadership.version < self.leadership.version:
            return
        old_handles = self.leadership.handles
        self.leadership = leadership
        # Batchers hold handles: drop those of actors that are gone or were replaced.
        for key in list(self._batchers):
            name = key[0]
            if name not in leadership.handles or leadership.handles[name] is not old_handles.get(name):
                del self._batchers[key]

    async def refresh(self) -> Leadership:
        """Pull the map from the controller; concurrent callers share one pull."""
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.ensure_future(self._pull())
        return await asyncio.shield(self._refresh)

    async def _pull(self) -> Leadership:
        self.refreshes += 1
        try:
            self.update(await self.controller.leadership.remote())
        except Exception:
            log.exception("leadership refresh failed")
        return self.leadership

    def leader(self, topic: str, partition: int) -> tuple[str, int] | None:
        return self.leadership.leaders.get((topic, partition))

    def handle(self, actor: str) -> Any:
        return self.leadership.handles.get(actor)

    def call(self, actor: str, method: str, item: Any) -> asyncio.Future:
        batcher = self._batchers.get((actor, method))
        if batcher is None:
            handle = self.handle(actor)
            if handle is None:
                future = asyncio.get_running_loop().create_future()
                future.set_exception(NoLeader(f"{actor} is not live"))
                return future
            kind = StreamingBatcher if method.endswith("_stream") else ActorBatcher
            batcher = self._batchers[(actor, method)] = kind(handle, method)
        return batcher.call(item)

    async def call_leader(
        self,
        topic: str,
        partition: int,
        method: str,
        make_item: Callable[[int], Any],
        not_leader: Callable[[Any], bool],
    ) -> Any:
        """Call the leader of topic-partition (batched), retrying once on a stale map; raises NoLeader."""
        for attempt in range(2):
            route = self.leader(topic, partition)
            if route is None:
                if attempt == 0:
                    await self.refresh()
                    continue
                raise NoLeader(f"no leader for {topic}-{partition}")
            actor, epoch = route
            try:
                result = await self.call(actor, method, make_item(epoch))
            except (NoLeader, *ACTOR_GONE):
                await self.refresh()
                continue
            if not_leader(result) and attempt == 0:
                await self.refresh()
                if self.leader(topic, partition) != route:
                    continue
            return result
        raise NoLeader(f"leader of {topic}-{partition} is unavailable")

