"""DelayedFetch: one long poll, shared by Fetch and ShareFetch (Kafka's DelayedFetch and
DelayedShareFetch, both DelayedOperations).

A fetch that cannot complete at once waits up to MaxWaitMs for something that may complete it
(new records on a partition it reads, records becoming available again, min bytes reached),
re-checking on each such event; a gateway may end the wait early through its wake key. The
caller supplies what "complete" means: `try_complete()` does one round of reading (or
acquiring) and says whether the fetch may answer now, and `watched()` names the events worth
waking for, none when nothing can change any more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

_MAX_EARLY_WAKES = 10_000


async def delayed_fetch(
    max_wait_ms: int,
    try_complete: Callable[[], bool],
    watched: Callable[[], Sequence[asyncio.Event]],
    woken: asyncio.Event | None = None,
) -> None:
    """Return once `try_complete()` says so, `woken` is set, nothing is watched, or max_wait_ms passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    while True:
        if try_complete() or (woken is not None and woken.is_set()):
            return
        remaining = deadline - loop.time()
        events = list(watched()) if remaining > 0 else []
        if not events:
            return
        if woken is not None:
            events.append(woken)
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()


class FetchWakers:
    """Wake keys of the long polls waiting here: a gateway that has its answer from another
    leader ends the others' waits by key. A wake may overtake its fetch; it is kept (bounded)."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Event] = {}
        self._early: dict[str, None] = {}

    def register(self, key: str | None) -> asyncio.Event:
        event = asyncio.Event()
        if key is not None:
            if self._early.pop(key, 0) is None:
                event.set()
            self._waiting[key] = event
        return event

    def unregister(self, key: str | None) -> None:
        if key is not None:
            self._waiting.pop(key, None)

    def wake(self, keys: Sequence[str]) -> None:
        for key in keys:
            event = self._waiting.get(key)
            if event is not None:
                event.set()
            else:
                self._early[key] = None
                while len(self._early) > _MAX_EARLY_WAKES:
                    self._early.pop(next(iter(self._early)))
