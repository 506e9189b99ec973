"""Group commit: whatever queues up while one batch is being written becomes the next batch.

Both the coordinator runtime (records of many operations, one append) and the user-topic
partitions (many Produce requests, one append) run their writes through this: one drain task
per queue, so writes to one partition stay serial and in arrival order, and a batch is exactly
what arrived while the previous fsync was in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class BatchingQueue(Generic[T]):
    def __init__(self, process: Callable[[list[T]], Awaitable[None]], max_batch: int = 1000) -> None:
        self._process = process
        self._max_batch = max_batch
        self._items: list[T] = []
        self._task: asyncio.Task | None = None
        self.paused = False

    def put(self, item: T) -> None:
        self._items.append(item)
        self._kick()

    def take_all(self) -> list[T]:
        """Remove and return everything queued (to fail it when the partition goes away)."""
        items, self._items = self._items, []
        return items

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._kick()

    async def idle(self) -> None:
        """Wait until the batch being processed, if any, is done."""
        if self._task is not None and not self._task.done():
            await asyncio.gather(self._task, return_exceptions=True)

    @property
    def at_rest(self) -> bool:
        """Nothing queued, nothing being processed, not paused: an item put now would be a batch of
        its own, started on the loop's next pass."""
        return not self._items and not self.paused and (self._task is None or self._task.done())

    def __len__(self) -> int:
        return len(self._items)

    def _kick(self) -> None:
        if self._items and not self.paused and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._items and not self.paused:
            batch = self._items[: self._max_batch]
            del self._items[: len(batch)]
            await self._process(batch)
