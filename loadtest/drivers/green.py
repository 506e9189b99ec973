"""The gevent driver: locust's users run members in its greenlets.

Each connection has a reader and a writer greenlet; a member's inputs (responses, failures) are
fed to it by the reader, and its timers by a pump greenlet (the locust user's own) that sleeps
until the member's next wakeup or until an input moved it. Nothing here touches asyncio (locust
runs on gevent's hub), and sends only enqueue, so no member code runs twice at once.
"""

from __future__ import annotations

import socket as _stdlib_socket
from typing import Any

import gevent
import gevent.event
import gevent.queue
import gevent.socket

from loadtest.drivers.core import DriverCore, Key, Sink
from loadtest.drivers.wire import ClientWire, WireError
from loadtest.members.machine import Broker, Machine, Send
from loadtest.members.requester import Requester


class _Connection:
    def __init__(self, driver: "GeventDriver", key: Key) -> None:
        self.driver = driver
        self.key = key
        self.wire = ClientWire(driver.client_id)
        self.outbox: gevent.queue.Queue = gevent.queue.Queue()
        self.sock: Any = None
        self.closed = False
        self.greenlet = gevent.spawn(self._run)

    def send(self, machine: Machine, send: Send) -> None:
        self.outbox.put(self.wire.encode(send, machine))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.outbox.put(None)
            if self.sock is not None:
                try:
                    self.sock.shutdown(_stdlib_socket.SHUT_RDWR)
                except OSError:
                    pass

    def _run(self) -> None:
        broker = self.key[2]
        try:
            self.sock = gevent.socket.create_connection((broker.host, broker.port), timeout=10)
            self.sock.settimeout(None)
            self.sock.setsockopt(_stdlib_socket.IPPROTO_TCP, _stdlib_socket.TCP_NODELAY, 1)
            writer = gevent.spawn(self._write)
            try:
                while not self.closed:
                    data = self.sock.recv(1 << 16)
                    if not data:
                        break
                    answers = self.wire.receive(data)
                    if answers:
                        self.driver.on_responses(answers)
            finally:
                writer.kill(block=False)
        except (OSError, WireError):
            pass
        finally:
            self.closed = True
            if self.sock is not None:
                self.sock.close()
            self.driver.on_lost(self.key, self, self.wire.abandon())

    def _write(self) -> None:
        while True:
            data = self.outbox.get()
            if data is None:
                return
            self.sock.sendall(data)


class GeventDriver(DriverCore):
    def __init__(self, sink: Sink | None = None, client_id: str = "raygroups-locust") -> None:
        super().__init__(sink, client_id)
        self._deadlines: dict[int, float | None] = {}
        self._wake: dict[int, gevent.event.Event] = {}
        self._requester: Requester | None = None

    def open(self, key: Key) -> _Connection:
        return _Connection(self, key)

    def arm(self, machine: Machine, at_ms: float | None) -> None:
        self._deadlines[id(machine)] = at_ms
        event = self._wake.get(id(machine))
        if event is not None:
            event.set()

    def run(self, machine: Machine, should_stop: Any = None, poll_s: float = 0.5) -> None:
        """Drive `machine` in the calling greenlet until it stops, or until `should_stop()` says
        so (checked at least every `poll_s`), when it leaves cleanly first."""
        event = self._wake[id(machine)] = gevent.event.Event()
        try:
            self.start(machine)
            while not machine.stopped:
                if should_stop is not None and should_stop():
                    self.stop(machine)
                    return
                at = self._deadlines.get(id(machine))
                timeout = poll_s if at is None else min(poll_s, max(0.0, (at - self.now()) / 1000.0))
                event.wait(timeout)
                event.clear()
                at = self._deadlines.get(id(machine))
                if at is not None and at <= self.now():
                    self.on_wakeup(machine)
        finally:
            self._wake.pop(id(machine), None)
            self._deadlines.pop(id(machine), None)

    def stop(self, machine: Machine, timeout_s: float = 10.0) -> None:
        """Let the machine leave cleanly (if it can), waiting at most `timeout_s`, then close it."""
        leave = getattr(machine, "leave", None)
        if leave is not None and not machine.stopped:
            leave(self.now())
            self.service(machine)
            with gevent.Timeout(timeout_s, False):
                while not machine.stopped:
                    gevent.sleep(0.02)
        machine.stopped = True
        self.forget(machine)
        event = self._wake.get(id(machine))
        if event is not None:
            event.set()

    def call(self, broker: Broker, api: int, version: int, body: dict[str, Any], timeout_ms: float = 30_000) -> Any:
        """One request outside any member; blocks this greenlet; the response, or None if it failed."""
        if self._requester is None:
            self._requester = Requester("locust-setup", None, [broker])
            self.start(self._requester)
        result = gevent.event.AsyncResult()
        self._requester.request(self.now(), api, version, body, broker, lambda r, e, t, p: result.set(r), timeout_ms)
        self.service(self._requester)
        try:
            return result.get(timeout=timeout_ms / 1000.0)
        except gevent.Timeout:
            return None
