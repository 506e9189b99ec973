"""What every driver does with a machine's output; a driver supplies connections, time and wakeups.

After every input (start, a response, a failure, a tick) the driver calls `service(machine)`:
requests go to the machine's connection for (lane, broker), dropped connections are closed,
observations go to the sink, and the machine's next wakeup is (re)armed.

A connection is keyed by (owner, lane, broker), the owner being the machine, or the pool it
names: a pooled connection carries many machines' requests (each in its own order, as TCP
keeps it) and outlives any one of them; `close_all` ends it.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from loadtest.members.machine import Broker, Close, Machine, Send

Sink = Callable[[list[dict[str, Any]]], None]
Key = tuple[int | str, str, Broker]  # (machine id or pool name, lane, broker)


def wall_ms() -> float:
    return time.time() * 1000.0


class Conn(Protocol):
    def send(self, machine: Machine, send: Send) -> None: ...
    def close(self) -> None: ...


class DriverCore:
    def __init__(self, sink: Sink | None, client_id: str) -> None:
        self.sink = sink
        self.client_id = client_id
        self.connections: dict[Key, Conn] = {}
        # machine id -> its own connections' keys: forgetting a member must not scan every
        # connection (stopping n members scanned n x 2n keys). Pooled keys are nobody's.
        self._keys: dict[int, set[Key]] = {}
        self.machines: dict[int, Machine] = {}
        self.crashes: list[tuple[str, str]] = []  # (member, traceback): bugs in member logic

    # a driver overrides these three
    def open(self, key: Key) -> Conn:
        raise NotImplementedError

    def arm(self, machine: Machine, at_ms: float | None) -> None:
        raise NotImplementedError

    def now(self) -> float:
        return wall_ms()

    # -- shared ------------------------------------------------------------------------------

    def service(self, machine: Machine) -> None:
        pool = machine.pool
        for action in machine.take_actions():
            key = (id(machine) if pool is None else pool, action.lane, action.to)
            if isinstance(action, Send):
                conn = self.connections.get(key)
                if conn is None:
                    conn = self.connections[key] = self.open(key)
                    if pool is None:
                        self._keys.setdefault(id(machine), set()).add(key)
                conn.send(machine, action)
            elif isinstance(action, Close) and pool is None:
                conn = self.connections.pop(key, None)
                if conn is not None:
                    conn.close()
        events = machine.take_events()
        if events and self.sink is not None:
            self.sink(events)
        if machine.stopped:
            self.forget(machine)
        else:
            self.arm(machine, machine.next_wakeup())

    def on_responses(self, answers: list[tuple[Machine, int, Any, int]]) -> None:
        """Answers as the wire read them: each machine receives its own, in order, then is serviced once."""
        now = self.now()
        # The usual case, one answer per read, skips the grouping.
        owners = ((answers[0][0], answers),) if len(answers) == 1 else _by_owner(answers).items()
        for machine, part in owners:
            try:
                for _, request_id, response, size in part:
                    machine.receive(request_id, response, now, size)
            except Exception as exc:
                self._crashed(machine, exc)
            self.service(machine)

    def on_lost(self, key: Key, conn: Conn, unanswered: list[tuple[Machine, int]]) -> None:
        """The connection broke (or never opened): its requests fail with NETWORK_EXCEPTION."""
        if self.connections.get(key) is conn:
            del self.connections[key]
            if not isinstance(key[0], str):
                self._keys.get(key[0], set()).discard(key)
        now = self.now()
        for machine, part in _by_owner(unanswered).items():
            with self.guard(machine):
                for _, request_id in part:
                    machine.fail(request_id, ErrorCode.network_exception, now)
            self.service(machine)

    def on_wakeup(self, machine: Machine) -> None:
        if machine.stopped:
            return
        try:  # as `guard`, inline: this runs once per timer a member has (a heartbeat each)
            machine.tick(self.now())
        except Exception as exc:
            self._crashed(machine, exc)
        self.service(machine)

    def start(self, machine: Machine) -> None:
        self.machines[id(machine)] = machine
        with self.guard(machine):
            machine.start(self.now())
        self.service(machine)

    @contextlib.contextmanager
    def guard(self, machine: Machine) -> Iterator[None]:
        """A bug in a member's logic stops that member, loudly, and no other."""
        try:
            yield
        except Exception as exc:
            self._crashed(machine, exc)

    def _crashed(self, machine: Machine, exc: Exception) -> None:
        self.crashes.append((machine.name, traceback.format_exc()))
        machine.observe(self.now(), "member_stop", detail={"reason": "crash", "error": repr(exc)})
        machine.stopped = True

    def forget(self, machine: Machine) -> None:
        """Close a stopped machine's connections."""
        self.arm(machine, None)
        self.machines.pop(id(machine), None)
        for key in self._keys.pop(id(machine), ()):
            conn = self.connections.pop(key, None)
            if conn is not None:
                conn.close()

    def close_pools(self) -> None:
        """Close the pooled connections (every machine's own ones close as it is forgotten)."""
        for key in [k for k in self.connections if isinstance(k[0], str)]:
            self.connections.pop(key).close()


def _by_owner(items: list[tuple]) -> dict[Machine, list[tuple]]:
    """Items whose first element is their machine, grouped by it, each group in its order."""
    if len(items) == 1 or all(item[0] is items[0][0] for item in items):
        return {items[0][0]: items} if items else {}
    out: dict[Machine, list[tuple]] = {}
    for item in items:
        out.setdefault(item[0], []).append(item)
    return out
