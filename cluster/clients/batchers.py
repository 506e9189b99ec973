"""One Ray call per actor method and event-loop tick.

A Ray call costs far more than the work of a heartbeat or a small produce, so every call to an
actor method made within one tick travels in one Ray call carrying the list of items; the
actor answers a list in the same order. Operations that may park (JoinGroup, SyncGroup) start
this way too; their answers come back over the coordinator's answer channel
(cluster/clients/parked_answers.py).
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


def batcher_for(handle: Any, method: str) -> ActorBatcher:
    return ActorBatcher(handle, method)
