"""The gateway's end of the parked-answer channels, without Ray: answers settle their tickets in
any order against the start, a dead coordinator fails what it owed (and the client retries once,
then answers COORDINATOR_NOT_AVAILABLE), a successor under the same name owes nothing of its
predecessor's, and a cancelled caller's late answer is dropped."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode
from ray.exceptions import RayActorError

from cluster.calls import CoordinatorOp as Op
from cluster.calls import Endpoint, Failed
from cluster.clients.coordinator import CoordinatorClient
from cluster.clients.parked_answers import ParkedAnswers


class Stream:
    """One answers_stream: items pushed by the test; `die` ends it as a dead actor's does."""

    def __init__(self) -> None:
        self.items: asyncio.Queue = asyncio.Queue()

    def __aiter__(self):
        return self

    async def __anext__(self):
        item = await self.items.get()
        if isinstance(item, BaseException):
            raise item
        return _ready(item)


async def _ready(value):
    return value


class Handle:
    def __init__(self) -> None:
        self.streams: list[Stream] = []
        self.answers_stream = SimpleNamespace(options=lambda **_: SimpleNamespace(remote=self._open))

    def _open(self, channel):
        self.streams.append(Stream())
        return self.streams[-1]


class Router:
    def __init__(self) -> None:
        self.handles = {"gc-0": Handle()}
        self.refreshes = 0

    def handle(self, actor):
        return self.handles.get(actor)

    def leader(self, topic, partition):
        return ("gc-0", 1)

    async def refresh(self):
        self.refreshes += 1


async def _settled(future):
    await asyncio.sleep(0.01)
    return future.result() if future.done() else "pending"


def test_an_answer_settles_its_ticket_whether_it_comes_before_or_after_the_start():
    async def run():
        router = Router()
        parked = ParkedAnswers(router)
        early, early_answer = parked.expect()
        late, late_answer = parked.expect()
        parked.started(late, "gc-0", "inc-1")
        await asyncio.sleep(0)  # the channel opens
        stream = router.handles["gc-0"].streams[0]
        stream.items.put_nowait(("inc-1", [(early, "early"), (late, "late")]))
        await asyncio.sleep(0.01)
        parked.started(early, "gc-0", "inc-1")  # the start's reply was overtaken by the answer
        result = (await _settled(early_answer), await _settled(late_answer), len(router.handles["gc-0"].streams))
        parked.close()
        return result

    assert asyncio.run(run()) == ("early", "late", 1)


def test_a_dead_coordinator_fails_what_it_owed_and_a_successor_owes_nothing_of_it():
    async def run():
        router = Router()
        parked = ParkedAnswers(router)
        owed, owed_answer = parked.expect()
        parked.started(owed, "gc-0", "inc-1")
        await asyncio.sleep(0)
        router.handles["gc-0"].streams[0].items.put_nowait(RayActorError())
        await asyncio.sleep(0.01)
        # The name now belongs to a restarted actor; a ticket the dead one had started fails too.
        stale, stale_answer = parked.expect()
        parked.started(stale, "gc-0", "inc-1")
        await asyncio.sleep(0)
        router.handles["gc-0"].streams[1].items.put_nowait(("inc-2", []))
        await asyncio.sleep(0.01)
        errors = [type(f.exception()) for f in (owed_answer, stale_answer)]
        parked.close()
        return errors

    assert asyncio.run(run()) == [RayActorError, RayActorError]


def test_a_forgotten_ticket_drops_its_late_answer():
    async def run():
        router = Router()
        parked = ParkedAnswers(router)
        ticket, answer = parked.expect()
        parked.started(ticket, "gc-0", "inc-1")
        parked.forget(ticket)
        await asyncio.sleep(0)
        router.handles["gc-0"].streams[0].items.put_nowait(("inc-1", [(ticket, "late")]))
        await asyncio.sleep(0.01)
        result = answer.done(), parked._waiting
        parked.close()
        return result

    assert asyncio.run(run()) == (False, {})


class ClientRouter(Router):
    """call_leader as the real router's, over a script of what each execute_parked start answers."""

    def __init__(self, starts) -> None:
        super().__init__()
        self.starts = list(starts)
        self.started: list[int] = []

    async def call_leader(self, topic, partition, endpoint, make_item, not_leader):
        assert endpoint is Endpoint.COORDINATOR_PARKED
        ticket = make_item(1).ticket
        self.started.append(ticket)
        start = self.starts.pop(0)
        return start(ticket) if callable(start) else start


def _client_with(starts):
    router = ClientRouter(starts)
    return router, CoordinatorClient(router, 50)


def test_a_coordinator_dying_under_a_parked_join_answers_not_available_and_is_not_asked_again():
    # The join may have run there (its records durable): Kafka's broker never runs a request
    # twice, so the client gets the retriable error and joins again as it chooses.
    async def run():
        def start_and(then):
            def start(ticket):
                stream = router.handles["gc-0"].streams
                asyncio.get_running_loop().call_later(0.01, lambda: stream[-1].items.put_nowait(then(ticket)))
                return ("gc-0", "inc-1")
            return start

        router, client = _client_with([
            start_and(lambda t: RayActorError()),
            start_and(lambda t: ("inc-1", [(t, "joined")])),
        ])
        outcome = await client.group(Op.JOIN, "g", None)
        client.parked.close()
        return outcome, router.refreshes, len(router.started)

    partition = CoordinatorClient(None, 50).partition_for("g")
    assert asyncio.run(run()) == (
        Failed(ErrorCode.coordinator_not_available, f"coordinator of __consumer_offsets-{partition} was lost during the call"),
        1, 1)


def test_an_error_at_the_start_is_the_answer():
    async def run():
        router, client = _client_with([Failed(ErrorCode.coordinator_load_in_progress, "loading")])
        outcome = await client.group(Op.SYNC, "g", None)
        return outcome, client.parked._waiting

    assert asyncio.run(run()) == (Failed(ErrorCode.coordinator_load_in_progress, "loading"), {})


def test_a_cancelled_caller_leaves_no_ticket_behind():
    async def run():
        router, client = _client_with([("gc-0", "inc-1")])
        call = asyncio.ensure_future(client.group(Op.JOIN, "g", None))
        await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        waiting = dict(client.parked._waiting)
        client.parked.close()
        return waiting

    assert asyncio.run(run()) == {}
