"""How a caller reaches one actor: over the actor's channel (cluster/channels) once it is open,
else through Ray, as before.

The channel is asked for on the first call (`channel_address`, a Ray call) and used when the actor
runs on this node; an actor on another node is reached through Ray (Ray addresses it there). Calls
keep their order across the switch: the link moves to the channel only once no call it sent
through Ray is under way, since a later channel call could otherwise start before an earlier Ray
one. When the channel closes (the actor died) its calls fail with ChannelClosed, which callers
treat as Ray's RayActorError (failures.ACTOR_GONE); the link goes back to Ray and asks again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from cluster.calls import Endpoint
from cluster.channels import ChannelClient
from cluster.metrics.registry import REGISTRY

log = logging.getLogger(__name__)

RETRY_S = 1.0  # after a failed opening, calls go through Ray this long before the next try
CHANNEL, RAY = (("path", "channel"),), (("path", "ray"),)  # the actor_calls metric's labels


def this_node() -> str | None:
    """This process's Ray node; None outside Ray (in-process tests): then every call goes through
    the handle as given. (Asking the runtime context first would start a local Ray.)"""
    import ray

    if not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_node_id()


class ActorLink:
    def __init__(self, handle: Any, node_id: str | None) -> None:
        self.handle = handle
        self.node_id = node_id
        self.channel: ChannelClient | None = None
        self._ray_calls = 0
        self._opening: asyncio.Task | None = None
        self._warned = False
        self._next_try = 0.0 if node_id is not None and hasattr(handle, "channel_address") else float("inf")

    def call(self, endpoint: Endpoint, *args: Any, **kwargs: Any) -> asyncio.Future:
        """The actor's answer to `endpoint`'s method; cancelling it cancels the call at the actor
        (a long poll). Only Endpoint methods are callable over a channel (ChannelHost)."""
        method = endpoint.method
        channel = self.channel
        if channel is not None and not channel.closed and self._ray_calls == 0:
            REGISTRY.inc("actor_calls", CHANNEL)
            return channel.call(method, *args, **kwargs)
        if channel is not None and channel.closed:
            self.channel = None
            self._next_try = time.monotonic()
        if self.channel is None and self._opening is None and time.monotonic() >= self._next_try:
            self._opening = asyncio.ensure_future(self._open())
        self._ray_calls += 1
        REGISTRY.inc("actor_calls", RAY)
        return asyncio.ensure_future(self._through_ray(getattr(self.handle, method).remote(*args, **kwargs)))

    @property
    def on_channel(self) -> bool:
        return self.channel is not None and not self.channel.closed

    def close(self) -> None:
        if self._opening is not None:
            self._opening.cancel()
        if self.channel is not None:
            self.channel.close()

    async def _through_ray(self, ref: Any) -> Any:
        try:
            return await ref
        except asyncio.CancelledError:
            _cancel(ref)  # the caller stopped waiting: stop the call at the actor too
            raise
        finally:
            self._ray_calls -= 1

    async def _open(self) -> None:
        try:
            node, path = await self.handle.channel_address.remote()
            if node != self.node_id or path is None:
                self._next_try = float("inf")  # another node: Ray it is, for this handle
                return
            self.channel = await ChannelClient.open(path)
        except Exception as exc:  # noqa: BLE001 - the actor may be dying: Ray answers for now
            # Said once per link: an actor on this node whose channel cannot be opened is a fault
            # worth seeing (every call pays Ray's millisecond), not a silent fallback.
            (log.warning if not self._warned else log.debug)("no channel to %s; calls go through Ray: %r",
                                                               self.handle, exc)
            self._warned = True
            self._next_try = time.monotonic() + RETRY_S
        finally:
            self._opening = None


def _cancel(ref: Any) -> None:
    import ray

    if isinstance(ref, ray.ObjectRef):
        ray.cancel(ref)
    elif isinstance(ref, asyncio.Future):
        ref.cancel()
