"""cluster/eager.py runs a coroutine at once, as Python 3.12's eager tasks do (the channel server
starts each call so): what it must keep is what a Task gave."""

from __future__ import annotations

import asyncio

import pytest

from cluster import eager


def run(coro_fn):
    return asyncio.run(coro_fn())


def test_a_coroutine_that_never_waits_is_done_before_start_returns():
    ran = []

    async def body():
        ran.append("ran")
        return 7

    async def main():
        outcome = eager.start(body())
        assert ran == ["ran"] and outcome.done() and outcome.result() == 7

    run(main)


def test_a_waiting_coroutine_is_resumed_by_its_future_with_the_value_or_the_exception():
    async def body(future):
        return await future + 1

    async def main():
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        ok, failed = eager.start(body(first)), eager.start(body(second))
        assert not ok.done() and not failed.done()
        first.set_result(41)
        second.set_exception(ValueError("refused"))
        assert await ok == 42
        with pytest.raises(ValueError, match="refused"):
            await failed

    run(main)


def test_cancelling_the_outcome_cancels_the_wait_and_the_coroutine_sees_it():
    seen = []

    async def body(future):
        try:
            await future
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main():
        future = asyncio.get_running_loop().create_future()
        outcome = eager.start(body(future))
        outcome.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert future.cancelled() and seen == ["cancelled"] and outcome.cancelled()

    run(main)


def test_a_bare_yield_goes_on_as_a_task():
    async def body():
        await asyncio.sleep(0)
        await asyncio.sleep(0.001)
        return "after"

    async def main():
        outcome = eager.start(body())
        assert not outcome.done()
        assert await outcome == "after"

    run(main)


def test_an_exception_before_the_first_wait_is_the_outcome():
    async def body():
        raise KeyError("early")

    async def main():
        outcome = eager.start(body())
        assert outcome.done() and isinstance(outcome.exception(), KeyError)

    run(main)
