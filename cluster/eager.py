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
    it never waited). Cancelling that future cancels the coroutine as cancelling its Task would:
    what it waits on is cancelled, or (if that is already done) CancelledError is thrown in at its
    next step; the future is cancelled once the coroutine ends with it (one that catches it and
    returns has that result)."""
    driver = _Driver(coro, _Outcome(loop=asyncio.get_running_loop()))
    driver.outcome.driver = driver
    driver.step(None)
    return driver.outcome


class _Outcome(asyncio.Future):
    """The coroutine's outcome; its cancel() asks the coroutine, as Task.cancel does."""

    driver: "_Driver | None" = None

    def cancel(self, msg: Any = None) -> bool:
        if self.done() or self.driver is None:
            return False
        self.driver.cancel()
        return True

    def cancelled_by_coroutine(self) -> None:
        super().cancel()


class _Driver:
    __slots__ = ("coro", "outcome", "waiting", "must_cancel")

    def __init__(self, coro: Coroutine[Any, Any, Any], outcome: _Outcome) -> None:
        self.coro = coro
        self.outcome = outcome
        self.waiting: asyncio.Future | None = None
        self.must_cancel = False  # a cancel to throw in at the next step (Task._must_cancel)

    def cancel(self) -> None:
        if self.waiting is not None and self.waiting.cancel():
            return  # it resumes with CancelledError from what it waited on
        self.must_cancel = True

    def step(self, _waited: asyncio.Future | None) -> None:
        self.waiting = None
        outcome = self.outcome
        try:
            if self.must_cancel:
                self.must_cancel = False
                yielded = self.coro.throw(asyncio.CancelledError())
            else:
                yielded = self.coro.send(None)
        except StopIteration as stop:
            outcome.set_result(stop.value)
            return
        except asyncio.CancelledError:
            outcome.cancelled_by_coroutine()
            return
        except (KeyboardInterrupt, SystemExit) as exc:
            outcome.set_exception(exc)
            raise  # as a Task does
        except BaseException as exc:  # noqa: BLE001 - the outcome carries it, as a Task's would
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
        if self.must_cancel and self.waiting.cancel():  # cancelled while it ran
            self.must_cancel = False

    def _copy(self, task: asyncio.Future) -> None:
        outcome = self.outcome
        if task.cancelled():
            outcome.cancelled_by_coroutine()
        elif task.exception() is not None:
            outcome.set_exception(task.exception())
        else:
            outcome.set_result(task.result())


class NotWithin(TimeoutError):
    """`within`'s own timeout, told apart from a TimeoutError the awaitable raised."""


async def within(awaitable: Any, seconds: float | None) -> Any:
    """`asyncio.wait_for` that needs no Task of its caller's (from Python 3.12 wait_for is built on
    `asyncio.timeout`, which does): the awaitable's result, or NotWithin (a TimeoutError) once
    `seconds` pass; the awaitable is cancelled whenever it is not done by then, this wait
    abandoned (cancelled) included."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait([task], timeout=seconds)
    finally:
        if not task.done():
            task.cancel()
    if not done:
        raise NotWithin(f"not done within {seconds} s")
    return task.result()
