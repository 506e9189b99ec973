"""The controller over a fake pool that knows nodes: actors on every node, joins and leaves (issue 11)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from cluster.control.actor_pool import NodeAwarePool
from cluster.calls.kinds import ActorKind
from cluster.control.controller import Controller
from cluster.config import Config
from cluster.metadata import TopicSpec
from tests.unit.controller.fake_pool import FakeActor, FakeClock, FakePool
from tests.unit.controller.test_reconciler import SMALL, loaded_where_led, settle


class NodePool(FakePool):
    """Actors start on the node asked for; nodes join and leave when the test says."""

    def __init__(self, nodes: list[str]) -> None:
        super().__init__()
        self.alive_nodes = list(nodes)

    async def nodes(self) -> list[str]:
        return list(self.alive_nodes)

    def spawn_on(self, kind: ActorKind, name: str, node_id: str) -> FakeActor:
        actor = self.spawn(kind, name)
        actor.node_id = node_id
        return actor

    def remove_node(self, node: str) -> None:
        self.alive_nodes.remove(node)
        for actor in self.spawned:
            if actor.node_id == node:
                actor.dead.set()


def run(test, tmp_path: Path, nodes: list[str], **settings):
    async def main() -> None:
        pool, clock = NodePool(nodes), FakeClock()
        assert isinstance(pool, NodeAwarePool)
        controller = Controller(Config({**SMALL, **settings}), tmp_path, "127.0.0.1", 0, "test", pool=pool, clock=clock)
        await controller.start()
        try:
            await test(controller, pool, clock)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def per_node(controller, kind=ActorKind.PARTITION_LEADER):
    return Counter(controller.actors[n].node_id for tp, n in controller.leaders.items() if controller.actors[n].kind is kind)


async def until_balanced(controller, clock):
    """Passes, time moving past cooldowns, until a rebalance has nothing left to do."""
    for _ in range(20):
        await settle(controller)
        if controller.reconciler._rebalance_at is None:
            return
        clock.now = controller.reconciler._rebalance_at


def test_every_node_runs_an_actor_of_each_kind_and_leads_a_fair_share(tmp_path):
    async def test(controller, pool, clock):
        await controller.create_topics([TopicSpec("t", 12)])
        await settle(controller)
        kinds = Counter((e.kind, e.node_id) for e in controller.actors.values() if e.alive and e.kind is not ActorKind.GATEWAY)
        for kind in (ActorKind.GROUP_COORDINATOR, ActorKind.SHARE_COORDINATOR, ActorKind.PARTITION_LEADER):
            assert {node for k, node in kinds if k is kind} == {"a", "b", "c"}
        assert per_node(controller) == {"a": 4, "b": 4, "c": 4}
        loaded_where_led(controller, pool)

    run(test, tmp_path, ["a", "b", "c"])


def test_a_node_that_joins_gets_actors_then_a_fair_share_in_bounded_steps(tmp_path):
    async def test(controller, pool, clock):
        policy = controller.reconciler.rebalance_policy  # from the settings
        assert (policy.max_moves, policy.cooldown, controller.reconciler.membership.poll_seconds) == (2, 30.0, 5.0)
        await controller.create_topics([TopicSpec("t", 12)])
        await settle(controller)
        before = dict(controller.leaders)
        pool.alive_nodes.append("c")
        clock.now += 5  # the next node poll
        await until_balanced(controller, clock)
        assert per_node(controller) == {"a": 4, "b": 4, "c": 4}
        moved = {tp for tp in before if controller.leaders[tp] != before[tp]}
        assert len([tp for tp in moved if tp[0] == "t"]) == 4
        assert any("node c joined" in e["message"] for e in controller.events)
        loaded_where_led(controller, pool)

    run(test, tmp_path, ["a", "b"], **{"raygroups.balance.max.moves": 2, "raygroups.balance.cooldown.ms": 30_000,
                                       "raygroups.node.poll.ms": 5000})


def test_a_node_that_leaves_moves_exactly_its_partitions(tmp_path):
    async def test(controller, pool, clock):
        await controller.create_topics([TopicSpec("t", 12)])
        await settle(controller)
        before = dict(controller.leaders)
        on_c = {tp for tp, n in before.items() if controller.actors[n].node_id == "c"}
        pool.alive_nodes.remove("c")  # the node is gone before Ray fails its actors' calls
        clock.now += 5
        await until_balanced(controller, clock)
        moved = {tp for tp in before if controller.leaders[tp] != before[tp]}
        assert moved == on_c
        assert set(per_node(controller)) == {"a", "b"}
        assert per_node(controller) == {"a": 6, "b": 6}
        loaded_where_led(controller, pool)

    run(test, tmp_path, ["a", "b", "c"])


def test_a_replacement_actor_takes_its_share_back_at_once_on_one_node(tmp_path):
    """Issue 21: the actor replacing a dead one led nothing (on one node never, on several not until
    the partitions that had failed over were past the balancer's cooldown)."""

    async def test(controller, pool, clock):
        await controller.create_topics([TopicSpec("t", 12)])
        await settle(controller)
        before = Counter(n for tp, n in controller.leaders.items() if tp[0] == "t")
        assert sorted(before.values()) == [6, 6]
        victim, survivor = sorted(before)
        pool.kill(pool.by_name(victim))
        await settle(controller)  # the clock stands still: nothing is past its cooldown
        led = Counter(n for tp, n in controller.leaders.items() if tp[0] == "t")
        assert led[survivor] == 6 and victim not in led
        (replacement,) = set(led) - {survivor}
        assert led[replacement] == 6 and replacement not in before
        loaded_where_led(controller, pool)

    run(test, tmp_path, ["a"], **{"raygroups.balance.max.moves": 4})


def test_a_replacement_actor_on_a_node_takes_its_share_back_without_waiting_out_the_cooldown(tmp_path):
    async def test(controller, pool, clock):
        await controller.create_topics([TopicSpec("t", 12)])
        await settle(controller)
        victim = next(e.name for e in controller.actors.values()
                      if e.kind is ActorKind.PARTITION_LEADER and e.node_id == "b")
        pool.kill(pool.by_name(victim))
        await settle(controller)
        assert per_node(controller) == {"a": 6, "b": 6}
        replacement = {n for tp, n in controller.leaders.items() if tp[0] == "t" and controller.actors[n].node_id == "b"}
        assert replacement and victim not in replacement
        loaded_where_led(controller, pool)

    run(test, tmp_path, ["a", "b"])


class GoingNodePool(NodePool):
    """Node "c" is still listed but takes no actor (Ray fails a creation pinned to a node that is
    going: ActorUnschedulableError)."""

    going = "c"

    def spawn_on(self, kind: ActorKind, name: str, node_id: str) -> FakeActor:
        actor = super().spawn_on(kind, name, node_id)
        if node_id == self.going:
            actor.dead.set()
        return actor


def test_a_node_that_takes_no_actors_delays_only_its_own(tmp_path):
    """Failed starts back off per kind and node: a node that keeps failing them (its backoff grown
    to seconds) does not hold back the actors of a node that joins meanwhile."""

    async def main() -> None:
        pool, clock = GoingNodePool(["a", "c"]), FakeClock()
        controller = Controller(Config(SMALL), tmp_path, "127.0.0.1", 0, "test", pool=pool, clock=clock)
        await controller.start()
        try:
            for _ in range(4):  # c fails its starts again and again: its wait doubles
                clock.now += 10
                await settle(controller)
            rec = controller.reconciler
            assert sum(a.node_id == "c" and a.kind is ActorKind.PARTITION_LEADER for a in pool.spawned) >= 3
            pool.alive_nodes.append("b")
            rec.membership.polled_at = -1e9
            await settle(controller)  # the clock still
            kinds = {e.kind for e in controller.actors.values() if e.ready and e.node_id == "b"}
            assert {ActorKind.GROUP_COORDINATOR, ActorKind.SHARE_COORDINATOR, ActorKind.PARTITION_LEADER} <= kinds
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))
