"""GroupCoordinatorShard.replay_all (coordinator/shard.py), the load's one call per log batch: the same
state as replaying each record alone, and a failed batch's revert still puts back every group it
touched, also when a run of one group's OffsetCommits looks the group up only once."""

from __future__ import annotations

from coordinator.config import GroupCoordinatorConfig
from coordinator.records import GroupMetadataKey, GroupMetadataValue, group_tombstone, offset_commit_record, offset_tombstone
from coordinator.shard import GroupCoordinatorShard
from kernel.clock import ManualClock
from kernel.codec import Record


def shard() -> GroupCoordinatorShard:
    return GroupCoordinatorShard(("__consumer_offsets", 0), ManualClock(0), config=GroupCoordinatorConfig())


def commit(group_id: str, partition: int, offset: int, ts: int = 1) -> Record:
    return offset_commit_record(group_id, "t", partition, offset, -1, "", ts)


BATCH = [
    commit("g1", 0, 1, ts=7), commit("g1", 1, 2), commit("g1", 2, 3), offset_tombstone("g1", "t", 1),
    commit("g2", 0, 5, ts=9), offset_tombstone("g9", "t", 0),
    Record(GroupMetadataKey("g3"), GroupMetadataValue("consumer", 2, "range", None, 11)), commit("g3", 0, 8),
    offset_tombstone("g1", "t", 0), offset_tombstone("g1", "t", 2), commit("g1", 5, 6),
    offset_tombstone("g2", "t", 0), group_tombstone("g2"),
]


def state(s: GroupCoordinatorShard) -> tuple:
    groups = {g: (type(v).__name__, v.state_timestamp) for g, v in s.groups.items()}
    return {g: dict(o) for g, o in s.offsets.items()}, groups


def test_one_call_per_batch_leaves_what_one_call_per_record_leaves():
    whole, alone = shard(), shard()
    whole.replay_all(BATCH)
    for record in BATCH:
        alone.replay(record)
    assert state(whole) == state(alone)
    offsets, groups = state(whole)
    assert {g: {p: v.offset for (_, p), v in o.items()} for g, o in offsets.items()} == {"g1": {5: 6}, "g3": {0: 8}}
    assert groups == {"g1": ("ClassicGroup", 7), "g3": ("ClassicGroup", 11)}


def test_a_failed_batch_is_put_back_for_every_group_it_touched():
    s = shard()
    s.replay_all([commit("g1", 0, 100, ts=3), commit("g2", 0, 200, ts=4)])
    before = state(s)
    s.touched.begin()
    s.replay_all(BATCH)
    s.restore(s.touched.rollback())
    assert state(s) == before
