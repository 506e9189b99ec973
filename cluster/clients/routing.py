"""Routing requests to the actors that lead their partitions.

The leadership map comes from the controller (pushed on every change, pulled through the
ControllerClient on a miss). Calls travel batched per actor and loop tick (cluster/clients/
batchers.py). A call that found no live actor, or a leader that answers that it no longer leads
at that epoch (so the operation did not run), refreshes the map and is retried once, so a
failover the controller already handled is invisible to the client. A call whose actor died
under it (or whose channel closed) may have run, its records durable: it is never run again here,
as Kafka's broker never runs a request twice; the client gets Kafka's retriable error and sends
again as it chooses (a ConsumerGroupHeartbeat after an error says everything again).
The Router is the transport every client shares, not a client of one actor kind: the typed
calls are the clients' (cluster/clients/).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from cluster.calls import Endpoint
from cluster.clients.batchers import ActorBatcher, batcher_for
from cluster.clients.controller import ControllerClient
from cluster.clients.failures import ACTOR_LOST
from cluster.clients.links import ActorLink, this_node
from cluster.leadership import Leadership

log = logging.getLogger(__name__)


class NoLeader(Exception):
    """No live actor leads the partition right now (a failover is in progress)."""


class Router:
    def __init__(self, controller: Any, leadership: Leadership) -> None:
        """controller: the controller actor's handle (None where nothing may pull the map)."""
        self.controller = ControllerClient(controller)
        self.leadership = leadership
        self._batchers: dict[tuple[str, Endpoint], ActorBatcher] = {}
        self._links: dict[str, ActorLink] = {}
        self._node = this_node()
        self._refresh: asyncio.Future | None = None
        self.refreshes = 0

    def update(self, leadership: Leadership) -> None:
        if leadership.version < self.leadership.version:
            return
        old_handles = self.leadership.handles
        self.leadership = leadership
        # Links and batchers hold handles: drop those of actors that are gone or were replaced. A
        # map pulled or pushed through Ray holds new handle objects for the same actors, so they
        # compare by actor (Ray's ActorHandle.__eq__), never by identity: closing the link of a
        # live actor would fail every call under way on its channel.
        replaced = {name for name in {*self._links, *(k[0] for k in self._batchers)}
                    if name not in leadership.handles or leadership.handles[name] != old_handles.get(name)}
        for key in [k for k in self._batchers if k[0] in replaced]:
            del self._batchers[key]
        for name in replaced & set(self._links):
            self._links.pop(name).close()

    async def refresh(self) -> Leadership:
        """Pull the map from the controller; concurrent callers share one pull."""
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.ensure_future(self._pull())
        return await asyncio.shield(self._refresh)

    async def _pull(self) -> Leadership:
        self.refreshes += 1
        try:
            self.update(await self.controller.leadership())
        except Exception:
            log.exception("leadership refresh failed")
        return self.leadership

    def leader(self, topic: str, partition: int) -> tuple[str, int] | None:
        return self.leadership.leaders.get((topic, partition))

    def handle(self, actor: str) -> Any:
        return self.leadership.handles.get(actor)

    def link(self, actor: str) -> ActorLink | None:
        """How to reach `actor` (its channel, or Ray): None when it is not live."""
        link = self._links.get(actor)
        if link is None:
            handle = self.handle(actor)
            if handle is None:
                return None
            link = self._links[actor] = ActorLink(handle, self._node)
        return link

    def call(self, actor: str, endpoint: Endpoint, item: Any) -> asyncio.Future:
        batcher = self._batchers.get((actor, endpoint))
        if batcher is None:
            link = self.link(actor)
            if link is None:
                future = asyncio.get_running_loop().create_future()
                future.set_exception(NoLeader(f"{actor} is not live"))
                return future
            batcher = self._batchers[(actor, endpoint)] = batcher_for(link, endpoint)
        return batcher.call(item)

    async def call_leader(
        self,
        topic: str,
        partition: int,
        endpoint: Endpoint,
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
                result = await self.call(actor, endpoint, make_item(epoch))
            except NoLeader:  # not sent: no live actor to send it to
                await self.refresh()
                continue
            except ACTOR_LOST:
                await self.refresh()
                raise NoLeader(f"leader of {topic}-{partition} ({actor}) was lost during the call") from None
            if not_leader(result) and attempt == 0:
                await self.refresh()
                if self.leader(topic, partition) != route:
                    continue
            return result
        raise NoLeader(f"leader of {topic}-{partition} is unavailable")

