"""The one long poll of Fetch and ShareFetch, without Ray or logs."""

from __future__ import annotations

import asyncio

from cluster.delayed_fetch import FetchWakers, delayed_fetch


def test_it_completes_at_once_when_it_can_and_re_checks_on_each_watched_event():
    async def main():
        checks: list[int] = []
        appended = [asyncio.Event()]  # replaced on each signal, as partitions and hosts do
        ready = [False]

        def try_complete() -> bool:
            checks.append(1)
            return ready[0]

        def signal() -> None:
            appended[0].set()
            appended[0] = asyncio.Event()

        waiting = asyncio.ensure_future(delayed_fetch(60_000, try_complete, lambda: [appended[0]]))
        await asyncio.sleep(0.01)
        assert not waiting.done() and len(checks) == 1
        signal()  # something changed but not enough: it waits on
        await asyncio.sleep(0.01)
        assert not waiting.done() and len(checks) == 2
        ready[0] = True
        signal()
        await asyncio.wait_for(waiting, 5)
        assert len(checks) == 3
        assert await asyncio.wait_for(delayed_fetch(60_000, lambda: True, lambda: []), 1) is None

    asyncio.run(main())


def test_it_ends_at_max_wait_when_nothing_is_watched_or_when_woken():
    async def main():
        loop = asyncio.get_running_loop()
        started = loop.time()
        await delayed_fetch(50, lambda: False, lambda: [asyncio.Event()])
        assert loop.time() - started >= 0.045
        await asyncio.wait_for(delayed_fetch(60_000, lambda: False, lambda: []), 1)  # nothing can change
        wakers = FetchWakers()
        woken = wakers.register("k")
        waiting = asyncio.ensure_future(delayed_fetch(60_000, lambda: False, lambda: [asyncio.Event()], woken))
        await asyncio.sleep(0)
        wakers.wake(["k"])
        await asyncio.wait_for(waiting, 5)

    asyncio.run(main())


def test_a_wake_that_overtakes_its_fetch_is_kept():
    async def main():
        wakers = FetchWakers()
        wakers.wake(["early"])
        assert wakers.register("early").is_set()
        assert not wakers.register("other").is_set()
        assert not wakers.register(None).is_set()

    asyncio.run(main())
