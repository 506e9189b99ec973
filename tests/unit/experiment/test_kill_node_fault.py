"""kill-node: what it hits is known when it is resolved, so its recovery is watched from the start
(in /tmp/nodeloss it was filled in only while injecting: no recovery was ever watched, and the
checks took its leadership moves as never over); and it is over only once the controller has moved
the lost actors' partitions (a shortened node-loss run took answers of the dying leader, in the
second before Ray saw it gone, as its recovery, and the checker then saw a double acquisition)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from loadtest.experiment import faults
from loadtest.experiment.faults import FaultInjector
from loadtest.experiment.recovery import RecoveryWatch
from loadtest.experiment.scenario import load_scenario

SCENARIO = load_scenario(Path(__file__).parents[3] / "loadtest" / "scenarios" / "node-loss.toml")
TOPIC_ID = "83a32279-5b80-4de0-ad2f-7c0ab04e2037"


class FakeAdmin:
    """The controller moves the lost node's partitions (to partition-leader-3) on the third status
    asked after the node was removed."""

    def __init__(self) -> None:
        self.asked_after_removal = 0

    async def call(self, op: str, **_: object) -> object:
        if op == "status":
            if FakeNodes.removed:
                self.asked_after_removal += 1
            moved = self.asked_after_removal >= 3
            leader = lambda p: "partition-leader-3" if moved and p % 3 == 2 else f"partition-leader-{p % 3}"
            return {"topics": [{"name": "orders", "topic_id": TOPIC_ID}],
                    "leaders": [{"topic": "orders", "partition": p, "actor": leader(p)} for p in range(12)]}
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


def test_kill_node_names_its_actors_and_partitions_when_resolved(monkeypatch) -> None:
    monkeypatch.setattr(faults, "MOVE_POLL_S", 0.0)
    FakeNodes.removed.clear()
    admin = FakeAdmin()
    injector = FaultInjector(SCENARIO, admin, 11)
    kill = SCENARIO.faults[0]
    injected = asyncio.run(injector.resolve(0, kill, FakeCluster()))
    assert injected.target == "node-2"
    assert injected.actors == ["partition-leader-2"]
    assert sorted(injected.partitions) == sorted(f"orders-{p}" for p in (2, 5, 8, 11))
    assert injected.brokers == []
    assert injected.detail["node_id"] == "node-2"
    asyncio.run(injector.inject(injected, FakeCluster()))
    assert FakeNodes.removed == [2]
    # Over when the controller named other leaders, not when the node was removed.
    assert admin.asked_after_removal == 3 and injected.ended_ms is not None


def test_a_node_loss_that_never_moves_its_partitions_is_a_fault_error(monkeypatch) -> None:
    monkeypatch.setattr(faults, "MOVE_POLL_S", 0.0)
    FakeNodes.removed.clear()
    injector = FaultInjector(SCENARIO, FakeAdmin(), 11)
    injected = asyncio.run(injector.resolve(0, SCENARIO.faults[0], FakeCluster()))
    injected.actors = ["partition-leader-2", "partition-leader-3"]  # the "new" leader is lost too
    assert asyncio.run(injector.led_elsewhere(injected, timeout_s=0.05)) is None


def test_no_success_counts_as_a_recovery_before_the_fault_is_over() -> None:
    rows = []
    watch = RecoveryWatch(rows.append)
    watch.watch(0, started_ms=1000, since_ms=float("inf"), groups=[], partitions=["orders-2"], share_partitions=[],
                brokers=[])
    watch.observe([{"kind": "produce", "topic": "orders", "partition": 2, "time": 1500, "request_time": 1400}])
    assert rows == []  # the dying leader answered: not a recovery
    watch.count_from(0, 2000)
    watch.observe([{"kind": "produce", "topic": "orders", "partition": 2, "time": 2100, "request_time": 1900}])
    assert rows == []  # asked before the partitions moved
    watch.observe([{"kind": "produce", "topic": "orders", "partition": 2, "time": 2300, "request_time": 2200}])
    assert [(r["target"], r["latency_ms"]) for r in rows] == [("orders-2", 1300)]
