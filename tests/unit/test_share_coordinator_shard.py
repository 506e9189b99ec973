"""The share coordinator shard (seed 001 §5-2-2, §6-2-1; Kafka's ShareCoordinatorShardTest).

A small runtime stand-in: `Ctx.run` replays an operation's records into the shard and appends
their encoded form to an in-memory log, as cluster/runtime/ does. `rebuild` replays a log into
a fresh shard; `compact` keeps the latest record per encoded key in log order, as the compacted
internal logs do (optionally dropping tombstones, as after the tombstone retention).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kernel.clock import ManualClock
from kernel.codec import Record
from sharestate import messages as m
from sharestate.config import ShareCoordinatorConfig
from sharestate.coordinator_shard import (
    ShareCoordinatorShard,
    ShareGroupOffset,
    SharePartitionKey,
    combine_state_batches,
)
from sharestate.records import (
    CODEC,
    DeliveryState,
    ShareSnapshotKey,
    ShareUpdateKey,
    StateBatch,
    share_snapshot_record,
    share_snapshot_tombstone,
    share_update_record,
    share_update_tombstone,
)

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (int(s) for s in DeliveryState)
TOPIC = uuid.UUID("11111111-2222-3333-4444-555555555555")
GROUP = "g"
KEY = SharePartitionKey(GROUP, TOPIC, 0)
T0 = 1_000_000

Log = list[tuple[bytes, bytes | None]]


class Ctx:
    def __init__(self, n: int = 500) -> None:
        self.config = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=n)
        self.clock = ManualClock(T0)
        self.shard = new_shard(self.config, self.clock)
        self.log: Log = []

    def run(self, result) -> Any:
        for record in result.records:
            self.shard.replay(record)
        self.log += CODEC.encode_all(result.records)
        self.last_records: list[Record] = list(result.records)
        return result.response

    # -- requests ------------------------------------------------------------------------------------

    def init(self, state_epoch: int = 0, start_offset: int = -1, partition: int = 0, group: str = GROUP):
        return self.run(self.shard.initialize_state(
            m.InitializeShareGroupStateRequest(group, TOPIC, partition, state_epoch, start_offset)))

    def read(self, leader_epoch: int, partition: int = 0, group: str = GROUP):
        return self.run(self.shard.read_state(m.ReadShareGroupStateRequest(group, TOPIC, partition, leader_epoch)))

    def write(self, batches=(), *, start_offset: int = -1, state_epoch: int = 0, leader_epoch: int = 0,
              dcc: int = 0, partition: int = 0, group: str = GROUP):
        return self.run(self.shard.write_state(m.WriteShareGroupStateRequest(
            group, TOPIC, partition, state_epoch, leader_epoch, start_offset, dcc,
            tuple(StateBatch(*b) for b in batches))))

    def delete(self, partition: int = 0, group: str = GROUP):
        return self.run(self.shard.delete_state(m.DeleteShareGroupStateRequest(group, TOPIC, partition)))

    def summary(self, partition: int = 0, group: str = GROUP, leader_epoch: int = -1):
        return self.run(self.shard.read_state_summary(
            m.ReadShareGroupStateSummaryRequest(group, TOPIC, partition, leader_epoch)))

    def state(self, partition: int = 0, group: str = GROUP) -> ShareGroupOffset | None:
        return self.shard.state_of(SharePartitionKey(group, TOPIC, partition))


def new_shard(config: ShareCoordinatorConfig, clock: ManualClock | None = None) -> ShareCoordinatorShard:
    clock = clock or ManualClock(T0)
    return ShareCoordinatorShard(("__share_group_state", 0), clock, config=config)


def rebuild(log: Log, config: ShareCoordinatorConfig) -> ShareCoordinatorShard:
    shard = new_shard(config)
    for key, value in log:
        shard.replay(CODEC.decode(key, value))
    shard.on_loaded()
    return shard


def compact(log: Log, drop_tombstones: bool = False) -> Log:
    latest = {key: i for i, (key, _) in enumerate(log)}
    return [
        (key, value) for i, (key, value) in enumerate(log)
        if latest[key] == i and not (drop_tombstones and value is None)
    ]


def snap(*, snapshot_epoch=0, state_epoch=0, leader_epoch=0, start_offset=-1, dcc=-1, ts=T0, batches=(),
         partition=0) -> Record:
    return share_snapshot_record(
        GROUP, TOPIC, partition, snapshot_epoch=snapshot_epoch, state_epoch=state_epoch, leader_epoch=leader_epoch,
        start_offset=start_offset, delivery_complete_count=dcc, create_timestamp=ts, write_timestamp=ts,
        state_batches=tuple(StateBatch(*b) for b in batches))


def upd(slot, *, snapshot_epoch=0, leader_epoch=0, start_offset=-1, dcc=0, batches=(), partition=0) -> Record:
    return share_update_record(
        GROUP, TOPIC, partition, slot, snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch,
        start_offset=start_offset, delivery_complete_count=dcc, state_batches=tuple(StateBatch(*b) for b in batches))


def batches_of(state: ShareGroupOffset | None) -> list[tuple[int, int, int, int]]:
    assert state is not None
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches]


def assert_rebuilds(ctx: Ctx) -> None:
    live = ctx.shard.durable_view()
    for log in (ctx.log, compact(ctx.log), compact(ctx.log, drop_tombstones=True)):
        assert rebuild(log, ctx.config).durable_view() == live


# -- records ------------------------------------------------------------------------------------------


def test_records_round_trip_through_the_codec_and_updates_do_not_share_a_key():
    records = [
        snap(batches=[(0, 9, ACKNOWLEDGED, 1)], start_offset=0, dcc=10),
        upd(0, batches=[(10, 12, AVAILABLE, 2)]),
        upd(1),
        share_snapshot_tombstone(GROUP, TOPIC, 0),
        share_update_tombstone(GROUP, TOPIC, 0, 1),
    ]
    encoded = CODEC.encode_all(records)
    assert [CODEC.decode(k, v) for k, v in encoded] == records
    keys = [k for k, _ in encoded[:3]]
    assert len(set(keys)) == 3  # snapshot, slot 0 and slot 1 survive compaction side by side


# -- initialize ---------------------------------------------------------------------------------------


def test_initialize_writes_a_snapshot_with_no_batches():
    ctx = Ctx()
    assert ctx.init(state_epoch=5, start_offset=10) == m.InitializeShareGroupStateResponse(ErrorCode.none)
    assert ctx.last_records == [snap(state_epoch=5, start_offset=10, dcc=0, leader_epoch=0)]
    assert ctx.state() == ShareGroupOffset(0, 5, 0, 10, 0, (), T0, T0)


def test_initialize_with_uninitialized_start_offset_has_unknown_delivery_complete_count():
    ctx = Ctx()
    ctx.init(state_epoch=1)
    assert ctx.last_records == [snap(state_epoch=1, start_offset=-1, dcc=-1)]


def test_initialize_is_fenced_by_a_higher_stored_state_epoch():
    ctx = Ctx()
    ctx.init(state_epoch=5)
    response = ctx.init(state_epoch=4)
    assert response == m.InitializeShareGroupStateResponse(ErrorCode.fenced_state_epoch, m.FENCED_STATE_EPOCH)
    assert ctx.last_records == []
    assert ctx.state().state_epoch == 5


def test_reinitialize_replaces_the_state_with_the_next_snapshot_epoch_and_keeps_the_leader_epoch():
    ctx = Ctx()
    ctx.init(state_epoch=1, start_offset=0)
    ctx.read(leader_epoch=7)
    ctx.write([(0, 4, ACKNOWLEDGED, 1)], state_epoch=1, leader_epoch=7, dcc=5)
    ctx.clock.advance(50)
    assert ctx.init(state_epoch=2, start_offset=100).error_code is ErrorCode.none
    assert ctx.last_records == [snap(snapshot_epoch=1, state_epoch=2, leader_epoch=7, start_offset=100, dcc=0,
                                     ts=T0 + 50)]
    # The old leader stays fenced: its epoch was kept, as Kafka's leaderEpochMap keeps it.
    assert ctx.read(leader_epoch=6).error_code is ErrorCode.fenced_leader_epoch
    assert_rebuilds(ctx)


def test_negative_partition_is_an_invalid_request_everywhere():
    ctx = Ctx()
    assert ctx.init(partition=-1) == m.InitializeShareGroupStateResponse(
        ErrorCode.invalid_request, m.NEGATIVE_PARTITION_ID)
    assert ctx.read(0, partition=-1).error_code is ErrorCode.invalid_request
    assert ctx.write(partition=-1).error_code is ErrorCode.invalid_request
    assert ctx.delete(partition=-1).error_code is ErrorCode.invalid_request
    assert ctx.summary(partition=-1).error_code is ErrorCode.invalid_request
    assert ctx.log == []


# -- read ---------------------------------------------------------------------------------------------


def test_read_of_an_uninitialized_partition_is_an_invalid_request():
    ctx = Ctx()
    assert ctx.read(leader_epoch=1) == m.ReadShareGroupStateResponse(
        ErrorCode.invalid_request, m.READ_UNINITIALIZED_SHARE_PARTITION)
    assert ctx.log == []


def test_read_returns_the_state_and_records_a_newer_leader_epoch_as_an_update():
    ctx = Ctx()
    ctx.init(state_epoch=3, start_offset=0)
    ctx.write([(0, 10, AVAILABLE, 1)], state_epoch=3, dcc=0)
    response = ctx.read(leader_epoch=2)
    assert response == m.ReadShareGroupStateResponse(
        ErrorCode.none, state_epoch=3, start_offset=0, delivery_complete_count=0,
        state_batches=(StateBatch(0, 10, AVAILABLE, 1),))
    # Seed 001 §6-2-1: only the leader epoch changes; start offset and count are the current ones.
    assert ctx.last_records == [upd(1, leader_epoch=2, start_offset=0, dcc=0)]
    assert ctx.state().leader_epoch == 2
    assert batches_of(ctx.state()) == [(0, 10, AVAILABLE, 1)]


def test_read_with_the_same_or_no_leader_epoch_writes_nothing():
    ctx = Ctx()
    ctx.init()
    ctx.read(leader_epoch=2)
    assert ctx.read(leader_epoch=2).error_code is ErrorCode.none
    assert ctx.last_records == []
    assert ctx.read(leader_epoch=-1).error_code is ErrorCode.none
    assert ctx.last_records == []


def test_read_with_an_older_leader_epoch_is_fenced():
    ctx = Ctx()
    ctx.init()
    ctx.read(leader_epoch=5)
    assert ctx.read(leader_epoch=3) == m.ReadShareGroupStateResponse(
        ErrorCode.fenced_leader_epoch, m.FENCED_LEADER_EPOCH)
    assert ctx.last_records == []
    assert ctx.state().leader_epoch == 5


# -- write --------------------------------------------------------------------------------------------


def test_write_of_an_uninitialized_partition_is_an_invalid_request():
    ctx = Ctx()
    assert ctx.write([(0, 10, AVAILABLE, 1)]) == m.WriteShareGroupStateResponse(
        ErrorCode.invalid_request, m.WRITE_UNINITIALIZED_SHARE_PARTITION)
    assert ctx.log == [] and ctx.state() is None


def test_write_is_an_update_holding_only_the_written_batches():
    ctx = Ctx()
    ctx.init(start_offset=0)
    ctx.write([(0, 10, AVAILABLE, 1)], start_offset=0, dcc=0)
    assert ctx.last_records == [upd(0, start_offset=0, dcc=0, batches=[(0, 10, AVAILABLE, 1)])]
    assert ctx.write([(11, 20, AVAILABLE, 1)], start_offset=0, dcc=21) == m.WriteShareGroupStateResponse(ErrorCode.none)
    assert ctx.last_records == [upd(1, start_offset=0, dcc=21, batches=[(11, 20, AVAILABLE, 1)])]
    # Kafka's testSubsequentWriteStateSnapshotEpochUpdatesSuccessfully: equal contiguous batches merge.
    assert ctx.state() == ShareGroupOffset(0, 0, 0, 0, 21, (StateBatch(0, 20, AVAILABLE, 1),), T0, T0)


def test_write_with_an_older_leader_epoch_is_fenced_and_minus_one_is_not_checked():
    ctx = Ctx()
    ctx.init()
    ctx.read(leader_epoch=1)
    assert ctx.write([(0, 3, ACKNOWLEDGED, 1)], leader_epoch=0) == m.WriteShareGroupStateResponse(
        ErrorCode.fenced_leader_epoch, m.FENCED_LEADER_EPOCH)
    assert ctx.last_records == []
    assert ctx.write([(0, 3, ACKNOWLEDGED, 1)], leader_epoch=-1).error_code is ErrorCode.none
    assert batches_of(ctx.state()) == [(0, 3, ACKNOWLEDGED, 1)]


def test_write_with_an_older_state_epoch_is_fenced_and_minus_one_is_not_checked():
    ctx = Ctx()
    ctx.init(state_epoch=1)
    assert ctx.write([(11, 20, AVAILABLE, 1)], state_epoch=0, leader_epoch=5) == m.WriteShareGroupStateResponse(
        ErrorCode.fenced_state_epoch, m.FENCED_STATE_EPOCH)
    assert ctx.last_records == []
    assert ctx.state().leader_epoch == 0 and ctx.state().state_epoch == 1
    assert ctx.write([(11, 20, AVAILABLE, 1)], state_epoch=-1).error_code is ErrorCode.none


def test_write_never_changes_the_leader_or_state_epoch():
    # KAFKA-19456: only Initialize sets the state epoch, only Read the leader epoch.
    ctx = Ctx()
    ctx.init(state_epoch=1)
    ctx.write([(0, 1, AVAILABLE, 1)], state_epoch=4, leader_epoch=9)
    assert ctx.last_records == [upd(0, leader_epoch=0, batches=[(0, 1, AVAILABLE, 1)])]
    assert (ctx.state().state_epoch, ctx.state().leader_epoch) == (1, 0)


def test_write_with_a_malformed_batch_is_an_invalid_request():
    ctx = Ctx()
    ctx.init()
    assert ctx.write([(5, 4, AVAILABLE, 1)]) == m.WriteShareGroupStateResponse(
        ErrorCode.invalid_request, m.INVALID_STATE_BATCH)


# -- merging ------------------------------------------------------------------------------------------


def test_a_batch_inside_another_splits_it():
    ctx = Ctx()
    ctx.init(start_offset=0)
    ctx.write([(0, 10, AVAILABLE, 1)], start_offset=0)
    ctx.write([(3, 5, ACKNOWLEDGED, 1)])
    assert batches_of(ctx.state()) == [(0, 2, AVAILABLE, 1), (3, 5, ACKNOWLEDGED, 1), (6, 10, AVAILABLE, 1)]


def test_batches_below_a_new_start_offset_are_dropped_or_trimmed():
    ctx = Ctx()
    ctx.init(start_offset=0)
    ctx.write([(0, 4, ACKNOWLEDGED, 1), (5, 9, AVAILABLE, 2), (10, 14, ARCHIVED, 3)], start_offset=0)
    ctx.write([], start_offset=7, dcc=5)
    assert ctx.state().start_offset == 7
    assert batches_of(ctx.state()) == [(7, 9, AVAILABLE, 2), (10, 14, ARCHIVED, 3)]
    # Written batches below the start offset are dropped too, in the update record itself.
    ctx.write([(0, 8, ACKNOWLEDGED, 3)], start_offset=8)
    assert ctx.last_records[0].value.state_batches == (StateBatch(8, 8, ACKNOWLEDGED, 3),)
    assert batches_of(ctx.state()) == [(8, 8, ACKNOWLEDGED, 3), (9, 9, AVAILABLE, 2), (10, 14, ARCHIVED, 3)]


def test_start_offset_minus_one_keeps_the_stored_one():
    ctx = Ctx()
    ctx.init(start_offset=20)
    ctx.write([(10, 25, AVAILABLE, 1)], start_offset=-1)
    assert ctx.state().start_offset == 20
    assert batches_of(ctx.state()) == [(20, 25, AVAILABLE, 1)]


def test_the_newer_state_of_an_offset_wins():
    ctx = Ctx()
    ctx.init(start_offset=0)
    ctx.write([(0, 9, AVAILABLE, 1)])  # released after the first delivery
    ctx.write([(0, 9, AVAILABLE, 2)])  # released again after the second
    ctx.write([(2, 3, ACKNOWLEDGED, 2), (8, 12, ARCHIVED, 3)])
    assert batches_of(ctx.state()) == [
        (0, 1, AVAILABLE, 2), (2, 3, ACKNOWLEDGED, 2), (4, 7, AVAILABLE, 2), (8, 12, ARCHIVED, 3)]


def test_a_late_write_cannot_undo_progress_as_in_kafka():
    # PersisterStateBatchCombiner: on overlap the higher delivery count, then the higher state wins,
    # whichever was written last (a repeated or reordered write is harmless).
    ctx = Ctx()
    ctx.init(start_offset=0)
    ctx.write([(0, 9, ACKNOWLEDGED, 2)])
    ctx.write([(0, 9, AVAILABLE, 1)])
    assert batches_of(ctx.state()) == [(0, 9, ACKNOWLEDGED, 2)]


def test_overlapping_batches_within_one_write_are_combined():
    ctx = Ctx()
    ctx.init(start_offset=0)
    ctx.write([(0, 10, AVAILABLE, 1), (5, 15, AVAILABLE, 1), (7, 8, ARCHIVED, 1)])
    assert ctx.last_records[0].value.state_batches == (
        StateBatch(0, 6, AVAILABLE, 1), StateBatch(7, 8, ARCHIVED, 1), StateBatch(9, 15, AVAILABLE, 1))


def test_kafka_non_sequential_batch_updates_keep_the_unacknowledged_middle_batch():
    # Kafka's testNonSequentialBatchUpdates (every write a snapshot): batch 2 is not lost.
    ctx = Ctx(n=0)
    ctx.init(start_offset=0)
    ctx.write([(100, 109, ACQUIRED, 1), (110, 119, ACQUIRED, 2), (120, 129, ACQUIRED, 0)], start_offset=100)
    ctx.write([(100, 109, ACKNOWLEDGED, 1)], start_offset=-1, dcc=10)
    ctx.write([(120, 129, ACKNOWLEDGED, 1)], start_offset=110, dcc=10)
    assert ctx.last_records == [snap(snapshot_epoch=3, start_offset=110, dcc=10,
                                     batches=[(110, 119, ACQUIRED, 2), (120, 129, ACKNOWLEDGED, 1)])]


@pytest.mark.parametrize(
    ("so_far", "new", "start", "expected"),
    [
        ([], [], -1, []),
        ([(0, 5, 0, 1)], [], 3, [(3, 5, 0, 1)]),
        ([(0, 5, 0, 1)], [], 6, []),
        ([(0, 5, 0, 1)], [(6, 9, 0, 1)], -1, [(0, 9, 0, 1)]),  # contiguous and equal: one batch
        ([(0, 5, 0, 1)], [(6, 9, 0, 2)], -1, [(0, 5, 0, 1), (6, 9, 0, 2)]),
        ([(0, 9, 0, 1)], [(0, 9, 2, 1)], -1, [(0, 9, 2, 1)]),  # same count: the further state wins
        ([(0, 9, 2, 1)], [(0, 4, 0, 2)], -1, [(0, 4, 0, 2), (5, 9, 2, 1)]),  # higher count wins
        ([(0, 4, 0, 1)], [(2, 9, 4, 1)], -1, [(0, 1, 0, 1), (2, 9, 4, 1)]),
        ([(2, 9, 4, 1)], [(0, 4, 0, 1)], -1, [(0, 1, 0, 1), (2, 9, 4, 1)]),
        ([(0, 2, 0, 1), (8, 9, 0, 1)], [(3, 7, 0, 1)], -1, [(0, 9, 0, 1)]),
        ([(0, 2, 0, 1), (10, 12, 2, 1)], [], -1, [(0, 2, 0, 1), (10, 12, 2, 1)]),  # gaps stay gaps
    ],
)
def test_combine_state_batches(so_far, new, start, expected):
    combined = combine_state_batches(
        tuple(StateBatch(*b) for b in so_far), tuple(StateBatch(*b) for b in new), start)
    assert combined == tuple(StateBatch(*b) for b in expected)


# -- snapshots every N updates ------------------------------------------------------------------------


def test_every_n_plus_first_write_is_a_snapshot_of_the_merged_state():
    ctx = Ctx(n=2)
    ctx.init(state_epoch=1, start_offset=0)
    ctx.write([(0, 4, ACKNOWLEDGED, 1)], state_epoch=1, dcc=5)
    ctx.write([(5, 9, AVAILABLE, 1)], state_epoch=1, dcc=5)
    assert [type(r.key) for r in ctx.last_records] == [ShareUpdateKey]
    ctx.clock.advance(10)
    ctx.write([(10, 12, ARCHIVED, 2)], start_offset=5, state_epoch=1, dcc=8)
    assert ctx.last_records == [snap(snapshot_epoch=1, state_epoch=1, start_offset=5, dcc=8, ts=T0 + 10,
                                     batches=[(5, 9, AVAILABLE, 1), (10, 12, ARCHIVED, 2)])]
    ctx.write([(13, 13, AVAILABLE, 1)], state_epoch=1, dcc=8)
    assert ctx.last_records == [upd(0, snapshot_epoch=1, dcc=8, batches=[(13, 13, AVAILABLE, 1)])]
    kinds = [("S" if isinstance(CODEC.decode(k, v).key, ShareSnapshotKey) else "U") for k, v in ctx.log]
    assert "".join(kinds) == "SUUSU"
    assert ctx.shard.update_counts[KEY] == 1 and ctx.shard.highest_slots[KEY] == 1


def test_a_leader_epoch_update_takes_a_slot_and_can_be_the_snapshot():
    ctx = Ctx(n=1)
    ctx.init(start_offset=0)
    ctx.write([(0, 3, AVAILABLE, 1)])
    ctx.read(leader_epoch=4)
    assert ctx.last_records == [snap(snapshot_epoch=1, leader_epoch=4, start_offset=0, dcc=0,
                                     batches=[(0, 3, AVAILABLE, 1)])]


def test_with_n_zero_every_write_is_a_snapshot():
    ctx = Ctx(n=0)
    ctx.init(start_offset=0)
    for i in range(3):
        ctx.write([(i, i, ACKNOWLEDGED, 1)])
        assert isinstance(ctx.last_records[0].key, ShareSnapshotKey)
    assert ctx.state().snapshot_epoch == 3
    assert batches_of(ctx.state()) == [(0, 2, ACKNOWLEDGED, 1)]


# -- delete -------------------------------------------------------------------------------------------


def test_delete_tombstones_the_snapshot_and_every_used_update_slot():
    ctx = Ctx(n=3)
    ctx.init(start_offset=0)
    for i in range(5):  # U0 U1 U2 S U0: slots 0..2 used
        ctx.write([(i, i, ACKNOWLEDGED, 1)])
    assert ctx.delete() == m.DeleteShareGroupStateResponse(ErrorCode.none)
    assert ctx.last_records == [
        share_snapshot_tombstone(GROUP, TOPIC, 0),
        share_update_tombstone(GROUP, TOPIC, 0, 0),
        share_update_tombstone(GROUP, TOPIC, 0, 1),
        share_update_tombstone(GROUP, TOPIC, 0, 2),
    ]
    assert ctx.state() is None
    assert ctx.shard.durable_view() == {"states": {}, "update_counts": {}, "highest_slots": {}}
    assert ctx.read(0).error_code is ErrorCode.invalid_request
    assert_rebuilds(ctx)
    assert compact(ctx.log, drop_tombstones=True) == []


def test_delete_of_an_unknown_partition_succeeds_and_writes_nothing():
    ctx = Ctx()
    assert ctx.delete() == m.DeleteShareGroupStateResponse(ErrorCode.none)
    assert ctx.last_records == []


def test_delete_then_initialize_again_starts_afresh():
    ctx = Ctx(n=2)
    ctx.init(start_offset=0)
    ctx.read(leader_epoch=3)
    ctx.write([(0, 9, AVAILABLE, 1)], leader_epoch=3)
    ctx.delete()
    ctx.init(state_epoch=0, start_offset=50)
    assert ctx.state() == ShareGroupOffset(0, 0, 0, 50, 0, (), T0, T0)
    ctx.write([(50, 51, ACKNOWLEDGED, 1)])
    assert ctx.last_records == [upd(0, start_offset=-1, batches=[(50, 51, ACKNOWLEDGED, 1)])]
    assert_rebuilds(ctx)


# -- summary ------------------------------------------------------------------------------------------


def test_summary_reports_the_state_without_fencing_or_recording():
    ctx = Ctx()
    ctx.init(state_epoch=2, start_offset=0)
    ctx.read(leader_epoch=3)
    ctx.write([(0, 4, ACKNOWLEDGED, 1)], state_epoch=2, leader_epoch=3, start_offset=5, dcc=0)
    assert ctx.summary(leader_epoch=1) == m.ReadShareGroupStateSummaryResponse(
        ErrorCode.none, state_epoch=2, leader_epoch=3, start_offset=5, delivery_complete_count=0)
    assert ctx.last_records == []


def test_summary_of_an_uninitialized_partition_gives_kafkas_defaults():
    ctx = Ctx()
    assert ctx.summary() == m.ReadShareGroupStateSummaryResponse(
        ErrorCode.none, state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1)


# -- replay and compaction ----------------------------------------------------------------------------


def test_replaying_the_log_rebuilds_the_state_also_after_compaction():
    ctx = Ctx(n=3)
    ctx.init(state_epoch=1, start_offset=0)
    ctx.read(leader_epoch=1)
    for i in range(9):
        ctx.clock.advance(1)
        ctx.write([(2 * i, 2 * i + 1, ACKNOWLEDGED if i % 2 else AVAILABLE, 1 + i % 3)],
                  state_epoch=1, leader_epoch=1, start_offset=i, dcc=i)
        assert_rebuilds(ctx)
    ctx.init(state_epoch=2, start_offset=100, partition=1)
    ctx.write([(100, 100, ARCHIVED, 1)], state_epoch=2, partition=1)
    assert_rebuilds(ctx)
    compacted = compact(ctx.log)
    assert len(compacted) < len(ctx.log)
    # Stale updates of an older round survive before the latest snapshot, and are harmless.
    kinds = [CODEC.decode(k, v).key for k, v in compacted]
    assert any(isinstance(k, ShareUpdateKey) for k in kinds[:kinds.index(ShareSnapshotKey(GROUP, TOPIC, 0))])


def test_an_update_with_no_base_state_is_merged_onto_an_empty_state_and_a_snapshot_wipes_it():
    shard = new_shard(ShareCoordinatorConfig(3))
    shard.replay(upd(2, snapshot_epoch=4, leader_epoch=1, start_offset=5, dcc=1, batches=[(5, 9, AVAILABLE, 1)]))
    assert shard.state_of(KEY) == ShareGroupOffset(4, 0, 1, 5, 1, (StateBatch(5, 9, AVAILABLE, 1),))
    shard.replay(snap(snapshot_epoch=5, start_offset=0, dcc=0))
    assert shard.state_of(KEY) == ShareGroupOffset(5, 0, 0, 0, 0, (), T0, T0)
    assert shard.update_counts[KEY] == 0 and shard.highest_slots[KEY] == 2


def test_an_update_tombstone_changes_nothing():
    ctx = Ctx()
    ctx.init()
    before = ctx.shard.durable_view()
    ctx.shard.replay(share_update_tombstone(GROUP, TOPIC, 0, 0))
    assert ctx.shard.durable_view() == before


def test_lowering_n_across_a_restart_still_tombstones_every_old_slot():
    ctx = Ctx(n=5)
    ctx.init(start_offset=0)
    for i in range(4):
        ctx.write([(i, i, ACKNOWLEDGED, 1)])
    shard = rebuild(ctx.log, ShareCoordinatorConfig(1))
    result = shard.write_state(m.WriteShareGroupStateRequest(GROUP, TOPIC, 0, 0, 0, -1, 0, ()))
    assert isinstance(result.records[0].key, ShareSnapshotKey)  # 4 updates >= 1
    shard.replay(result.records[0])
    tombstoned = [r.key.slot for r in shard.delete_state(m.DeleteShareGroupStateRequest(GROUP, TOPIC, 0)).records
                  if isinstance(r.key, ShareUpdateKey)]
    assert tombstoned == [0, 1, 2, 3]


def test_replay_refuses_an_unknown_record():
    with pytest.raises(TypeError):
        new_shard(ShareCoordinatorConfig()).replay(Record(object(), None))


def test_operations_change_nothing_by_themselves():
    ctx = Ctx(n=1)
    ctx.init(start_offset=0)
    before = ctx.shard.durable_view()
    shard = ctx.shard
    shard.write_state(m.WriteShareGroupStateRequest(GROUP, TOPIC, 0, 0, 0, 3, 1, (StateBatch(3, 4, 2, 1),)))
    shard.read_state(m.ReadShareGroupStateRequest(GROUP, TOPIC, 0, 9))
    shard.initialize_state(m.InitializeShareGroupStateRequest(GROUP, TOPIC, 0, 9, 9))
    shard.delete_state(m.DeleteShareGroupStateRequest(GROUP, TOPIC, 0))
    assert shard.durable_view() == before


# -- property: random histories against a simple model ------------------------------------------------

PARTITIONS = (0, 1)
offsets = st.integers(0, 30)
batch_st = st.tuples(offsets, st.integers(0, 6), st.sampled_from([AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED]),
                     st.integers(0, 3)).map(lambda t: (t[0], t[0] + t[1], t[2], t[3]))
write_st = st.tuples(st.just("write"), st.sampled_from(PARTITIONS), st.integers(-1, 3), st.integers(-1, 4),
                     st.one_of(st.just(-1), offsets), st.integers(0, 10), st.lists(batch_st, min_size=1, max_size=4))
op_st = st.one_of(
    write_st,
    write_st,
    write_st,
    st.tuples(st.just("init"), st.sampled_from(PARTITIONS), st.integers(0, 3), st.sampled_from([-1, 0, 5, 10, 20])),
    st.tuples(st.just("read"), st.sampled_from(PARTITIONS), st.integers(-1, 4)),
    st.tuples(st.just("delete"), st.sampled_from(PARTITIONS)),
    st.tuples(st.just("summary"), st.sampled_from(PARTITIONS)),
    st.tuples(st.just("compact"), st.booleans()),
    st.tuples(st.just("restart")),
)


def expand(batches) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for b in batches:
        for o in range(b.first_offset, b.last_offset + 1):
            assert o not in out, "batches overlap"
            out[o] = (b.delivery_count, b.delivery_state)
    return out


def check_canonical(state: ShareGroupOffset) -> None:
    bs = state.state_batches
    for a, b in zip(bs, bs[1:]):
        assert a.last_offset < b.first_offset
        assert not (a.last_offset + 1 == b.first_offset
                    and (a.delivery_state, a.delivery_count) == (b.delivery_state, b.delivery_count))
    if state.start_offset != -1:
        assert all(b.first_offset >= state.start_offset for b in bs)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 3), ops=st.lists(op_st, min_size=1, max_size=50))
def test_random_histories_match_the_model_and_rebuild_from_any_compacted_log(n, ops):
    ctx = Ctx(n=n)
    ops = [("init", p, 0, -1) for p in PARTITIONS] + ops  # most histories should write something
    # The model: per partition its epochs, start offset, count and an offset -> (count, state)
    # map over everything written, the higher (count, state) winning, below the start offset gone.
    model: dict[int, dict[str, Any] | None] = {p: None for p in PARTITIONS}
    for op in ops:
        ctx.clock.advance(1)
        kind = op[0]
        if kind == "init":
            _, p, se, so = op
            resp = ctx.init(state_epoch=se, start_offset=so, partition=p)
            cur = model[p]
            if cur is not None and cur["se"] > se:
                assert resp.error_code is ErrorCode.fenced_state_epoch
            else:
                assert resp.error_code is ErrorCode.none
                model[p] = {"se": se, "le": 0 if cur is None else cur["le"], "start": so,
                            "dcc": -1 if so == -1 else 0, "offsets": {}}
        elif kind == "read":
            _, p, le = op
            resp = ctx.read(le, partition=p)
            cur = model[p]
            if cur is None:
                assert resp.error_code is ErrorCode.invalid_request
            elif le != -1 and cur["le"] > le:
                assert resp.error_code is ErrorCode.fenced_leader_epoch
            else:
                assert resp.error_code is ErrorCode.none
                assert (resp.state_epoch, resp.start_offset, resp.delivery_complete_count) == (
                    cur["se"], cur["start"], cur["dcc"])
                assert expand(resp.state_batches) == cur["offsets"]
                if le != -1:
                    cur["le"] = le
        elif kind == "write":
            _, p, se, le, so, dcc, batches = op
            resp = ctx.write(batches, start_offset=so, state_epoch=se, leader_epoch=le, dcc=dcc, partition=p)
            cur = model[p]
            if cur is None:
                assert resp.error_code is ErrorCode.invalid_request
            elif le != -1 and cur["le"] > le:
                assert resp.error_code is ErrorCode.fenced_leader_epoch
            elif se != -1 and cur["se"] > se:
                assert resp.error_code is ErrorCode.fenced_state_epoch
            else:
                assert resp.error_code is ErrorCode.none
                if so != -1:
                    cur["start"] = so
                cur["dcc"] = dcc
                for first, last, state, count in batches:
                    for o in range(first, last + 1):
                        if o not in cur["offsets"] or (count, state) > cur["offsets"][o]:
                            cur["offsets"][o] = (count, state)
                if cur["start"] != -1:
                    cur["offsets"] = {o: v for o, v in cur["offsets"].items() if o >= cur["start"]}
        elif kind == "delete":
            assert ctx.delete(partition=op[1]).error_code is ErrorCode.none
            model[op[1]] = None
        elif kind == "summary":
            resp = ctx.summary(partition=op[1])
            cur = model[op[1]]
            if cur is None:
                assert resp == m.ReadShareGroupStateSummaryResponse(ErrorCode.none)
            else:
                assert (resp.state_epoch, resp.leader_epoch, resp.start_offset, resp.delivery_complete_count) == (
                    cur["se"], cur["le"], cur["start"], cur["dcc"])
        elif kind == "compact":
            ctx.log = compact(ctx.log, drop_tombstones=op[1])
        else:  # restart: a failover, the new leader replays the log
            ctx.shard = rebuild(ctx.log, ctx.config)
            ctx.shard.clock = ctx.clock

        for p in PARTITIONS:
            state, cur = ctx.state(partition=p), model[p]
            if cur is None:
                assert state is None
                continue
            assert state is not None
            check_canonical(state)
            assert (state.state_epoch, state.leader_epoch, state.start_offset, state.delivery_complete_count) == (
                cur["se"], cur["le"], cur["start"], cur["dcc"])
            assert expand(state.state_batches) == cur["offsets"]
            key = SharePartitionKey(GROUP, TOPIC, p)
            assert ctx.shard.update_counts[key] <= n
        assert_rebuilds(ctx)
