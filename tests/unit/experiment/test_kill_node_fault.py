"""kill-node: what it hits is known when it is resolved, so its recovery is watched from the start
(in /tmp/nodeloss it was filled in only while injecting: no recovery was ever watched, and the
checks took its leadership moves as never over)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from loadtest.experiment.faults import FaultInjector
from loadtest.experiment.scenario import load_scenario

SCENARIO = load_scenario(Path(__file__).parents[3] / "loadtest" / "scenarios" / "node-loss.toml")
TOPIC_ID = "83a32279-5b80-4de0-ad2f-7c0ab04e2037"


class FakeAdmin:
    async def call(self, op: str, **_: object) -> object:
        if op == "status":
            return {"topics": [{"name": "orders", "topic_id": TOPIC_ID}],
                    "leaders": [{"topic": "orders", "partition": p, "actor": f"partition-leader-{p % 3}"} for p in range(12)]}
        return [{"name": f"partition-leader-{i}", "kind": "partition-leader", "alive": True, "node_id": f"node-{i}"}
                for i in range(3)] + [{"name": "gateway-0", "kind": "gateway", "alive": True, "node_id": "node-0",
                                       "address": "127.0.0.1:9092"}]


class FakeNodes:
    removed: list[int] = []

    def node_id(self, index: int) -> str:
        return f"node-{index}"

    def remove(self, index: int) -> str:
        self.removed.append(index)
        return f"node-{index}"


class FakeCluster:
    nodes = FakeNodes()


def test_kill_node_names_its_actors_and_partitions_when_resolved() -> None:
    injector = FaultInjector(SCENARIO, FakeAdmin(), 11)
    kill = SCENARIO.faults[0]
    injected = asyncio.run(injector.resolve(0, kill, FakeCluster()))
    assert injected.target == "node-2"
    assert injected.actors == ["partition-leader-2"]
    assert sorted(injected.partitions) == sorted(f"orders-{p}" for p in (2, 5, 8, 11))
    assert injected.brokers == []
    assert injected.detail["node_id"] == "node-2"
    asyncio.run(injector.inject(injected, FakeCluster()))
    assert FakeNodes.removed == [2]
