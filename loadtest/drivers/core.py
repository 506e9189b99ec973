"""What every driver does with a machine's output; a driver supplies connections, time and wakeups.

After every input (start, a response, a failure, a tick) the driver calls `service(machine)`:
requests go to the machine's connection for (lane, broker), dropped connections are closed,
observations go to the sink, and the machine's next wakeup is (re)armed.
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


def wall_ms() -> float:
    return time.time() * 1000.0


class Conn(Protocol):
    def send(self, send: Send) -> None: ...
    def close(self) -> None: ...


class DriverCore:
    def __init__(self, sink: Sink | None, client_id: str) -> None:
        self.sink = sink
        self.client_id = client_id
        self.connections: dict[tuple[int, str, Broker], Conn] = {}
        # machine id -> its connections' keys: forgetting a member must not scan every connection
        # (stopping n members scanned n x 2n keys).
        self._keys: dict[int, set[tuple[int, str, Broker]]] = {}
        self.machines: dict[int, Machine] = {}
        self.crashes: list[tuple[str, str]] = []  # (member, traceback): bugs in member logic

    # a driver overrides these three
    def open(self, machine: Machine, lane: str, broker: Broker) -> Conn:
        raise NotImplementedError

    def arm(self, machine: Machine, at_ms: float | None) -> None:
        raise NotImplementedError

    def now(self) -> float:
        return wall_ms()

    # -- shared ------------------------------------------------------------------------------

    def service(self, machine: Machine) -> None:
        for action in machine.take_actions():
            key = (id(machine), action.lane, action.to)
            if isinstance(action, Send):
                conn = self.connections.get(key)
                if conn is None:
                    conn = self.connections[key] = self.open(machine, action.lane, action.to)
                    self._keys.setdefault(key[0], set()).add(key)
                conn.send(action)
            elif isinstance(action, Close):
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

    def on_responses(self, machine: Machine, answers: list[tuple[int, Any, int]]) -> None:
        now = self.now()
        with self.guard(machine):
            for request_id, response, size in answers:
                machine.receive(request_id, response, now, size)
        self.service(machine)

    def on_lost(self, machine: Machine, key: tuple[int, str, Broker], conn: Conn, request_ids: list[int]) -> None:
        """The connection broke (or never opened): its requests fail with NETWORK_EXCEPTION."""
        if self.connections.get(key) is conn:
            del self.connections[key]
        now = self.now()
        with self.guard(machine):
            for request_id in request_ids:
                machine.fail(request_id, ErrorCode.network_exception, now)
        self.service(machine)

    def on_wakeup(self, machine: Machine) -> None:
        if machine.stopped:
            return
        with self.guard(machine):
            machine.tick(self.now())
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
