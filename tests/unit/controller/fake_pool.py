"""An actor pool without Ray: actors are objects whose death, loads and starts a test controls."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from cluster.calls.kinds import ActorKind
from cluster.leadership import Leadership

TP = tuple[str, int]


@dataclass(eq=False)
class FakeActor:
    name: str
    kind: ActorKind
    node_id: str = "node-a"
    port: int = 0
    dead: asyncio.Event = field(default_factory=asyncio.Event)
    loaded: dict[TP, int] = field(default_factory=dict)
    # Loads wait for this gate when it is set up (to die in the middle of one).
    gate: asyncio.Event | None = None
    leadership: Leadership | None = None
    directory: uuid.UUID | None = None  # its node's data directory id, as an actor that keeps logs says
    replicas: Any = None  # the last ReplicaPush it was given
    paused: bool = False  # alive to Ray, answering nothing (SIGSTOP)
    slow: asyncio.Event | None = None  # pings are answered only once this is set (a loaded machine)
    starting: asyncio.Event | None = None  # info is answered only once this is set (Ray has not placed it)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakePool:
    def __init__(self) -> None:
        self.spawned: list[FakeActor] = []
        self.failing_loads: Counter[TP] = Counter()  # loads of tp that fail before one succeeds
        self.failing_gateway_starts = 0
        self.unplaced_spawns = 0  # actors spawned from now on that never start (Ray cannot place them)

    def by_name(self, name: str) -> FakeActor:
        return next(a for a in reversed(self.spawned) if a.name == name)

    def spawn(self, kind: ActorKind, name: str) -> FakeActor:
        actor = FakeActor(name, kind)
        if self.unplaced_spawns:
            self.unplaced_spawns -= 1
            actor.starting = asyncio.Event()
        self.spawned.append(actor)
        return actor

    def spawn_gateway(self, name: str, node_id: int, host: str, port: int) -> FakeActor:
        actor = FakeActor(name, ActorKind.GATEWAY, port=port or 40000 + node_id)
        self.spawned.append(actor)
        return actor

    async def start_gateway(self, handle: FakeActor, leadership: Leadership) -> tuple[str, int]:
        if self.failing_gateway_starts:
            self.failing_gateway_starts -= 1
            raise OSError("address already in use")
        handle.leadership = leadership
        return "127.0.0.1", handle.port

    async def info(self, handle: FakeActor, timeout: float | None = None) -> dict[str, Any]:
        if handle.dead.is_set():
            raise RuntimeError(f"{handle.name} is dead")
        if handle.starting is not None:
            await asyncio.wait_for(handle.starting.wait(), timeout)
        info = {"name": handle.name, "node_id": handle.node_id, "pid": 1, "partitions": sorted(handle.loaded)}
        if handle.directory is not None:
            info["directory_id"] = str(handle.directory)
        return info

    async def watch(self, handle: FakeActor) -> None:
        await handle.dead.wait()

    def kill(self, handle: FakeActor) -> None:
        handle.dead.set()

    async def load(self, handle: FakeActor, items: list[tuple[str, int, int]]) -> list[str]:
        if handle.gate is not None:
            await handle.gate.wait()
        if handle.dead.is_set():
            raise RuntimeError(f"{handle.name} died")
        for topic, p, _ in items:
            if self.failing_loads[(topic, p)] > 0:
                self.failing_loads[(topic, p)] -= 1
                raise OSError(f"[Errno 28] No space left on device: {topic}-{p}")
        for topic, p, epoch in items:
            handle.loaded[(topic, p)] = epoch
        return []

    async def unload(self, handle: FakeActor, items: list[TP]) -> None:
        for tp in items:
            handle.loaded.pop(tp, None)

    async def delete(self, handle: FakeActor, items: list[TP]) -> None:
        await self.unload(handle, items)

    async def update_leadership(self, handle: FakeActor, leadership: Leadership, timeout: float) -> None:
        handle.leadership = leadership

    async def apply_replicas(self, handle: FakeActor, push: Any) -> None:
        if handle.dead.is_set() or handle.paused:
            raise RuntimeError(f"{handle.name} does not answer")
        handle.replicas = push

    async def ping(self, handle: FakeActor, timeout: float) -> bool:
        if handle.dead.is_set() or handle.paused:
            raise TimeoutError(f"{handle.name} does not answer")
        if handle.slow is not None:
            await asyncio.wait_for(handle.slow.wait(), timeout)
        return True

    async def shutdown(self, handle: FakeActor, timeout: float) -> None:
        pass

    async def pause(self, node_id: str, pid: int, seconds: float) -> tuple[float, float]:
        return 0.0, seconds
