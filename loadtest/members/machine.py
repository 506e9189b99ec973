"""The sans-I/O core every simulated client shares (after h11's Connection).

A machine never touches a socket or a clock. The driver feeds it:
- `start(now)` once, `tick(now)` whenever `next_wakeup()` has passed,
- `receive(request_id, response, now)` for each answer, `fail(request_id, error, now)` when the
  connection a request went on broke (NETWORK_EXCEPTION) or could not be opened,
and after each call takes `take_actions()` (requests to send, connections to drop) and
`take_events()` (observation rows for the event log, locust, or statistics).

Requests carry where they go (`Broker`) and a `lane`: the driver keeps one connection per
(machine, lane, broker), as a Kafka client keeps its coordinator connection apart from its
fetch connections, so a long-polling fetch never delays a heartbeat. A request with no answer
within its timeout is failed with REQUEST_TIMED_OUT and its connection dropped, as Kafka's
clients do.

A machine given a `pool` name shares its connections with every machine naming the same pool:
one connection per (pool, lane, broker). Benchmarks hold thousands of idle members this way
without a socket each; such a member cannot drop a shared connection, so its Close is ignored
(its timed-out request has failed already, and a late answer finds nothing waiting).
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.members.errors import error_name

Millis = float
Reply = Callable[[Any, ErrorCode, Millis, "Pending"], None]

API_NAMES: dict[int, str] = {
    int(k): "".join(w.capitalize() for w in k.name.split("_")) for k in ApiKey
}


@dataclass(frozen=True, slots=True)
class Broker:
    host: str
    port: int
    # "host:port", made once: every request and answer observed names its broker.
    label: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", f"{self.host}:{self.port}")

    def __str__(self) -> str:
        return self.label

    @classmethod
    def parse(cls, text: str) -> "Broker":
        host, _, port = text.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"broker address must be host:port, got {text!r}")
        return cls(host, int(port))


def parse_bootstrap(text: str) -> list[Broker]:
    return [Broker.parse(part) for part in text.split(",") if part.strip()]


@dataclass(slots=True)
class Send:
    request_id: int
    api: int
    version: int
    body: dict[str, Any]
    to: Broker
    lane: str


@dataclass(frozen=True, slots=True)
class Close:
    to: Broker
    lane: str


Action = Send | Close


@dataclass(slots=True)
class Pending:
    send: Send
    sent_at: Millis
    deadline: Millis
    on_reply: Reply


class Machine:
    """Request bookkeeping, named timers and observations; subclasses hold the protocol."""

    role = "client"

    def __init__(self, name: str, group: str | None, bootstrap: list[Broker], *, request_timeout_ms: float = 30_000,
                 retry_backoff_ms: float = 100, pool: str | None = None) -> None:
        if not bootstrap:
            raise ValueError("a client needs at least one bootstrap broker")
        self.name = name
        self.group = group
        self.bootstrap = list(bootstrap)
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.pool = pool
        self.stopped = False
        self._boot_index = 0
        self._next_id = 0
        self._inflight: dict[int, Pending] = {}
        self._timers: dict[str, tuple[Millis, Callable[[Millis], None]]] = {}
        self._actions: list[Action] = []
        self._events: list[dict[str, Any]] = []
        self.member_id = ""

    # -- what the driver calls ------------------------------------------------------------------

    def start(self, now: Millis) -> None:
        raise NotImplementedError

    def receive(self, request_id: int, response: Any, now: Millis, size: int | None = None) -> None:
        pending = self._inflight.pop(request_id, None)
        if pending is None or self.stopped:
            return  # timed out already (its connection was dropped), or the client is gone
        error = first_error(response)
        self._observe_response(pending, error, now, size)
        pending.on_reply(response, error, now, pending)

    def fail(self, request_id: int, error: ErrorCode, now: Millis) -> None:
        pending = self._inflight.pop(request_id, None)
        if pending is None or self.stopped:
            return
        if pending.send.to == self.any_broker():
            # Try the next bootstrap broker next time: once per broker that failed, not once per
            # failed request (two requests failing together on a dead broker moved the index by
            # two, back onto the dead one, round after round), and not when the failed one was
            # already left behind.
            self._boot_index += 1
        self._observe_response(pending, error, now)
        pending.on_reply(None, error, now, pending)

    def tick(self, now: Millis) -> None:
        expired = [p for p in self._inflight.values() if p.deadline <= now]
        for pending in expired:
            self._actions.append(Close(pending.send.to, pending.send.lane))
            self.fail(pending.send.request_id, ErrorCode.request_timed_out, now)
        due = [(at, name) for name, (at, _) in self._timers.items() if at <= now]
        for _, name in sorted(due):
            entry = self._timers.get(name)
            if entry is not None and entry[0] <= now:
                del self._timers[name]
                entry[1](now)

    def next_wakeup(self) -> Millis | None:
        times = [at for at, _ in self._timers.values()]
        times.extend(p.deadline for p in self._inflight.values())
        return min(times) if times else None

    def take_actions(self) -> list[Action]:
        actions, self._actions = self._actions, []
        return actions

    def take_events(self) -> list[dict[str, Any]]:
        events, self._events = self._events, []
        return events

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # -- for subclasses ---------------------------------------------------------------------------

    def any_broker(self) -> Broker:
        return self.bootstrap[self._boot_index % len(self.bootstrap)]

    def send(self, now: Millis, api: int, version: int, body: dict[str, Any], to: Broker, lane: str,
             on_reply: Reply, timeout_ms: float | None = None) -> int:
        self._next_id += 1
        request = Send(self._next_id, api, version, body, to, lane)
        deadline = now + (self.request_timeout_ms if timeout_ms is None else timeout_ms)
        self._inflight[request.request_id] = Pending(request, now, deadline, on_reply)
        self._actions.append(request)
        self.observe(now, "request", api=API_NAMES[api], broker=to.label, correlation=request.request_id)
        return request.request_id

    def close_connection(self, to: Broker, lane: str) -> None:
        self._actions.append(Close(to, lane))

    def after(self, name: str, at: Millis, callback: Callable[[Millis], None]) -> None:
        """(Re)arm the timer `name` to call back at `at`."""
        self._timers[name] = (at, callback)

    def cancel(self, name: str) -> None:
        self._timers.pop(name, None)

    def has_timer(self, name: str) -> bool:
        return name in self._timers

    def observe(self, now: Millis, kind: str, **fields: Any) -> None:
        if self.member_id:
            row = {"time": now, "kind": kind, "role": self.role, "member": self.name, "group": self.group,
                   "member_id": self.member_id, **fields}
        else:
            row = {"time": now, "kind": kind, "role": self.role, "member": self.name, "group": self.group, **fields}
        self._events.append(row)

    def _observe_response(self, pending: Pending, error: ErrorCode, now: Millis, size: int | None = None) -> None:
        send = pending.send
        self.observe(now, "response", api=API_NAMES[send.api], broker=send.to.label, correlation=send.request_id,
                     request_time=pending.sent_at, latency_ms=now - pending.sent_at, error=error_name(error),
                     bytes=size)


# -- the first error of a response, wherever its API keeps error codes ---------------------------


def first_error(response: Any) -> ErrorCode:
    """The top-level error code, else the first non-NONE one among the response's entries
    (partitions, groups, coordinators), by a plan computed once per response class."""
    if response is None:
        return ErrorCode.none
    for path in _error_paths(type(response)):
        code = _walk(response, path)
        if code is not None:
            return code
    return ErrorCode.none


def _walk(entity: Any, path: tuple[str, ...]) -> ErrorCode | None:
    value = getattr(entity, path[0])
    if len(path) == 1:
        return value if value is not None and value != ErrorCode.none else None
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if item is None:
            continue
        found = _walk(item, path[1:])
        if found is not None:
            return found
    return None


@functools.cache
def _error_paths(cls: type) -> tuple[tuple[str, ...], ...]:
    paths: list[tuple[str, ...]] = []
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        if f.metadata.get("kafka_type") == "error_code":
            paths.insert(0, (f.name,)) if f.name == "error_code" else paths.append((f.name,))
            continue
        hint = hints[f.name]
        inner = _entity(hint)
        if inner is not None:
            paths.extend((f.name, *sub) for sub in _error_paths(inner))
    return tuple(paths)


def _entity(hint: Any) -> type | None:
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and is_dataclass(candidate):
            return candidate
        for arg in typing.get_args(candidate):
            if isinstance(arg, type) and is_dataclass(arg):
                return arg
    return None
