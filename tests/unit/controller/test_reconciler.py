"""The controller with a fake actor pool, no Ray: deaths, restarts and failed loads converge."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cluster.control.actor_state import ActorState
from cluster.control.controller import Controller
from cluster.config import Config
from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TopicSpec
from tests.unit.controller.fake_pool import FakeClock, FakePool

SMALL = {
    "offsets.topic.num.partitions": 3,
    "share.coordinator.state.topic.num.partitions": 2,
    "raygroups.coordinators": 2,
    "raygroups.share.coordinators": 1,
    "raygroups.partition.leaders": 2,
}


def run(test, tmp_path: Path, **settings):
    """Start a controller over a fake pool, run `test(controller, pool, clock)`, shut it down."""

    async def main() -> None:
        pool, clock = FakePool(), FakeClock()
        controller = Controller(Config({**SMALL, **settings}), tmp_path, "127.0.0.1", 0, "test", pool=pool, clock=clock)
        await controller.start()
        try:
            await test(controller, pool, clock)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


async def settle(controller: Controller) -> None:
    """Reconcile until actors being started have come up and nothing is left to do now."""
    rec = controller.reconciler
    for _ in range(5):
        await asyncio.sleep(0)  # deaths the watchers have seen
        async with rec.lock:
            await rec.step()
        await rec.idle()


def loaded_where_led(controller: Controller, pool: FakePool) -> None:
    """Every partition is led by a ready actor of its kind which loaded it at the current epoch."""
    epochs = controller._meta().leader_epochs
    assert set(controller.leaders) == set(epochs)
    for tp, name in controller.leaders.items():
        entry = controller.actors[name]
        assert entry.ready, (tp, name)
        assert entry.handle.loaded.get(tp) == epochs[tp], (tp, name, entry.handle.loaded.get(tp), epochs[tp])


def events(controller: Controller, kind: str) -> list[str]:
    return [e["message"] for e in controller.events if e["kind"] == kind]


def test_startup_places_every_partition_on_a_live_actor_of_its_kind(tmp_path):
    async def test(controller, pool, clock):
        loaded_where_led(controller, pool)
        assert {controller.leaders[(CONSUMER_OFFSETS, p)] for p in range(3)} == {"group-coordinator-0", "group-coordinator-1"}
        assert {controller.leaders[(SHARE_GROUP_STATE, p)] for p in range(2)} == {"share-coordinator-0"}
        assert controller.actors["gateway-0"].ready

    run(test, tmp_path)


def test_a_load_that_fails_is_retried_with_backoff_until_it_succeeds(tmp_path):
    # A topic created while the disk is full: its load fails twice, then space returns.
    async def test(controller, pool, clock):
        pool.failing_loads[("full", 0)] = 2
        await controller.create_topics([TopicSpec("full", 1)])
        leader = pool.by_name(controller.leaders[("full", 0)])
        assert ("full", 0) not in leader.loaded
        assert events(controller, "load-failed")
        await settle(controller)  # not due yet
        assert ("full", 0) not in leader.loaded
        clock.now += 0.5
        await settle(controller)  # second try fails too; the next waits longer
        assert ("full", 0) not in leader.loaded
        clock.now += 0.5
        await settle(controller)
        assert ("full", 0) not in leader.loaded
        clock.now += 0.5
        await settle(controller)
        loaded_where_led(controller, pool)
        assert events(controller, "load-retried") == [f"full-0 loaded on {leader.name} after 3 tries"]
        assert not controller.reconciler.failed_loads

    run(test, tmp_path)


def test_a_consumer_offsets_partition_whose_load_raised_comes_back(tmp_path):
    async def test(controller, pool, clock):
        tp = (CONSUMER_OFFSETS, 1)
        pool.failing_loads[tp] = 1
        await controller.move(*tp, "group-coordinator-0" if controller.leaders[tp] != "group-coordinator-0" else "group-coordinator-1")
        assert tp in controller.reconciler.failed_loads
        clock.now += 1
        await settle(controller)
        loaded_where_led(controller, pool)

    run(test, tmp_path)


def test_an_actor_dying_in_the_middle_of_a_move_loses_no_partition(tmp_path):
    async def test(controller, pool, clock):
        tp = ("moving", 0)
        await controller.create_topics([TopicSpec("moving", 1)])
        source = controller.leaders[tp]
        target = next(n for n in ("partition-leader-0", "partition-leader-1") if n != source)
        gate = pool.by_name(target).gate = asyncio.Event()
        move = asyncio.ensure_future(controller.move(*tp, target))
        while controller.leaders[tp] != target:
            await asyncio.sleep(0)
        pool.kill(pool.by_name(target))  # dies while it loads
        gate.set()
        await move
        await settle(controller)
        assert controller.actors[target].state is ActorState.DEAD
        assert controller.leaders[tp] != target
        loaded_where_led(controller, pool)
        assert events(controller, "actor-died") == [f"{target} died"]
        assert any(f"partitions of {target} moved" in m for m in events(controller, "failover"))

    run(test, tmp_path)


def test_the_last_actor_of_a_kind_dying_is_replaced_and_its_partitions_follow(tmp_path):
    async def test(controller, pool, clock):
        pool.kill(pool.by_name("share-coordinator-0"))
        await settle(controller)
        assert controller.actors["share-coordinator-1"].ready
        assert {controller.leaders[(SHARE_GROUP_STATE, p)] for p in range(2)} == {"share-coordinator-1"}
        loaded_where_led(controller, pool)
        assert "2 partitions of share-coordinator-0 moved" in events(controller, "failover")[0]

    run(test, tmp_path)


def test_the_last_actor_of_a_kind_dying_without_replacement_leaves_its_partitions_unavailable(tmp_path):
    async def test(controller, pool, clock):
        pool.kill(pool.by_name("share-coordinator-0"))
        await settle(controller)
        assert not any(tp[0] == SHARE_GROUP_STATE for tp in controller.leaders)
        assert events(controller, "unavailable") == ["no live share-coordinator actor for 2 partitions"]
        gateway = pool.by_name("gateway-0")
        assert not any(tp[0] == SHARE_GROUP_STATE for tp in gateway.leadership.leaders)
        assert "share-coordinator-0" not in gateway.leadership.handles

    run(test, tmp_path, **{"raygroups.actor.replace": False})


def test_an_actor_that_never_starts_is_killed_and_another_started(tmp_path):
    """Ray may never place an actor (its node went away, no resources are free): past
    raygroups.actor.start.timeout.ms it is killed and counted as a failed start, and the next try
    brings a replacement up. Before, it counted as starting for ever."""
    async def test(controller, pool, clock):
        pool.unplaced_spawns = 1
        pool.kill(pool.by_name("share-coordinator-0"))
        await settle(controller)
        unplaced = pool.by_name("share-coordinator-1")
        assert unplaced.starting is not None and unplaced.dead.is_set()  # killed
        assert controller.actors["share-coordinator-1"].state is ActorState.DEAD
        clock.now += 60  # past the failed start's retry delay
        await settle(controller)
        assert controller.actors["share-coordinator-2"].ready
        assert {controller.leaders[(SHARE_GROUP_STATE, p)] for p in range(2)} == {"share-coordinator-2"}
        loaded_where_led(controller, pool)

    run(test, tmp_path, **{"raygroups.actor.start.timeout.ms": 100})


def test_a_dead_gateway_restarts_on_its_port_and_retries_until_it_listens(tmp_path):
    async def test(controller, pool, clock):
        first = pool.by_name("gateway-0")
        pool.failing_gateway_starts = 1  # its port is not free yet
        pool.kill(first)
        await settle(controller)
        entry = controller.actors["gateway-0"]
        assert entry.state is ActorState.DEAD and entry.failed_restarts == 1
        clock.now += 0.5
        await settle(controller)
        assert entry.ready and entry.handle is not first
        assert (entry.gateway.host, entry.gateway.port) == ("127.0.0.1", first.port)
        assert events(controller, "gateway-restarted") == [f"gateway-0 listening again on 127.0.0.1:{first.port}"]
        assert entry.handle.leadership.gateways == [entry.gateway]

    run(test, tmp_path)


def test_status_and_actors_read_as_before(tmp_path):
    async def test(controller, pool, clock):
        status = controller.status()
        assert {t["name"] for t in status["topics"]} == {CONSUMER_OFFSETS, SHARE_GROUP_STATE}
        assert len(status["leaders"]) == 5
        actors = await controller.actors_info()
        assert {a["name"] for a in actors} == {
            "group-coordinator-0", "group-coordinator-1", "share-coordinator-0",
            "partition-leader-0", "partition-leader-1", "gateway-0",
        }
        assert all(a["alive"] for a in actors)
        await controller.kill("partition-leader-0")
        await settle(controller)
        dead = next(a for a in await controller.actors_info() if a["name"] == "partition-leader-0")
        assert dead["alive"] is False and dead["partitions"] == []

    run(test, tmp_path)
