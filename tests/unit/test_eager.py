"""cluster/eager.py runs a coroutine at once, as Python 3.12's eager tasks do (the channel server
starts each call so): what it must keep is what a Task gave."""

from __future__ import annotations

import asyncio

import pytest

from cluster import eager


def run(coro_fn):
    return asyncio.run(coro_fn())


async def _waiter(future, seen: list):
    """Waits for `future`, noting what it got, or that it was cancelled."""
    try:
        seen.append(await future)
    except asyncio.CancelledError:
        seen.append("cancelled")
        raise


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

    async def main():
        future = asyncio.get_running_loop().create_future()
        outcome = eager.start(_waiter(future, seen))
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


def test_a_cancel_after_its_wait_is_over_is_thrown_in_at_the_resume():
    """The future it waited on is done (its resume scheduled) when the cancel comes: as in a Task,
    the coroutine gets CancelledError there, not the result."""
    seen = []

    async def main():
        future = asyncio.get_running_loop().create_future()
        outcome = eager.start(_waiter(future, seen))
        future.set_result("records")
        assert outcome.cancel() and not outcome.done()  # asked; the coroutine has not ended yet
        for _ in range(3):
            await asyncio.sleep(0)
        assert seen == ["cancelled"] and outcome.cancelled()

    run(main)


def test_a_coroutine_that_catches_the_cancel_ends_with_its_own_result_and_may_still_wait():
    async def body(future):
        try:
            await future
        except asyncio.CancelledError:
            await asyncio.sleep(0.001)  # cleanup that waits: not cancelled again
            return "cleaned up"

    async def main():
        outcome = eager.start(body(asyncio.get_running_loop().create_future()))
        outcome.cancel()
        assert await outcome == "cleaned up"

    run(main)


def test_after_a_bare_yield_an_exception_or_a_cancel_still_reaches_the_outcome():
    async def fails():
        await asyncio.sleep(0)
        raise LookupError("late")

    async def waits():
        await asyncio.sleep(0)
        await asyncio.sleep(10)

    async def main():
        failed = eager.start(fails())
        with pytest.raises(LookupError, match="late"):
            await failed
        waiting = eager.start(waits())
        await asyncio.sleep(0.001)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    run(main)
