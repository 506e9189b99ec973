"""One Ray call per actor method and event-loop tick.

A Ray call costs far more than the work of a heartbeat or a small produce, so every call to an
actor method made within one tick travels in one Ray call carrying the list of items; the
actor answers a list in the same order. Operations that may park (JoinGroup, SyncGroup) travel
as a stream instead, answered item by item as each completes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.exceptions import RayActorError


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


def batcher_for(handle: Any, method: str) -> ActorBatcher:
    """Methods whose name ends in `_stream` answer as a stream (the actors' convention)."""
    kind = StreamingBatcher if method.endswith("_stream") else ActorBatcher
    return kind(handle, method)
