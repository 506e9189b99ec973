"""Which replica each node's storage is (issue 25): actors that keep logs report their node's data
directory id at start; the controller's metadata gives each directory a replica id once, durably,
and never gives that id to another directory."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from cluster.calls.kinds import ActorKind
from cluster.config import Config
from cluster.control.controller import Controller
from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TopicSpec
from kio.schema.errors import ErrorCode
from tests.unit.controller.fake_pool import FakeActor
from tests.unit.controller.test_reconciler import SMALL, settle
from tests.unit.controller.test_reconciler_nodes import NodePool


class StoragePool(NodePool):
    """Every node has a data directory of its own; actors but gateways report it."""

    def __init__(self, nodes: list[str], directories: dict[str, uuid.UUID]) -> None:
        super().__init__(nodes)
        self.directories = directories

    def spawn(self, kind: ActorKind, name: str) -> FakeActor:
        actor = super().spawn(kind, name)
        actor.directory = self.directories.get(actor.node_id)
        return actor

    def spawn_on(self, kind: ActorKind, name: str, node_id: str) -> FakeActor:
        actor = super().spawn_on(kind, name, node_id)
        actor.directory = self.directories.get(node_id)
        return actor


def run(test, data_dir: Path, pool: StoragePool, **settings) -> None:
    async def main() -> None:
        controller = Controller(Config({**SMALL, **settings}), data_dir, "127.0.0.1", 0, "test", pool=pool)
        await controller.start()
        try:
            await test(controller)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def replica_of(controller) -> dict[str, set[int]]:
    """The replica ids each node's live actors were given, gateways left out."""
    out: dict[str, set[int]] = {}
    for e in controller.actors.values():
        if e.alive and e.kind is not ActorKind.GATEWAY:
            out.setdefault(e.node_id, set()).add(e.replica_id)
    return out


def test_each_node_is_one_replica_and_keeps_it_across_a_controller_restart(tmp_path):
    directories = {n: uuid.uuid4() for n in "abc"}
    seen: dict[str, set[int]] = {}

    async def first(controller):
        await settle(controller)
        seen.update(replica_of(controller))
        assert all(len(ids) == 1 for ids in seen.values())  # one replica a node
        assert sorted(min(ids) for ids in seen.values()) == [0, 1, 2]
        status = controller.status()["replicas"]
        assert [(r["replica_id"], r["nodes"]) for r in status] == sorted(
            (min(ids), [node]) for node, ids in seen.items())
        assert {r["directory_id"] for r in status} == {str(d) for d in directories.values()}
        assert sum(e["kind"] == "replica" for e in controller.events) == 3

    run(first, tmp_path, StoragePool(list("abc"), directories))

    async def again(controller):
        await settle(controller)
        assert replica_of(controller) == seen  # from the metadata log, not handed out anew
        assert not any(e["kind"] == "replica" for e in controller.events)

    run(again, tmp_path, StoragePool(list("abc"), directories))


def test_a_wiped_directory_is_a_new_replica_and_a_shared_one_is_one(tmp_path):
    directories = {n: uuid.uuid4() for n in "ab"}
    ids: dict[str, set[int]] = {}

    async def first(controller):
        await settle(controller)
        ids.update(replica_of(controller))

    run(first, tmp_path, StoragePool(list("ab"), directories))
    # Node b's disk was replaced (a new directory id); node c mounts a's directory (shared storage).
    wiped = {"a": directories["a"], "b": uuid.uuid4(), "c": directories["a"]}

    async def again(controller):
        await settle(controller)
        now = replica_of(controller)
        assert now["a"] == now["c"] == ids["a"]
        assert now["b"] == {2}  # never a used id: 0 and 1 stay the old directories'
        status = {r["replica_id"]: r["nodes"] for r in controller.status()["replicas"]}
        assert status == {min(ids["a"]): ["a", "c"], min(ids["b"]): [], 2: ["b"]}

    run(again, tmp_path, StoragePool(list("abc"), wiped))


def factors(controller) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for (topic, _), registration in controller._meta().registrations.items():
        out.setdefault(topic, set()).add(len(registration.replicas))
    return out


def test_a_cluster_of_three_data_directories_registers_every_partition_with_its_replicas(tmp_path):
    directories = {n: uuid.uuid4() for n in "abc"}

    async def test(controller):
        await settle(controller)
        live = {min(ids) for ids in replica_of(controller).values()}
        outcomes = await controller.create_topics([TopicSpec("auto", 4), TopicSpec("two", 2, replication_factor=2),
                                                   TopicSpec("four", 1, replication_factor=4)])
        assert [(o.error_code, o.replication_factor) for o in outcomes[:2]] == [(ErrorCode.none, 3), (ErrorCode.none, 2)]
        assert outcomes[2].error_code == ErrorCode.invalid_replication_factor
        grown = await controller.create_partitions("two", 3)
        assert (grown.error_code, grown.replication_factor) == (ErrorCode.none, 2)
        # The internal topics at their own factors (offsets 3, share state 2 here), the rest as asked.
        assert factors(controller) == {CONSUMER_OFFSETS: {3}, SHARE_GROUP_STATE: {2}, "auto": {3}, "two": {2}}
        regs = controller._meta().registrations
        assert all(set(r.replicas) <= live for r in regs.values())
        assert len(regs) == 3 + 2 + 4 + 3

    run(test, tmp_path, StoragePool(list("abc"), directories), **{"share.coordinator.state.topic.replication.factor": 2})


def test_nodes_sharing_one_data_directory_keep_one_copy_unregistered(tmp_path):
    shared = uuid.uuid4()

    async def test(controller):
        await settle(controller)
        outcomes = await controller.create_topics([TopicSpec("t", 2), TopicSpec("r2", 1, replication_factor=2)])
        assert (outcomes[0].error_code, outcomes[0].replication_factor) == (ErrorCode.none, 1)
        assert outcomes[1].error_code == ErrorCode.invalid_replication_factor
        assert controller._meta().registrations == {}

    run(test, tmp_path, StoragePool(list("ab"), {"a": shared, "b": shared}))
