"""The gateway's socket side: asyncio (uvloop inside Ray actors) moving bytes for KafkaConnection.

Requests of one connection are dispatched concurrently (so a producer's pipelined requests
batch into one Ray call) but answered strictly in request order, as Kafka clients require.
Reading pauses while too many answers are outstanding on one connection.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from cluster.gateway.apis import ADMIN_API_KEY
from cluster.gateway.connection import (
    Close,
    KafkaConnection,
    Request,
    encode_admin_response,
    encode_response,
)

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Any] | Any]
MAX_OUTSTANDING = 256
_connection_ids = itertools.count(1)


class KafkaProtocol(asyncio.Protocol):
    def __init__(
        self,
        dispatch: Callable[[Request], Any],
        max_request_bytes: int,
        stats: "ServerStats",
        on_close: Callable[[int], None] | None = None,
    ) -> None:
        self._dispatch = dispatch
        self._on_close = on_close
        self._id = next(_connection_ids)
        self._conn = KafkaConnection(max_request_bytes)
        self._pending: collections.deque[tuple[Request, Any]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._paused = False
        self._stats = stats
        self._peer = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._stats.connections += 1
        peer = transport.get_extra_info("peername")
        self._peer = peer[0] if isinstance(peer, tuple) else ""

    def connection_lost(self, exc: Exception | None) -> None:
        self._stats.connections -= 1
        self._transport = None
        for _, outcome in self._pending:
            if isinstance(outcome, asyncio.Future):
                outcome.cancel()
        self._pending.clear()
        if self._on_close is not None:
            self._on_close(self._id)

    def data_received(self, data: bytes) -> None:
        for event in self._conn.receive(data):
            if isinstance(event, Close):
                self._stats.closed_for_bad_input += 1
                log.warning("closing connection: %s", event.reason)
                self._flush()
                if self._transport is not None:
                    self._transport.close()
                return
            self._stats.requests += 1
            event.client_host = self._peer
            event.connection_id = self._id
            try:
                outcome = self._dispatch(event)
            except Exception:
                log.exception("dispatch failed")
                self._abort()
                return
            if asyncio.isfuture(outcome) or asyncio.iscoroutine(outcome):
                outcome = asyncio.ensure_future(outcome)
                outcome.add_done_callback(self._on_done)
            self._pending.append((event, outcome))
        self._flush()
        if len(self._pending) > MAX_OUTSTANDING and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def _on_done(self, _future: asyncio.Future) -> None:
        self._flush()

    def _flush(self) -> None:
        while self._pending:
            request, outcome = self._pending[0]
            if isinstance(outcome, asyncio.Future):
                if not outcome.done():
                    break
                if outcome.cancelled():
                    self._pending.popleft()
                    continue
                if outcome.exception() is not None:
                    log.error("handler of api %s failed", request.api_key, exc_info=outcome.exception())
                    self._abort()
                    return
                outcome = outcome.result()
            self._pending.popleft()
            if outcome is None or self._transport is None:
                continue  # e.g. Produce with acks=0 gets no answer
            if request.api_key == ADMIN_API_KEY:
                self._transport.write(encode_admin_response(request, outcome))
            else:
                self._transport.write(encode_response(request, outcome))
            if request.after_reply is not None:
                request.after_reply()
        if self._paused and len(self._pending) <= MAX_OUTSTANDING // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def _abort(self) -> None:
        # A handler bug: like Kafka's unexpected-error path, drop this connection, keep serving others.
        if self._transport is not None:
            self._transport.close()


class ServerStats:
    __slots__ = ("connections", "requests", "closed_for_bad_input")

    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0
        self.closed_for_bad_input = 0


async def serve(
    dispatch: Callable[[Request], Any],
    host: str,
    port: int,
    max_request_bytes: int,
    on_close: Callable[[int], None] | None = None,
) -> tuple[asyncio.Server, ServerStats]:
    stats = ServerStats()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: KafkaProtocol(dispatch, max_request_bytes, stats, on_close),
        host,
        port,
        reuse_address=True,
        backlog=1024,
    )
    return server, stats
