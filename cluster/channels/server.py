"""The actor's side of its channel: a Unix socket served on the actor's own event loop, where each
call runs the named method of the actor exactly as a Ray call would, concurrently with the others
(an async actor), started in the order the calls arrived: at once, as they are read, without a
Task (cluster/eager.py), so what the methods run must not need one (no `asyncio.current_task()`,
`asyncio.timeout`; tests/unit/gateway/test_taskless_handlers.py holds the rule).

Only the methods given may be called (the Endpoints of the actor's kind: cluster/calls). An
exception goes back to the caller as Ray would deliver it, raised from the await.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterable
from typing import Any

from cluster import eager
from cluster.channels.frames import CANCEL, OK, RAISED, FrameBuffer, answer_frame, parse_call

log = logging.getLogger(__name__)


class ChannelServer:
    def __init__(self, target: Any, methods: Iterable[str]) -> None:
        self.target = target
        self.methods = frozenset(methods)
        self.path: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self.transports: set[asyncio.BaseTransport] = set()

    async def start(self) -> str:
        if self.path is None:
            name = f"raygroups-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            # Linux's abstract namespace: no file is left behind by an actor that is killed (a path
            # is limited to 107 bytes either way).
            path = "\0" + name if sys.platform == "linux" else os.path.join(tempfile.gettempdir(), name + ".sock")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(path)  # bound here: uvloop refuses an abstract path given as a string
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            self._server = await loop.create_unix_server(lambda: _Connection(self), sock=sock)
            self.path = path
        return self.path

    def close(self) -> None:
        """Stop listening and end every connection (their callers' calls fail as an actor gone)."""
        if self._server is not None:
            self._server.close()
        for transport in list(self.transports):
            transport.close()
        if self.path is not None and not self.path.startswith("\0"):
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def run(self, connection: _Connection, frame: bytes) -> None:
        call_id, method, args, kwargs = parse_call(frame)
        if method == CANCEL:
            # The caller stopped waiting (a long poll no longer needed): stop the call, as
            # ray.cancel stops an async actor's task; it answers nothing.
            task = connection.calls.pop(call_id, None)
            if task is not None:
                task.cancel()
            return
        # Started at once (cluster/eager.py), not as a Task on the loop's next pass: a call whose
        # answer is ready without waiting (a heartbeat's) is answered in the pass that read it.
        call = eager.start(self._answer(connection, call_id, method, args, kwargs))
        if not call.done():
            connection.calls[call_id] = call
            call.add_done_callback(lambda _t: connection.calls.pop(call_id, None))

    async def _answer(self, connection: _Connection, call_id: int, method: str, args: tuple,
                      kwargs: dict[str, Any]) -> None:
        try:
            if method not in self.methods:
                raise AttributeError(f"{method} is not callable over the channel")
            result = getattr(self.target, method)(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            frame = answer_frame(call_id, OK, result)
        except Exception as exc:  # noqa: BLE001 - the caller gets it, as from a Ray call
            try:
                frame = answer_frame(call_id, RAISED, exc)
            except Exception:  # noqa: BLE001 - an exception that does not pickle goes as text
                frame = answer_frame(call_id, RAISED, RuntimeError(f"{type(exc).__name__}: {exc}"))
        transport = connection.transport
        if transport is not None and not transport.is_closing():
            transport.write(frame)


class _Connection(asyncio.Protocol):
    def __init__(self, server: ChannelServer) -> None:
        self.server = server
        self.buffer = FrameBuffer()
        self.transport: asyncio.Transport | None = None
        self.calls: dict[int, asyncio.Future] = {}  # under way, by call id

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.transports.add(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        # The caller is gone (its process died): like Ray, what it started runs on; no answer goes.
        self.server.transports.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            frames = self.buffer.feed(data)
        except ValueError:
            log.exception("channel stream corrupt; closing the connection")
            self.transport.close()
            return
        for frame in frames:
            self.server.run(self, frame)
