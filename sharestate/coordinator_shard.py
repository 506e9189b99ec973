"""The share coordinator shard: the durable share state one `__share_group_state` partition holds.

Seed 001 §5-2-2 (InitializeShareGroupState, ShareCoordinatorShard.generateShareStateRecord,
handleShareUpdate) and §6-2-1 (readStateAndMaybeUpdateLeaderEpoch); Kafka 4.x
ShareCoordinatorShard, ShareGroupOffset and PersisterStateBatchCombiner decide the details.

Per share partition (group, topic id, partition) the shard keeps a ShareGroupOffset: start
offset, state epoch, leader epoch, delivery-complete count and the state batches of the offsets
at or after the start offset whose state a new share-partition leader must know. Operations
return Result(records, response) and change nothing; `replay` applies the records (the runtime
replays them at once, and again when it loads the partition after a failover).

- Initialize (the group coordinator, before it assigns a new partition): a ShareSnapshot with the
  request's state epoch and start offset and no batches. FENCED_STATE_EPOCH if the stored state
  epoch is higher. Only Initialize changes the state epoch (KAFKA-19456).
- Read (a share-partition leader initializing its SharePartition): the state. An older leader
  epoch is FENCED_LEADER_EPOCH; a newer one is recorded (a ShareUpdate with only the leader
  epoch), so that the old leader's later writes are fenced. -1 neither fences nor records.
  Only Read raises the leader epoch (KAFKA-19456). No state: INVALID_REQUEST (KAFKA-19338).
- Write (after acknowledgements, lock expiry, start-offset moves): fenced by leader epoch and
  state epoch (-1 skips a check); a ShareUpdate holding the written batches, or, once the
  partition has had N updates since its last snapshot, a ShareSnapshot of the merged state.
- Delete: tombstones (records.py explains the update slots). No state is not an error.
- ReadSummary: start offset, state epoch, leader epoch, delivery-complete count; no fencing,
  and an uninitialized partition answers Kafka's defaults rather than an error.

The state value is share_group_offset.py, batch merging batch_combiner.py; this module holds the
operations and their replay.

Kafka keeps the fencing epochs in side maps (leaderEpochMap, stateEpochMap: the maximum ever
replayed) beside the state. Here they are the state's own fields: writes never change them,
Read only raises the leader epoch, Initialize only raises the state epoch and keeps the leader
epoch. So they always equal Kafka's maxima, and they are rebuilt exactly from a compacted log.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kernel.clock import Clock
from kernel.codec import Record
from kernel.result import RequestToken, Result
from kernel.snapshot import TouchedKeys
from sharestate import messages as m
from sharestate.batch_combiner import combine_state_batches
from sharestate.config import ShareCoordinatorConfig
from sharestate.share_group_offset import ShareGroupOffset, SharePartitionKey, empty_base
from sharestate.records import (
    ShareSnapshotKey,
    ShareUpdateKey,
    StateBatch,
    share_snapshot_record,
    share_snapshot_tombstone,
    share_update_record,
    share_update_tombstone,
)


__all__ = ["ShareCoordinatorShard", "ShareGroupOffset", "SharePartitionKey", "combine_state_batches"]


def _valid_batches(batches: tuple[StateBatch, ...]) -> bool:
    return all(0 <= b.first_offset <= b.last_offset for b in batches)


# -- the shard -------------------------------------------------------------------------------------


class ShareCoordinatorShard:
    def __init__(
        self,
        tp: tuple[str, int],
        clock: Clock,
        config: ShareCoordinatorConfig | None = None,
    ) -> None:
        self.tp = tp
        self.clock = clock
        self.config = config or ShareCoordinatorConfig()
        self.touched = TouchedKeys()
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        # ShareUpdates replayed since the partition's last snapshot: the next update's slot.
        self.update_counts: dict[SharePartitionKey, int] = {}
        # The highest update slot with a value in the log: a deletion tombstones 0..highest.
        self.highest_slots: dict[SharePartitionKey, int] = {}

    # -- operations ------------------------------------------------------------------------------

    def initialize_state(
        self, req: m.InitializeShareGroupStateRequest, token: RequestToken | None = None
    ) -> Result[m.InitializeShareGroupStateResponse]:
        """Kafka's ShareCoordinatorShard.initializeState."""
        if req.partition < 0:
            return Result.of(m.InitializeShareGroupStateResponse(ErrorCode.invalid_request, m.NEGATIVE_PARTITION_ID))
        key = SharePartitionKey(req.group_id, req.topic_id, req.partition)
        current = self.states.get(key)
        if current is not None and current.state_epoch > req.state_epoch:
            return Result.of(m.InitializeShareGroupStateResponse(ErrorCode.fenced_state_epoch, m.FENCED_STATE_EPOCH))
        now = self.clock.now_ms()
        record = share_snapshot_record(
            req.group_id,
            req.topic_id,
            req.partition,
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            state_epoch=req.state_epoch,
            # Kafka writes UNINITIALIZED_EPOCH (0) here but keeps fencing on the highest leader
            # epoch it has seen (leaderEpochMap); keeping it in the record keeps that fence
            # across a failover too.
            leader_epoch=m.DEFAULT_LEADER_EPOCH if current is None else current.leader_epoch,
            start_offset=req.start_offset,
            # Kafka: lag cannot be computed before consumption starts (-1); after an altered start
            # offset it counts from there (0).
            delivery_complete_count=(
                m.UNINITIALIZED_DELIVERY_COMPLETE_COUNT if req.start_offset == m.UNINITIALIZED_START_OFFSET else 0
            ),
            create_timestamp=now,
            write_timestamp=now,
        )
        return Result([record], m.InitializeShareGroupStateResponse(ErrorCode.none))

    def read_state(
        self, req: m.ReadShareGroupStateRequest, token: RequestToken | None = None
    ) -> Result[m.ReadShareGroupStateResponse]:
        """Kafka's readStateAndMaybeUpdateLeaderEpoch (seed 001 §6-2-1)."""
        if req.partition < 0:
            return Result.of(m.ReadShareGroupStateResponse(ErrorCode.invalid_request, m.NEGATIVE_PARTITION_ID))
        key = SharePartitionKey(req.group_id, req.topic_id, req.partition)
        current = self.states.get(key)
        if current is None:
            return Result.of(
                m.ReadShareGroupStateResponse(ErrorCode.invalid_request, m.READ_UNINITIALIZED_SHARE_PARTITION)
            )
        if req.leader_epoch != -1 and current.leader_epoch > req.leader_epoch:
            return Result.of(m.ReadShareGroupStateResponse(ErrorCode.fenced_leader_epoch, m.FENCED_LEADER_EPOCH))
        response = m.ReadShareGroupStateResponse(
            ErrorCode.none,
            state_epoch=current.state_epoch,
            start_offset=current.start_offset,
            delivery_complete_count=current.delivery_complete_count,
            state_batches=current.state_batches,
        )
        if req.leader_epoch == -1 or req.leader_epoch == current.leader_epoch:
            return Result.of(response)
        # A newer leader: record its epoch (a write of nothing but the leader epoch).
        record = self._state_record(
            key,
            current,
            leader_epoch=req.leader_epoch,
            start_offset=current.start_offset,
            delivery_complete_count=current.delivery_complete_count,
            state_batches=(),
        )
        return Result([record], response)

    def write_state(
        self, req: m.WriteShareGroupStateRequest, token: RequestToken | None = None
    ) -> Result[m.WriteShareGroupStateResponse]:
        """Kafka's ShareCoordinatorShard.writeState (checks in maybeGetWriteStateError's order)."""
        if req.partition < 0:
            return Result.of(m.WriteShareGroupStateResponse(ErrorCode.invalid_request, m.NEGATIVE_PARTITION_ID))
        if not _valid_batches(req.state_batches):
            return Result.of(m.WriteShareGroupStateResponse(ErrorCode.invalid_request, m.INVALID_STATE_BATCH))
        key = SharePartitionKey(req.group_id, req.topic_id, req.partition)
        current = self.states.get(key)
        if current is None:
            return Result.of(
                m.WriteShareGroupStateResponse(ErrorCode.invalid_request, m.WRITE_UNINITIALIZED_SHARE_PARTITION)
            )
        if req.leader_epoch != -1 and current.leader_epoch > req.leader_epoch:
            return Result.of(m.WriteShareGroupStateResponse(ErrorCode.fenced_leader_epoch, m.FENCED_LEADER_EPOCH))
        if req.state_epoch != -1 and current.state_epoch > req.state_epoch:
            return Result.of(m.WriteShareGroupStateResponse(ErrorCode.fenced_state_epoch, m.FENCED_STATE_EPOCH))
        record = self._state_record(
            key,
            current,
            leader_epoch=current.leader_epoch,  # only Read raises it (KAFKA-19456)
            start_offset=req.start_offset,
            delivery_complete_count=req.delivery_complete_count,
            state_batches=req.state_batches,
        )
        return Result([record], m.WriteShareGroupStateResponse(ErrorCode.none))

    def delete_state(
        self, req: m.DeleteShareGroupStateRequest, token: RequestToken | None = None
    ) -> Result[m.DeleteShareGroupStateResponse]:
        """Kafka's ShareCoordinatorShard.deleteState, plus a tombstone per used update slot."""
        if req.partition < 0:
            return Result.of(m.DeleteShareGroupStateResponse(ErrorCode.invalid_request, m.NEGATIVE_PARTITION_ID))
        key = SharePartitionKey(req.group_id, req.topic_id, req.partition)
        highest_slot = self.highest_slots.get(key, -1)
        if key not in self.states and highest_slot < 0:
            return Result.of(m.DeleteShareGroupStateResponse(ErrorCode.none))
        records = [share_snapshot_tombstone(req.group_id, req.topic_id, req.partition)]
        records += [
            share_update_tombstone(req.group_id, req.topic_id, req.partition, slot) for slot in range(highest_slot + 1)
        ]
        return Result(records, m.DeleteShareGroupStateResponse(ErrorCode.none))

    def read_state_summary(
        self, req: m.ReadShareGroupStateSummaryRequest, token: RequestToken | None = None
    ) -> Result[m.ReadShareGroupStateSummaryResponse]:
        """Kafka's ShareCoordinatorShard.readStateSummary: allowed on an uninitialized partition."""
        if req.partition < 0:
            return Result.of(m.ReadShareGroupStateSummaryResponse(ErrorCode.invalid_request, m.NEGATIVE_PARTITION_ID))
        current = self.states.get(SharePartitionKey(req.group_id, req.topic_id, req.partition))
        if current is None:
            return Result.of(m.ReadShareGroupStateSummaryResponse(ErrorCode.none))
        return Result.of(
            m.ReadShareGroupStateSummaryResponse(
                ErrorCode.none,
                state_epoch=current.state_epoch,
                leader_epoch=current.leader_epoch,
                start_offset=current.start_offset,
                delivery_complete_count=current.delivery_complete_count,
            )
        )

    def _state_record(
        self,
        key: SharePartitionKey,
        current: ShareGroupOffset,
        *,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        state_batches: tuple[StateBatch, ...],
    ) -> Record:
        """Kafka's generateShareStateRecord: an update in the next slot, or, once N updates
        followed the last snapshot, a snapshot of the merged state with the next snapshot epoch."""
        update_count = self.update_counts.get(key, 0)
        if update_count >= self.config.snapshot_update_records_per_snapshot:
            new_start_offset = current.start_offset if start_offset == -1 else start_offset
            now = self.clock.now_ms()
            return share_snapshot_record(
                key.group_id,
                key.topic_id,
                key.partition,
                snapshot_epoch=current.snapshot_epoch + 1,
                state_epoch=current.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=new_start_offset,
                delivery_complete_count=delivery_complete_count,
                create_timestamp=now,
                write_timestamp=now,
                state_batches=combine_state_batches(current.state_batches, state_batches, new_start_offset),
            )
        return share_update_record(
            key.group_id,
            key.topic_id,
            key.partition,
            update_count,
            snapshot_epoch=current.snapshot_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            # The written batches only, combined among themselves (they may overlap).
            state_batches=combine_state_batches((), state_batches, start_offset),
        )

    # -- replay (the only code that changes state) -------------------------------------------------

    def replay(self, record: Record) -> None:
        key = record.key
        if isinstance(key, (ShareSnapshotKey, ShareUpdateKey)):
            # Before a batch first changes a share partition: its state, to put back if the write fails.
            spk = SharePartitionKey(key.group_id, key.topic_id, key.partition)
            self.touched.save(spk, lambda: (self.states.get(spk), self.update_counts.get(spk), self.highest_slots.get(spk)))
        if isinstance(key, ShareSnapshotKey):
            spk = SharePartitionKey(key.group_id, key.topic_id, key.partition)
            if record.value is None:
                self.states.pop(spk, None)
                self.update_counts.pop(spk, None)
                self.highest_slots.pop(spk, None)
            else:
                self.states[spk] = ShareGroupOffset.from_snapshot(record.value)
                self.update_counts[spk] = 0
        elif isinstance(key, ShareUpdateKey):
            if record.value is None:
                return  # a deleted partition's slot leaving the log (records.py)
            spk = SharePartitionKey(key.group_id, key.topic_id, key.partition)
            base = self.states.get(spk) or empty_base(record.value)
            self.states[spk] = base.merge(record.value)
            self.update_counts[spk] = key.slot + 1
            self.highest_slots[spk] = max(self.highest_slots.get(spk, -1), key.slot)
        else:
            raise TypeError(f"share coordinator cannot replay {type(key).__name__}")

    def restore(self, saved: dict[SharePartitionKey, Any]) -> None:
        """Put back the share partitions a failed batch touched, as they were before it."""
        for spk, values in saved.items():
            for table, value in zip((self.states, self.update_counts, self.highest_slots), values):
                if value is None:
                    table.pop(spk, None)
                else:
                    table[spk] = value

    def on_loaded(self) -> Result:
        """Nothing to schedule: share state has no timers (Kafka's cold-partition snapshots are not
        needed here, compaction bounds the log)."""
        return Result()

    # -- views for the cluster, operators and tests --------------------------------------------------

    def state_of(self, key: SharePartitionKey) -> ShareGroupOffset | None:
        return self.states.get(key)

    def durable_view(self) -> dict[str, Any]:
        """Everything replay rebuilds: for comparing a live shard with one rebuilt from its log."""
        return {
            "states": dict(self.states),
            "update_counts": dict(self.update_counts),
            "highest_slots": dict(self.highest_slots),
        }

    def describe(self) -> dict[str, Any]:
        return {
            "share_partitions": len(self.states),
            "state_batches": sum(len(s.state_batches) for s in self.states.values()),
        }
