"""What every simulated world shares (FoundationDB's simulation, small): one event loop that runs
only when the world says, a manual clock and wakeups, a memory disk and an executor whose blocking
work runs when the schedule says, a seeded random schedule and a trace of it; and the loop that
runs a world for a number of steps, checking its invariants after each.

A world subclasses `Harness` and supplies `step()` (one scheduled event) and `check()` (raise
Violation); `run(make, seed, steps, label)` drives it and names the seed and the last steps on the
first broken invariant, so `python -m tests.sim --seed N -v` can replay it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, TypeVar

from cluster.runtime import ManualWakeups
from kernel.clock import ManualClock
from tests.sim.disk import ManualExecutor, MemoryDisk


class Violation(AssertionError):
    pass


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose time is the world's clock: `asyncio.sleep` and `call_later` (a
    persister's backoff, a retry's deadline) fall due when the schedule advances the clock, never
    by the machine's own time passing, so a seed replays exactly."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self._virtual_clock = clock

    def time(self) -> float:
        return self._virtual_clock.now_ms() / 1000

    def quiet(self) -> bool:
        """Nothing is ready to run but the caller (asyncio's own queues: the ready callbacks, and the
        timers due by now, which the next pass would make ready)."""
        if self._ready:
            return False
        return not self._scheduled or self._scheduled[0].when() > self.time()


class Harness:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock(1_000_000)
        self.loop = VirtualTimeLoop(self.clock)
        self.wakeups = ManualWakeups(self.clock)
        self.disk = MemoryDisk()
        self.executor = ManualExecutor()
        self.trace: list[str] = []

    def step(self) -> None:
        raise NotImplementedError

    def check(self) -> None:
        raise NotImplementedError

    # -- driving the loop ------------------------------------------------------------------------

    def _run(self, coroutine: Any) -> Any:
        """Run a coroutine to its end, completing I/O as it needs it (set-up, not the schedule)."""
        task = self.loop.create_task(coroutine)
        while not task.done():
            self.settle()
            if not task.done() and not self.complete_setup_work():
                self.settle()
        return task.result()

    def complete_setup_work(self) -> bool:
        """During set-up: complete the next piece of pending work (blocking I/O here; a world with
        more kinds of pending work adds them); False when there was none."""
        return self.executor.run_next()

    def settle(self) -> None:
        """Run every callback that is ready, and what they make ready, without completing I/O."""
        self.loop.run_until_complete(self._spin())
        self.settled()

    async def _spin(self) -> None:
        # Up to 64 passes of the loop, as many as it takes until nothing is ready: the passes after
        # that would run nothing (the clock does not move meanwhile, so no timer falls due), and
        # skipping them leaves every trace as it was while a step costs a fraction.
        for _ in range(64):
            await asyncio.sleep(0)
            if self.loop.quiet():
                return

    def settled(self) -> None:
        """After the loop settled: a world watches what it needs to here."""

    async def _advance(self, ms: int) -> None:
        self.wakeups.advance(ms)  # due timers enqueue their operations: that needs the running loop

    def advance(self, ms: int) -> None:
        self.trace.append(f"clock +{ms}")
        self.loop.run_until_complete(self._advance(ms))

    def close(self) -> None:
        # Cancel what is left, a few times over: a task waiting on a chain takes a few passes to
        # end, and the router retries once on what looks like a dead actor (a cancellation too).
        for _ in range(8):
            tasks = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            if not tasks:
                break
            for task in tasks:
                task.cancel()
            self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


W = TypeVar("W", bound=Harness)


def run(
    make: Callable[[], W], seed: int, steps: int, label: str = "", finish: Callable[[W], None] | None = None
) -> W:
    """Run one seed, then `finish` (a world's healing, before it closes); raise Violation (with the
    seed and the last steps) on the first broken invariant."""
    world = make()
    n = 0
    at = None
    try:
        for n in range(steps):
            world.step()
            world.check()
        if finish is not None:
            at = "healing"
            finish(world)
    except Violation as exc:
        tail = "\n  ".join(world.trace[-25:])
        raise Violation(f"{label}seed {seed}, {at or f'step {n}'}: {exc}\n  last steps:\n  {tail}") from None
    finally:
        world.close()
    return world
