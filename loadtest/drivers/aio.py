"""The asyncio driver: experiments and benchmarks run thousands of members on one event loop.

No task per member: a member's connections are asyncio Protocols whose callbacks feed it
responses (a pooled connection feeds each of its members its own), and its next wakeup is one
`loop.call_at` timer, re-armed after every input.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cluster.launcher import raise_open_files_limit
from loadtest.drivers.core import DriverCore, Key, Sink
from loadtest.drivers.wire import ClientWire, WireError
from loadtest.members.machine import Broker, Machine, Send
from loadtest.members.requester import Requester


class _Connection(asyncio.Protocol):
    def __init__(self, driver: "AsyncioDriver", key: Key) -> None:
        self.driver = driver
        self.key = key
        self.wire = ClientWire(driver.client_id)
        self.transport: asyncio.Transport | None = None
        self.backlog: list[bytes] = []
        self.closed = False
        broker = key[2]
        self.connecting = driver.loop.create_task(driver.loop.create_connection(lambda: self, broker.host, broker.port))
        self.connecting.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is not None:
            if not self.closed:
                self.closed = True
                self.driver.on_lost(self.key, self, self.wire.abandon())

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.closed:
            transport.close()
            return
        for data in self.backlog:
            self.transport.write(data)
        self.backlog.clear()

    def send(self, machine: Machine, send: Send) -> None:
        data = self.wire.encode(send, machine)
        if self.transport is not None:
            self.transport.write(data)
        else:
            self.backlog.append(data)

    def data_received(self, data: bytes) -> None:
        try:
            answers = self.wire.receive(data)
        except WireError:
            self.close()
            return
        if answers:
            self.driver.on_responses(answers)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.closed = True
        self.driver.on_lost(self.key, self, self.wire.abandon())

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()  # connection_lost fails what is still waiting
        else:
            self.connecting.cancel()


class AsyncioDriver(DriverCore):
    def __init__(self, sink: Sink | None = None, client_id: str = "raygroups-load") -> None:
        super().__init__(sink, client_id)
        raise_open_files_limit()
        self.loop = asyncio.get_running_loop()
        self._wakeups: dict[int, asyncio.TimerHandle] = {}
        self._requester: Requester | None = None

    def open(self, key: Key) -> _Connection:
        return _Connection(self, key)

    def arm(self, machine: Machine, at_ms: float | None) -> None:
        handle = self._wakeups.pop(id(machine), None)
        if handle is not None:
            handle.cancel()
        if at_ms is not None:
            delay = max(0.0, (at_ms - self.now()) / 1000.0)
            self._wakeups[id(machine)] = self.loop.call_later(delay, self.on_wakeup, machine)

    async def stop(self, machine: Machine, timeout_s: float = 10.0) -> None:
        """Let the machine leave cleanly (if it can), then close whatever it still holds."""
        leave = getattr(machine, "leave", None)
        if leave is not None and not machine.stopped:
            leave(self.now())
            self.service(machine)
            deadline = self.loop.time() + timeout_s
            while not machine.stopped and self.loop.time() < deadline:
                await asyncio.sleep(0.02)
        machine.stopped = True
        self.forget(machine)

    async def close(self) -> None:
        """Close every connection and timer (before the event loop ends)."""
        for machine in list(self.machines.values()):
            machine.stopped = True
            self.forget(machine)
        if self._requester is not None:
            self.forget(self._requester)
        self.close_pools()
        await asyncio.sleep(0.05)  # let the transports close and connection attempts end

    async def call(self, broker: Broker, api: int, version: int, body: dict[str, Any], timeout_ms: float = 30_000) -> Any:
        """One request outside any member (the monitor, the runner): the response, or None if it failed."""
        if self._requester is None:
            self._requester = Requester("monitor", None, [broker])
            self._requester.role = "monitor"
            self.start(self._requester)
        future: asyncio.Future = self.loop.create_future()

        def done(response: Any, error: Any, now: float, _p: Any) -> None:
            if not future.done():
                future.set_result(response)

        self._requester.request(self.now(), api, version, body, broker, done, timeout_ms)
        self.service(self._requester)
        return await future
