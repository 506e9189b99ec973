"""Worker nodes joining an experiment's cluster, and the gateways' addresses from the READY line."""

from __future__ import annotations

import asyncio

from loadtest.experiment.cluster_process import ready_addresses
from loadtest.experiment.node_join import nodes_without_leaders, wait_spread


def actors(*pairs: tuple[str, str], dead: tuple[str, ...] = ()) -> list[dict]:
    return [{"name": name, "node_id": node, "alive": name not in dead} for name, node in pairs]


def status(leaders: dict[tuple[str, int], str]) -> dict:
    return {"leaders": [{"topic": t, "partition": p, "actor": a} for (t, p), a in leaders.items()]}


def test_ready_line_gives_every_gateway_address() -> None:
    assert ready_addresses("READY 127.0.0.1:9092,10.0.0.2:9092, 10.0.0.3:9093") == \
        "127.0.0.1:9092,10.0.0.2:9092,10.0.0.3:9093"
    assert ready_addresses("READY ") == ""


def test_a_node_whose_actors_lead_nothing_is_missing() -> None:
    pool = actors(("pl-0", "head"), ("pl-1", "w1"), ("pl-2", "w2"))
    assert nodes_without_leaders(["w1", "w2"], pool, {("t", 0): "pl-0", ("t", 1): "pl-1"}) == ["w2"]
    # A dead actor's leadership does not count for its node.
    assert nodes_without_leaders(["w1"], actors(("pl-1", "w1"), dead=("pl-1",)), {("t", 0): "pl-1"}) == ["w1"]


class ScriptedAdmin:
    """Answers `status` from a script of leadership maps, one per poll (the last repeats)."""

    def __init__(self, script: list[dict[tuple[str, int], str]], pool: list[dict]) -> None:
        self.script, self.pool, self.polls = script, pool, 0

    async def call(self, op: str, **_: object) -> object:
        if op == "actors":
            return self.pool
        leaders = self.script[min(self.polls, len(self.script) - 1)]
        self.polls += 1
        return status(leaders)


def test_waits_until_every_node_leads_and_leadership_settles() -> None:
    pool = actors(("pl-0", "head"), ("pl-1", "w1"))
    before = {("t", 0): "pl-0", ("t", 1): "pl-0"}
    after = {("t", 0): "pl-0", ("t", 1): "pl-1"}
    admin = ScriptedAdmin([before, before, after], pool)
    spread = asyncio.run(wait_spread(admin, ["w1"], timeout_s=5, settle_s=0.05, poll_s=0.01))
    assert spread.settled and spread.nodes_without_leaders == []
    assert admin.polls > 3  # it did not stop at the first poll showing the node leading


def test_gives_up_naming_the_nodes_that_lead_nothing() -> None:
    admin = ScriptedAdmin([{("t", 0): "pl-0"}], actors(("pl-0", "head"), ("pl-1", "w1")))
    spread = asyncio.run(wait_spread(admin, ["w1"], timeout_s=0.1, settle_s=0.01, poll_s=0.01))
    assert not spread.settled and spread.nodes_without_leaders == ["w1"]


class ReplicaAdmin:
    """Answers `actors` from a script, one list of actors per poll (the last repeats)."""

    def __init__(self, script: list[list[dict]]) -> None:
        self.script, self.polls = script, 0

    async def call(self, op: str, **_: object) -> object:
        actors = self.script[min(self.polls, len(self.script) - 1)]
        self.polls += 1
        return actors


def host(name: str, node: str, kind: str = "partition-leader", replica: int | None = 0) -> dict:
    out = {"name": name, "node_id": node, "alive": True, "kind": kind}
    if replica is not None:
        out["replica_id"] = replica
    return out


def test_per_node_storage_waits_for_a_partition_leader_on_each_workers_data_directory() -> None:
    from loadtest.experiment.node_join import wait_replicas

    admin = ReplicaAdmin([
        [host("pl-0", "head")],
        [host("pl-0", "head"), host("gc-1", "w1", kind="group-coordinator", replica=1), host("pl-1", "w1", replica=None)],
        [host("pl-0", "head"), host("pl-1", "w1", replica=1), host("pl-2", "w2", replica=2)],
    ])
    assert asyncio.run(wait_replicas(admin, ["w1", "w2"], timeout_s=5, poll_s=0)) == []
    assert admin.polls == 3
    stuck = ReplicaAdmin([[host("pl-0", "head"), host("pl-1", "w1", replica=1)]])
    assert asyncio.run(wait_replicas(stuck, ["w1", "w2"], timeout_s=0.05, poll_s=0.01)) == ["w2"]


def test_the_cluster_command_and_where_the_coordinators_logs_are_follow_the_storage(tmp_path) -> None:
    from loadtest.experiment.cluster_process import ClusterProcess
    from loadtest.experiment.scenario import ClusterSpec

    per_node = ClusterProcess(tmp_path, ClusterSpec(nodes=3), {})
    assert "--data-dir" in per_node.command() and "--shared-data-dir" not in per_node.command()
    assert per_node.coordinator_data_dir == tmp_path / "data" / "node-0"
    shared = ClusterProcess(tmp_path, ClusterSpec(nodes=3, storage="shared"), {})
    assert "--shared-data-dir" in shared.command() and shared.coordinator_data_dir == tmp_path / "data"
    one = ClusterProcess(tmp_path, ClusterSpec(nodes=1), {})
    assert "--data-dir" in one.command() and one.coordinator_data_dir == tmp_path / "data"
