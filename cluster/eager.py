"""Run a coroutine at once, to its first wait, instead of as a Task on the loop's next pass.

Python 3.12's eager tasks (`asyncio.eager_task_factory`) do this; we run on 3.11. The channel
server starts each call to an actor so (channels/server.py): a call whose answer is ready without
waiting (a heartbeat on a partition at rest: runtime.submit's at_once) is answered in the pass that
read it, where a Task started it one pass later and cost its creation and an entry in asyncio's
task WeakSet. The two together halved what a heartbeat's hop to its coordinator adds to the
gateway's own round trip (docs/performance.md, issue 24).

The coroutine is resumed by the callback of the future it waits on, as a Task resumes it; one that
yields anything but a future (a bare `yield`: `sleep(0)`) goes on as a Task from there. What a
Task gives that this does not: `asyncio.current_task()` (so no `asyncio.timeout`, nor `wait_for`
from 3.12: `within` below instead) and a context of its own. The gateway's handlers run the same
way (gateway/server.py, whose `_step` also coalesces the connection's answers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def start(coro: Coroutine[Any, Any, Any]) -> asyncio.Future:
    """Run `coro` now, up to its first wait; the future returned holds its outcome (done already if
    it never waited). Cancelling that future cancels what the coroutine waits on, as cancelling a
    Task does: the coroutine sees CancelledError there."""
    outcome = asyncio.get_running_loop().create_future()
    _Driver(coro, outcome).step(None)
    return outcome


class _Driver:
    __slots__ = ("coro", "outcome", "waiting", "watched")

    def __init__(self, coro: Coroutine[Any, Any, Any], outcome: asyncio.Future) -> None:
        self.coro = coro
        self.outcome = outcome
        self.waiting: asyncio.Future | None = None
        self.watched = False  # whether a cancellation of the outcome reaches the coroutine yet

    def step(self, _waited: asyncio.Future | None) -> None:
        self.waiting = None
        outcome = self.outcome
        try:
            yielded = self.coro.send(None)
        except StopIteration as stop:
            if not outcome.done():
                outcome.set_result(stop.value)
            return
        except asyncio.CancelledError:
            outcome.cancel()
            return
        except Exception as exc:  # noqa: BLE001 - the outcome carries it, as a Task's would
            if not outcome.done():
                outcome.set_exception(exc)
            return
        if getattr(yielded, "_asyncio_future_blocking", False):
            yielded._asyncio_future_blocking = False  # what a Task does with an awaited future
            yielded.add_done_callback(self.step)
            self.waiting = yielded
        else:
            # A bare yield: a Task resumes it from here (its first send(None) is what the yield expects).
            task = asyncio.ensure_future(self.coro)
            task.add_done_callback(self._copy)
            self.waiting = task
        if outcome.cancelled():  # cancelled while it ran: it sees the cancellation at this wait
            self.waiting.cancel()
        elif not self.watched:
            self.watched = True
            outcome.add_done_callback(self._cancelled)

    def _cancelled(self, outcome: asyncio.Future) -> None:
        if outcome.cancelled() and self.waiting is not None:
            self.waiting.cancel()

    def _copy(self, task: asyncio.Future) -> None:
        outcome = self.outcome
        if outcome.done():
            return
        if task.cancelled():
            outcome.cancel()
        elif task.exception() is not None:
            outcome.set_exception(task.exception())
        else:
            outcome.set_result(task.result())


async def within(awaitable: Any, seconds: float | None) -> Any:
    """`asyncio.wait_for` that needs no Task of its caller's (from Python 3.12 wait_for is built on
    `asyncio.timeout`, which does): the awaitable's result, or TimeoutError once `seconds` pass,
    the awaitable then cancelled."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait([task], timeout=seconds)
    finally:
        if not task.done():
            task.cancel()
    if not done:
        raise TimeoutError(f"not done within {seconds} s")
    return task.result()
