"""Drive one sans-I/O member by hand: take what it sends, answer with kio responses, move time."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.answers import build_response
from loadtest.drivers.wire import check_fields
from cluster.gateway.apis import request_class
from loadtest.members.machine import API_NAMES, Broker, Close, Machine, Send

BOOT = [Broker("boot", 9092)]
COORD = Broker("coord", 9093)
LEADER = Broker("leader", 9094)


class Harness:
    def __init__(self, machine: Machine, now: float = 1_000_000.0) -> None:
        self.m = machine
        self.now = now
        self.outbox: list[Send] = []
        self.closed: list[Close] = []
        self.events: list[dict[str, Any]] = []
        machine.start(now)
        self._collect()

    def _collect(self) -> None:
        for action in self.m.take_actions():
            if isinstance(action, Send):
                check_fields(request_class(action.api, action.version), action.body)  # what the wire would refuse
                self.outbox.append(action)
            else:
                self.closed.append(action)
        self.events.extend(self.m.take_events())

    def take(self, api: int) -> Send:
        """The oldest unanswered request of `api` (fails the test when there is none)."""
        for send in self.outbox:
            if send.api == api:
                self.outbox.remove(send)
                return send
        raise AssertionError(f"no {API_NAMES[api]} sent; outbox: {[API_NAMES[s.api] for s in self.outbox]}")

    def pending(self, api: int) -> list[Send]:
        return [s for s in self.outbox if s.api == api]

    def answer(self, send: Send, **fields: Any) -> None:
        self.m.receive(send.request_id, build_response(send.api, send.version, fields), self.now)
        self._collect()

    def fail(self, send: Send, error: ErrorCode = ErrorCode.network_exception) -> None:
        self.outbox.remove(send) if send in self.outbox else None
        self.m.fail(send.request_id, error, self.now)
        self._collect()

    def advance(self, ms: float) -> None:
        self.now += ms
        self.m.tick(self.now)
        self._collect()

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]

    def find_coordinator(self, broker: Broker = COORD) -> None:
        send = self.take(10)
        self.answer(send, coordinators=[{"key": send.body["coordinator_keys"][0], "node_id": 1, "host": broker.host,
                                         "port": broker.port, "error_code": ErrorCode.none}])
