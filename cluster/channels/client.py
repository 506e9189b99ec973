"""The caller's side of an actor channel: one connection, calls answered by id, possibly out of
order (the actor runs them concurrently). When the connection ends (the actor died, or its node),
every call under way fails with ChannelClosed, as Ray's calls fail with RayActorError."""

from __future__ import annotations

import asyncio
import itertools
import socket
from typing import Any

from cluster.channels.frames import CANCEL, OK, FrameBuffer, call_frame, parse_answer


class ChannelClosed(ConnectionError):
    """The actor's channel closed: the call may or may not have run (as with RayActorError)."""


class ChannelClient(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = FrameBuffer()
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future] = {}
        self.ids = itertools.count(1)
        self.closed = False

    @classmethod
    async def open(cls, path: str) -> ChannelClient:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)  # a local socket connects at once; uvloop refuses an abstract path as a string
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        _, client = await loop.create_unix_connection(cls, sock=sock)
        return client

    def call(self, method: str, *args: Any, **kwargs: Any) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if self.closed or self.transport is None:
            future.set_exception(ChannelClosed("the actor's channel is closed"))
            return future
        call_id = next(self.ids)
        self.pending[call_id] = future
        self.transport.write(call_frame(call_id, method, args, kwargs))
        future.add_done_callback(lambda f: self._cancelled(call_id) if f.cancelled() else None)
        return future

    def _cancelled(self, call_id: int) -> None:
        """A call its caller cancelled is cancelled at the actor too (as ray.cancel does)."""
        if self.pending.pop(call_id, None) is not None and not self.closed and self.transport is not None:
            self.transport.write(call_frame(call_id, CANCEL, (), {}))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.buffer.feed(data)
        except ValueError:
            self.close()
            return
        for frame in frames:
            call_id, status, value = parse_answer(frame)
            future = self.pending.pop(call_id, None)
            if future is None or future.done():
                continue
            if status == OK:
                future.set_result(value)
            else:
                future.set_exception(value)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ChannelClosed("the actor's channel closed during the call"))
