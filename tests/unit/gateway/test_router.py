"""The router without Ray: batching per actor and tick, streaming answers, retry on a stale map."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode
from ray.exceptions import RayActorError

from cluster.calls import Endpoint
from cluster.leadership import Leadership
from cluster.clients.routing import NoLeader, Router


class Method:
    """An actor method as Ray shows it: `.remote(items)` gives something to await."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.batches: list[list] = []

    def remote(self, items):
        self.batches.append(list(items))

        async def reply():
            return self.answer(items)

        return reply()


class Actor:
    def __init__(self, answer) -> None:
        self.produce = Method(answer)


class Controller:
    def __init__(self, leaderships) -> None:
        self.leaderships = list(leaderships)
        self.leadership = SimpleNamespace(remote=self._next)

    async def _next(self):
        return self.leaderships.pop(0)


def leadership(version: int, leaders: dict, handles: dict) -> Leadership:
    return Leadership(version, "c", [], {}, leaders, handles)


def echo(items):
    return [f"{topic}-{p}@{epoch}:{payload}" for topic, p, epoch, payload in items]


def test_calls_to_one_actor_in_one_tick_travel_in_one_ray_call():
    actor = Actor(echo)
    router = Router(None, leadership(1, {("t", 0): ("a", 3), ("t", 1): ("a", 3)}, {"a": actor}))

    async def main():
        return await asyncio.gather(*(
            router.call_leader("t", p, Endpoint.PRODUCE, lambda epoch, p=p: ("t", p, epoch, "x"), lambda r: False)
            for p in (0, 1, 0)
        ))

    assert asyncio.run(main()) == ["t-0@3:x", "t-1@3:x", "t-0@3:x"]
    assert len(actor.produce.batches) == 1 and len(actor.produce.batches[0]) == 3


def test_a_leader_that_no_longer_leads_refreshes_the_map_and_the_call_is_retried_at_the_new_leader():
    old = Actor(lambda items: ["not leader" for _ in items])
    new = Actor(echo)
    moved = leadership(2, {("t", 0): ("b", 4)}, {"a": old, "b": new})
    router = Router(Controller([moved]), leadership(1, {("t", 0): ("a", 3)}, {"a": old}))
    answer = asyncio.run(
        router.call_leader("t", 0, Endpoint.PRODUCE, lambda epoch: ("t", 0, epoch, "x"), lambda r: r == "not leader")
    )
    assert answer == "t-0@4:x" and router.refreshes == 1


def test_a_dead_actor_refreshes_the_map_and_no_leader_after_that_raises_no_leader():
    def dead(items):
        raise RayActorError()

    gone = Actor(dead)
    router = Router(Controller([leadership(2, {}, {})] * 2), leadership(1, {("t", 0): ("a", 3)}, {"a": gone}))
    with pytest.raises(NoLeader):
        asyncio.run(router.call_leader("t", 0, Endpoint.PRODUCE, lambda epoch: ("t", 0, epoch, "x"), lambda r: False))


def test_an_older_map_never_replaces_a_newer_one_and_replaced_actors_lose_their_batchers():
    a1, a2 = Actor(echo), Actor(echo)
    router = Router(None, leadership(5, {("t", 0): ("a", 1)}, {"a": a1}))
    asyncio.run(router.call_leader("t", 0, Endpoint.PRODUCE, lambda e: ("t", 0, e, "x"), lambda r: False))
    router.update(leadership(4, {}, {}))
    assert router.leader("t", 0) == ("a", 1)
    router.update(leadership(6, {("t", 0): ("a", 2)}, {"a": a2}))
    asyncio.run(router.call_leader("t", 0, Endpoint.PRODUCE, lambda e: ("t", 0, e, "x"), lambda r: False))
    assert len(a1.produce.batches) == 1 and len(a2.produce.batches) == 1


def test_a_not_leader_answer_stands_when_the_map_has_not_changed():
    actor = Actor(lambda items: [ErrorCode.not_leader_or_follower for _ in items])
    same = leadership(1, {("t", 0): ("a", 3)}, {"a": actor})
    router = Router(Controller([same]), same)
    answer = asyncio.run(router.call_leader("t", 0, Endpoint.PRODUCE, lambda e: ("t", 0, e, "x"), lambda r: r != "ok"))
    assert answer == ErrorCode.not_leader_or_follower and len(actor.produce.batches) == 1


class Handle(Actor):
    """An actor handle as Ray gives it: a map pulled or pushed through Ray holds new handle
    objects for the same actor, equal by actor id (Ray's ActorHandle.__eq__)."""

    def __init__(self, actor_id: str, answer) -> None:
        super().__init__(answer)
        self.actor_id = actor_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handle) and other.actor_id == self.actor_id

    __hash__ = None  # type: ignore[assignment]


def test_a_new_map_naming_the_same_actor_through_a_new_handle_keeps_its_link():
    # The bug this guards: links were compared by identity, so every map update closed every
    # link, and with it every call under way on the actor's channel, which was then run again.
    first = Handle("A", echo)
    router = Router(None, leadership(1, {("t", 0): ("a", 1)}, {"a": first}))
    link = router.link("a")
    router.update(leadership(2, {("t", 0): ("a", 1), ("t", 1): ("a", 1)}, {"a": Handle("A", echo)}))
    assert router.link("a") is link
    router.update(leadership(3, {("t", 0): ("a", 1)}, {"a": Handle("A-restarted", echo)}))
    assert router.link("a") is not link


def test_a_call_whose_actor_died_under_it_is_not_run_again_at_the_new_leader():
    # It may have run (its records durable, its answer lost): the client gets the retriable
    # error and sends again as it chooses, as with Kafka.
    def died(items):
        raise RayActorError()

    old, new = Actor(died), Actor(echo)
    moved = leadership(2, {("t", 0): ("b", 4)}, {"b": new})
    router = Router(Controller([moved]), leadership(1, {("t", 0): ("a", 3)}, {"a": old}))
    with pytest.raises(NoLeader):
        asyncio.run(router.call_leader("t", 0, Endpoint.PRODUCE, lambda e: ("t", 0, e, "x"), lambda r: False))
    assert new.produce.batches == [] and router.leader("t", 0) == ("b", 4)


def test_a_call_with_no_live_actor_to_send_to_is_sent_to_the_leader_the_refreshed_map_names():
    new = Actor(echo)
    moved = leadership(2, {("t", 0): ("b", 4)}, {"b": new})
    router = Router(Controller([moved]), leadership(1, {("t", 0): ("a", 3)}, {}))
    answer = asyncio.run(router.call_leader("t", 0, Endpoint.PRODUCE, lambda e: ("t", 0, e, "x"), lambda r: False))
    assert answer == "t-0@4:x"


def test_the_callers_own_cancellation_is_not_taken_for_a_lost_actor():
    async def never(items):
        await asyncio.Event().wait()

    class Slow:
        def __init__(self) -> None:
            self.produce = SimpleNamespace(remote=lambda items: never(items))

    router = Router(Controller([]), leadership(1, {("t", 0): ("a", 3)}, {"a": Slow()}))

    async def main():
        task = asyncio.ensure_future(
            router.call_leader("t", 0, Endpoint.PRODUCE, lambda e: ("t", 0, e, "x"), lambda r: False)
        )
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return router.refreshes

    assert asyncio.run(main()) == 0
