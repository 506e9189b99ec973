"""A failed append of the controller's metadata puts it back exactly as it was (issue 9: revert is a
snapshot, not a rebuild): every operation's records, written to a full disk, leave topics, the
topic-id index, leader epochs and the producer id counter as before, and the next operation works."""

from __future__ import annotations

import asyncio
import copy
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster.log import LogConfig, PartitionLog
from cluster.metadata import CODEC, ClusterMetadata, Replication, TopicSpec
from cluster.replication.registration import reconcile
from cluster.runtime import CoordinatorRuntime, ManualWakeups, RuntimeConfig, StorageError
from kernel.clock import ManualClock
from tests.full_disk import FullDisk

TP = ("__cluster_metadata", 0)


def state(meta: ClusterMetadata) -> dict:
    return copy.deepcopy(
        {
            "topics": meta.topics,
            "topic_names_by_id": meta.topic_names_by_id,
            "leader_epochs": meta.leader_epochs,
            "next_producer_id": meta.next_producer_id,
            "registrations": meta.registrations,
            "replica_ids": meta.replica_ids,
        }
    )


def runtime(tmp_path, disk: FullDisk) -> CoordinatorRuntime:
    clock = ManualClock(1_000_000)
    return CoordinatorRuntime(
        codec=CODEC,
        shard_factory=ClusterMetadata,
        config=RuntimeConfig(data_dir=tmp_path, log_config=LogConfig(compacted=True, segment_bytes=4096)),
        executor=ThreadPoolExecutor(2),
        clock=clock,
        wakeups=ManualWakeups(clock),
        log_opener=lambda path, cfg: PartitionLog.open(path, cfg, disk),
    )


FAILING = {
    "create a topic": lambda m: m.create_topics([TopicSpec("new", 3)]),
    "create two topics": lambda m: m.create_topics([TopicSpec("kept", 1), TopicSpec("other", 2)]),
    "delete a topic": lambda m: m.delete_topics(["kept"]),
    "grow a replicated topic": lambda m: m.create_partitions("kept", 4, replication=Replication((1, 2, 3), 3)),
    "create a replicated topic": lambda m: m.create_topics([TopicSpec("r", 3)], replication=Replication((1, 2, 3), 3)),
    "bump epochs": lambda m: m.bump_epochs([("kept", 0), ("kept", 1)]),
    "hand out producer ids": lambda m: m.allocate_producer_ids("gateway-0"),
    "register replicated partitions": lambda m: m.register_partitions({("kept", 1): (1, 2, 3)}),
    "register a data directory": lambda m: m.register_directory(uuid.UUID(int=7)),
    "elect a new leader": lambda m: m.change_partitions({("kept", 0): reconcile(m.registrations[("kept", 0)], {2, 3})}),
}


@pytest.mark.parametrize("name", list(FAILING))
def test_a_failed_metadata_append_leaves_the_metadata_exactly_as_before(tmp_path, name):
    async def main():
        disk = FullDisk()
        rt = runtime(tmp_path, disk)
        await rt.load(TP, 0)
        meta = lambda: rt.shard(TP)  # noqa: E731
        await rt.write(TP, None, lambda _t: meta().create_topics([TopicSpec("kept", 2)]))
        await rt.write(TP, None, lambda _t: meta().bump_epochs([("kept", 0)]))
        await rt.write(TP, None, lambda _t: meta().allocate_producer_ids("gateway-0"))
        await rt.write(TP, None, lambda _t: meta().register_partitions({("kept", 0): (1, 2, 3)}))
        before = state(meta())

        with disk.filled(), pytest.raises(StorageError):
            await rt.write(TP, None, lambda _t: FAILING[name](meta()))
        assert state(meta()) == before

        # The next operation runs on the state as it was, and what it writes is what a reload reads.
        outcomes = await rt.write(TP, None, lambda _t: meta().create_topics([TopicSpec("new", 3)]))
        assert [o.name for o in outcomes] == ["new"] and outcomes[0].partitions == 3
        block = await rt.write(TP, None, lambda _t: meta().allocate_producer_ids("gateway-1"))
        assert block.first_producer_id == before["next_producer_id"]
        after = state(meta())
        assert after["leader_epochs"][("kept", 0)] == 1 and ("new", 2) in after["leader_epochs"]
        await rt.unload(TP)
        await rt.load(TP, 1)
        assert state(meta()) == after
        await rt.close()

    asyncio.run(main())


def test_a_failed_append_in_the_middle_of_queued_metadata_operations_fails_only_its_batch(tmp_path):
    async def main():
        disk = FullDisk()
        rt = runtime(tmp_path, disk)
        await rt.load(TP, 0)
        meta = lambda: rt.shard(TP)  # noqa: E731
        await rt.write(TP, None, lambda _t: meta().create_topics([TopicSpec("a", 1)]))
        before = state(meta())
        with disk.filled():
            failed = asyncio.ensure_future(rt.write(TP, None, lambda _t: meta().delete_topics(["a"])))
            with pytest.raises(StorageError):
                await failed
        # Deleting "a" was lost: creating it again is refused, deleting it works.
        again = await rt.write(TP, None, lambda _t: meta().create_topics([TopicSpec("a", 1)]))
        assert again[0].error_code.name == "topic_already_exists"
        assert state(meta()) == before
        deleted = await rt.write(TP, None, lambda _t: meta().delete_topics(["a"]))
        assert deleted[0].error_code.name == "none" and "a" not in meta().topics
        await rt.close()

    asyncio.run(main())
