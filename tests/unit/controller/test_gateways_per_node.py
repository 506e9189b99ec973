"""One gateway per Ray node (issue 11): pinned to its node, dropped with it, one more for a joiner."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cluster.calls.kinds import ActorKind
from cluster.control.controller import Controller
from cluster.config import Config
from cluster.control.gateway_slots import gateway_mode, nodes_without_gateway
from tests.unit.controller.fake_pool import FakeActor, FakeClock
from tests.unit.controller.test_reconciler import SMALL, settle
from tests.unit.controller.test_reconciler_nodes import NodePool


class GatewayNodePool(NodePool):
    """Gateways too start on the node asked for; this process runs on node "b"."""

    def spawn_gateway_on(self, name: str, node_id: int, host: str, port: int, node: str) -> FakeActor:
        actor = self.spawn_gateway(name, node_id, host, port)
        actor.node_id = node
        return actor

    def own_node(self) -> str:
        return "b"


def run(test, tmp_path: Path, nodes: list[str], gateways: str = "auto"):
    async def main() -> None:
        pool, clock = GatewayNodePool(nodes), FakeClock()
        config = Config({**SMALL, "raygroups.gateways": gateways})
        controller = Controller(config, tmp_path, "127.0.0.1", 0, "test", pool=pool, clock=clock)
        addresses = await controller.start()
        try:
            await test(controller, pool, clock, addresses)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def gateway_nodes(controller) -> dict[int, str]:
    return {g.node_id: controller.actors[f"gateway-{g.node_id}"].node_id for g in controller.snapshot().gateways}


def test_auto_is_one_gateway_per_node_on_a_multi_node_cluster_and_one_on_a_single_node():
    assert gateway_mode("auto", ["a", "b"], pinnable=True) == "per-node"
    assert gateway_mode("auto", ["a"], pinnable=True) == 1
    assert gateway_mode("auto", ["a", "b"], pinnable=False) == 1
    assert gateway_mode(3, ["a", "b"], pinnable=True) == 3
    assert gateway_mode("per-node", None, pinnable=False) == 1


def test_the_controllers_node_gets_broker_0():
    assert nodes_without_gateway(["a", "b", "c"], {}, "b") == ["b", "a", "c"]


def test_a_gateway_on_each_node_each_a_broker(tmp_path):
    async def test(controller, pool, clock, addresses):
        assert gateway_nodes(controller) == {0: "b", 1: "a", 2: "c"}
        assert len(addresses) == 3
        brokers = {(g.host, g.port) for g in controller.snapshot().gateways}
        assert len(brokers) == 3  # distinct ports: on one machine every node's IP is the same

    run(test, tmp_path, ["a", "b", "c"])


def test_a_lost_node_takes_its_gateway_out_of_the_map_at_once_and_a_joining_node_gets_one(tmp_path):
    async def test(controller, pool, clock, addresses):
        versions = []
        gateway_c = next(a for a in pool.spawned if a.kind is ActorKind.GATEWAY and a.node_id == "c")
        pool.remove_node("c")
        clock.now += 5  # the next node poll
        async with controller.reconciler.lock:
            await controller.reconciler.step()
        # One pass: no waiting for a restart that could only land on another node.
        assert set(gateway_nodes(controller).values()) == {"a", "b"}
        assert "gateway-2" not in controller.actors
        for actor in pool.spawned:
            if actor.kind is ActorKind.GATEWAY and actor.node_id in ("a", "b") and actor.leadership is not None:
                versions.append(actor.leadership.version)
                assert {g.node_id for g in actor.leadership.gateways} == {0, 1}
        assert versions
        assert sum(1 for a in pool.spawned if a.name == gateway_c.name) == 1  # not restarted
        assert any(e["kind"] == "gateway-dropped" for e in controller.events)

        pool.alive_nodes.append("d")
        clock.now += 5
        await settle(controller)
        assert gateway_nodes(controller) == {0: "b", 1: "a", 3: "d"}

    run(test, tmp_path, ["a", "b", "c"])


def test_a_gateway_that_crashes_on_a_live_node_restarts_there_under_its_broker_id(tmp_path):
    async def test(controller, pool, clock, addresses):
        pool.by_name("gateway-1").dead.set()
        await settle(controller)
        clock.now += 5
        await settle(controller)
        assert gateway_nodes(controller) == {0: "b", 1: "a", 2: "c"}
        assert pool.by_name("gateway-1") is not pool.spawned[0]

    run(test, tmp_path, ["a", "b", "c"])


def test_a_count_still_works_on_many_nodes(tmp_path):
    async def test(controller, pool, clock, addresses):
        assert len(controller.snapshot().gateways) == 2

    run(test, tmp_path, ["a", "b", "c"], gateways=2)
