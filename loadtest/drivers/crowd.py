"""Many members on the asyncio driver with every observation kept: benchmarks and tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

from loadtest.drivers.aio import AsyncioDriver
from loadtest.members.machine import Machine


class Crowd:
    def __init__(self, client_id: str = "raygroups-bench") -> None:
        self.rows: list[dict[str, Any]] = []
        self.driver = AsyncioDriver(sink=self.rows.extend, client_id=client_id)
        self.members: list[Machine] = []

    def start(self, machines: Iterable[Machine]) -> None:
        for machine in machines:
            self.members.append(machine)
            self.driver.start(machine)

    async def until(self, predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.02) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(poll_s)
        return True

    async def stop(self, machines: Iterable[Machine] | None = None, timeout_s: float = 10.0) -> None:
        """Let the members (all of them by default) leave; after all of them, close every connection."""
        await asyncio.gather(*(self.driver.stop(m, timeout_s) for m in (self.members if machines is None else machines)))
        if machines is None:
            await self.driver.close()

    def where(self, kind: str, since_ms: float = 0.0, **equal: Any) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == kind and r["time"] >= since_ms
                and all(r.get(k) == v for k, v in equal.items())]
