"""One call per actor method and event-loop tick.

A call to an actor (through Ray, or its channel: cluster/clients/links.py) costs more than the
work of a heartbeat or a small produce, so every call to an actor method made within one tick
travels in one call carrying the list of items; the actor answers a list in the same order. Operations that may park (JoinGroup, SyncGroup) start
this way too; their answers come back over the coordinator's answer channel
(cluster/clients/parked_answers.py). Endpoints that are packed (the group coordinators') travel as
one pickle each way (cluster/calls/packing.py), at most two calls per coordinator under way: what comes meanwhile waits for the
next call, so under load a batch holds more than one tick's requests.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.exceptions import RayActorError

from cluster.calls import Endpoint, pack, unpack
from cluster.clients.links import ActorLink


class ActorBatcher:
    # Calls under way at once (None: no limit). What comes while that many are under way waits for
    # one to end and goes in the next, so under load a batch is what arrived during a call.
    max_in_flight: int | None = None

    def __init__(self, link: ActorLink, endpoint: Endpoint) -> None:
        self._link = link
        self._endpoint = endpoint
        self._items: list[Any] = []
        self._futures: list[asyncio.Future] = []
        self._scheduled = False
        self._in_flight = 0

    def call(self, item: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._items.append(item)
        self._futures.append(future)
        self._schedule(loop)
        return future

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._scheduled and (self.max_in_flight is None or self._in_flight < self.max_in_flight):
            self._scheduled = True
            loop.call_soon(self._flush)

    def _flush(self) -> None:
        items, futures = self._items, self._futures
        self._items, self._futures, self._scheduled = [], [], False
        ref = self._link.call(self._endpoint, self._outbound(items))
        self._in_flight += 1
        asyncio.ensure_future(self._deliver(ref, futures))

    @staticmethod
    def _outbound(items: list[Any]) -> Any:
        return items

    @staticmethod
    def _inbound(results: Any) -> list[Any]:
        return results

    async def _deliver(self, ref: Any, futures: list[asyncio.Future]) -> None:
        try:
            results = self._inbound(await ref)
        except BaseException as exc:  # the actor died or the call failed: every caller learns it
            for f in futures:
                if not f.done():
                    f.set_exception(exc if isinstance(exc, Exception) else RayActorError())
            return
        finally:
            self._in_flight -= 1
            if self._items:
                self._schedule(asyncio.get_running_loop())
        for f, r in zip(futures, results):
            if not f.done():
                f.set_result(r)


class PackedBatcher(ActorBatcher):
    """A batch and its answers as one pickle each (Endpoint.packed)."""

    _outbound = staticmethod(pack)
    _inbound = staticmethod(unpack)
    # A Ray call cost a group coordinator about as much as the 50 heartbeats a tick's batch held
    # (Ray's own frames were 40% of its samples): two calls under way, and the rest waits to go in
    # one, make the batch grow with the load instead of the calls.
    max_in_flight = 2


def batcher_for(link: ActorLink, endpoint: Endpoint) -> ActorBatcher:
    return PackedBatcher(link, endpoint) if endpoint.packed else ActorBatcher(link, endpoint)
