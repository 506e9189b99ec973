"""The gateway's socket side: asyncio (uvloop inside Ray actors) moving bytes for KafkaConnection.

Requests of one connection are dispatched concurrently (so a producer's pipelined requests batch
into one Ray call); the connection releases their answers in request order and says when to
pause reading. This shell only feeds it bytes and answers, and writes what it releases.

The answers a connection releases in one pass of the event loop go out in one transport.write:
librdkafka pipelines up to five requests per connection, and one batched Ray call answers them
together, so a write (a send syscall) per answer was most of the cost of sending.

A handler's coroutine runs without a Task (`_step`): started at once, and resumed by the callback
of the future it waits on, as a Task would resume it. A Task per request (its creation, its entry
in asyncio's task WeakSet, and one more pass of the loop before it starts) was about 3 us of a
heartbeat's gateway CPU, 5% of the gateway's samples under group-requests. What a Task does that this
does not, nothing in the handlers needs: no `asyncio.current_task()` (so no `asyncio.timeout`), no
context variables. A coroutine that yields anything but a future (a bare `yield`: `sleep(0)`) goes
on as a Task from there.

Limits (issue 21): each connection has one idle timer, re-armed lazily (it fires at the deadline
the connection last gave and asks again, so a busy connection costs no timer work per request);
a failed authentication's answer and close wait connection.failed.authentication.delay.ms, reads
paused meanwhile, as Kafka's Selector delays them; a connection holding too much request memory
pauses until memory comes back. Each limit that closes or pauses something is logged (rate-limited:
strangers trigger these at will) and counted in the metrics registry.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import CoroutineType
from typing import Any

from cluster.gateway.auth.session import Session
from cluster.gateway.connection_limits import ConnectionQuota, RequestMemory
from cluster.gateway.log_limit import RateLimitedLog
from cluster.gateway.request_metrics import record_close, record_failed_authentication, record_memory_wait, record_request
from cluster.gateway.connection import (
    Close,
    KafkaConnection,
    PauseReading,
    Reply,
    Request,
    ResumeReading,
)

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Any] | Any]
_connection_ids = itertools.count(1)
# Bad frames are cheap to send: a few lines a second per gateway, with a count of those left out.
_bad_input_log = RateLimitedLog(log, per_second=3)
_limit_log = RateLimitedLog(log, per_second=3)  # idle closes, memory waits
_authentication_log = RateLimitedLog(log, per_second=3)  # Kafka logs each failed authentication at INFO
# Up to this many requests in flight on a connection, an answer looks for others answered in the
# same pass before writing; librdkafka keeps at most 5 in flight.
_COALESCE_SCAN = 32


class KafkaProtocol(asyncio.Protocol):
    def __init__(
        self,
        dispatch: Callable[[Request], Any],
        max_request_bytes: int,
        stats: "ServerStats",
        on_close: Callable[[int], None] | None = None,
        session: Session | None = None,
        memory: RequestMemory | None = None,
        quota: ConnectionQuota | None = None,
    ) -> None:
        self._dispatch = dispatch
        self._on_close = on_close
        self._id = next(_connection_ids)
        self._memory = memory if memory is not None else RequestMemory(-1)
        self._conn = KafkaConnection(max_request_bytes, session=session, memory=self._memory)
        self._quota = quota
        self._counted = False
        self._tasks: set[asyncio.Future] = set()
        self._transport: asyncio.Transport | None = None
        self._stats = stats
        self._peer = ""
        self._idle_timer: asyncio.TimerHandle | None = None
        self._closing = False  # a delayed close (failed authentication) is under way

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._stats.connections += 1
        peer = transport.get_extra_info("peername")
        self._peer = peer[0] if isinstance(peer, tuple) else ""
        if self._quota is not None:
            refused = self._quota.admit(self._peer)
            if refused is not None:
                self._stats.refused_connections += 1
                record_close(refused.limit)
                _bad_input_log.warning("refusing connection: %s", refused.message)
                self._conn.abandon()
                transport.close()
                return
            self._counted = True
        self._arm_idle_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stats.connections -= 1
        if self._counted and self._quota is not None:
            self._quota.release(self._peer)
            self._counted = False
        self._memory.forget(self._memory_available)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._conn.abandon()
        self._transport = None
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        if self._on_close is not None:
            self._on_close(self._id)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        was_waiting = self._conn.waiting_for_memory
        for event in self._conn.receive(data):
            if isinstance(event, Close):
                self._stats.closed_for_bad_input += 1
                self._send()
                self._close_for(event)
                return
            self._stats.requests += 1
            event.received_at = now
            event.client_host = self._peer
            event.connection_id = self._id
            try:
                outcome = self._dispatch(event)
            except Exception:
                log.exception("dispatch failed")
                self._abort()
                return
            if type(outcome) is CoroutineType:
                self._step(event, outcome, None)
            elif asyncio.isfuture(outcome) or asyncio.iscoroutine(outcome):
                task = asyncio.ensure_future(outcome)
                self._tasks.add(task)
                task.add_done_callback(lambda done, request=event: self._answered(request, done))
            else:
                self._conn.respond(event, outcome)
        self._send()
        if self._conn.waiting_for_memory:
            if not was_waiting:
                self._stats.memory_waits += 1
                record_memory_wait()
                _limit_log.warning("queued.max.request.bytes (%d) reached, %d bytes held: %s stops reading until "
                                   "memory comes back", self._memory.limit, self._memory.used, self._peer)
            self._memory.wait(self._memory_available)
        self._read_held_input()

    def _read_held_input(self) -> None:
        # An authentication frame held the rest of the input back until it was answered.
        if self._conn.input_waiting and self._transport is not None:
            self._conn.input_waiting = False
            asyncio.get_running_loop().call_soon(self._read_again)

    def _memory_available(self) -> None:
        # Called from whichever connection gave memory back: continue on a later turn of the loop.
        asyncio.get_running_loop().call_soon(self._read_again)

    def _read_again(self) -> None:
        if self._transport is not None and self._conn.closed is None:
            self.data_received(b"")

    def _arm_idle_timer(self) -> None:
        idle_ms = self._conn.limits.connections_max_idle_ms
        if idle_ms < 0 or self._transport is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a protocol driven by hand, outside a loop (tests): no timer
            return
        deadline = self._conn.idle_deadline()
        # Owed an answer: not idle now; look again one idle period later.
        delay = idle_ms / 1000 if deadline is None else deadline - time.monotonic()
        self._idle_timer = loop.call_later(max(delay, 0.0), self._check_idle)

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self._transport is None or self._conn.closed is not None:
            return
        close = self._conn.expire_idle(time.monotonic())
        if close is None:
            self._arm_idle_timer()  # active since: wait for the deadline it gives now
            return
        self._close_for(close)

    def _answered(self, request: Request, done: asyncio.Future) -> None:
        self._tasks.discard(done)
        if done.cancelled():
            self._conn.respond(request, None)
        elif done.exception() is not None:
            self._failed(request, done.exception())
        else:
            self._conn.respond(request, done.result())
        self._send_unless_more_answers()

    def _step(self, request: Request, coro: Coroutine, waited: asyncio.Future | None) -> None:
        """Run a handler's coroutine to its next wait, or to its answer (see the module docstring)."""
        if waited is not None:
            self._tasks.discard(waited)
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            self._conn.respond(request, stop.value)
        except asyncio.CancelledError:
            self._conn.respond(request, None)
        except Exception as exc:
            self._failed(request, exc)
        else:
            if getattr(yielded, "_asyncio_future_blocking", False):
                yielded._asyncio_future_blocking = False  # what a Task does with an awaited future
                self._tasks.add(yielded)  # cancelled with the connection: the coroutine sees it, as in a Task
                yielded.add_done_callback(functools.partial(self._step, request, coro))
                return
            # A bare yield (sleep(0)) or a bad one: a Task resumes it from here and does what
            # asyncio does with either.
            task = asyncio.ensure_future(coro)
            self._tasks.add(task)
            task.add_done_callback(lambda done: self._answered(request, done))
            return
        if waited is not None:  # resumed by a callback: answer now (started in data_received: it sends)
            self._send_unless_more_answers()

    def _failed(self, request: Request, exc: BaseException) -> None:
        log.error("handler of api %s failed", request.api_key, exc_info=exc)
        self._conn.fail(request, f"handler of api {request.api_key} failed")

    def _send_unless_more_answers(self) -> None:
        # A done future still held here has its callback queued in this same pass: the last of them
        # sends, so that all their answers share one write. (Bounded scan: a deep pipeline sends now.)
        tasks = self._tasks
        if len(tasks) <= _COALESCE_SCAN and any(task.done() for task in tasks):
            return
        self._send()
        self._read_held_input()

    def _send(self) -> None:
        transport = self._transport
        if transport is None or self._closing:  # a delayed close sends nothing after the failure's answer
            return
        events = self._conn.next_events()
        if not events:
            return
        chunks: list[bytes] = []
        hooks: list[Callable[[], None]] = []
        reading: list[Callable[[], None]] = []  # pause/resume, applied once the answers are written
        now = time.perf_counter()
        for event in events:
            if type(event) is Reply:
                request = event.request
                data = event.data
                record_request(request.api_key, (now - request.received_at) * 1000, request.size + 4,
                               len(data) if data is not None else 0)
                if data is not None:
                    chunks.append(data)
                if request.after_reply is not None:
                    hooks.append(request.after_reply)
            elif isinstance(event, PauseReading):
                reading.append(transport.pause_reading)
            elif isinstance(event, ResumeReading):
                reading.append(transport.resume_reading)
            elif isinstance(event, Close):
                self._close_for(event, chunks, hooks)
                return
        self._write(transport, chunks, hooks)
        for change in reading:
            change()

    @staticmethod
    def _write(transport: asyncio.Transport, chunks: list[bytes], hooks: list[Callable[[], None]]) -> None:
        if chunks:
            transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        # after_reply hooks run once their answers are handed to the socket, in request order.
        for hook in hooks:
            hook()

    def _close_for(self, close: Close, chunks: list[bytes] | None = None,
                   hooks: list[Callable[[], None]] | None = None) -> None:
        """Write what precedes the close, then close: a failed authentication after Kafka's delay."""
        self._account(close)
        delay_ms = self._conn.limits.failed_authentication_delay_ms
        if close.authentication_failed and delay_ms > 0 and self._transport is not None:
            self._closing = True
            self._transport.pause_reading()
            asyncio.get_running_loop().call_later(delay_ms / 1000, self._write_and_abort, chunks or [], hooks or [])
            return
        self._write_and_abort(chunks or [], hooks or [])

    def _write_and_abort(self, chunks: list[bytes], hooks: list[Callable[[], None]]) -> None:
        if self._transport is not None:
            self._write(self._transport, chunks, hooks)
        self._abort()

    def _account(self, close: Close) -> None:
        record_close(close.cause)
        if close.authentication_failed:
            self._stats.failed_authentications += 1
            record_failed_authentication()
            _authentication_log.info("Failed authentication with %s (%s)", self._peer, close.reason)
        elif close.cause == "connections.max.idle.ms":
            self._stats.closed_idle += 1
            _limit_log.info("closing connection from %s: %s", self._peer, close.reason)
        else:
            _bad_input_log.warning("closing connection from %s: %s", self._peer, close.reason)

    def _abort(self) -> None:
        # A handler bug or bad input: like Kafka, drop this connection and keep serving the others.
        if self._transport is not None:
            self._transport.close()


class ServerStats:
    __slots__ = ("connections", "requests", "closed_for_bad_input", "refused_connections", "closed_idle",
                 "failed_authentications", "memory_waits")

    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0
        self.closed_for_bad_input = 0
        self.refused_connections = 0
        self.closed_idle = 0
        self.failed_authentications = 0
        self.memory_waits = 0  # times a connection stopped reading for queued.max.request.bytes


async def serve(
    dispatch: Callable[[Request], Any],
    host: str,
    port: int,
    max_request_bytes: int,
    on_close: Callable[[int], None] | None = None,
    new_session: Callable[[], Session] = Session,
    memory: RequestMemory | None = None,
    quota: ConnectionQuota | None = None,
    ssl: Any = None,
) -> tuple[asyncio.Server, ServerStats]:
    stats = ServerStats()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: KafkaProtocol(dispatch, max_request_bytes, stats, on_close, new_session(), memory, quota),
        host,
        port,
        reuse_address=True,
        backlog=1024,
        ssl=ssl,
    )
    return server, stats
