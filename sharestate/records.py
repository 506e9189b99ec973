"""Record types of the share coordinator shard (`__share_group_state`), made only by the factories here.

Seed 001 §5-2-2 and §6-2-1; Kafka's ShareSnapshotKey/Value and ShareUpdateKey/Value
(share-coordinator/src/main/resources/common/message/*.json).

- ShareSnapshot (group_id, topic_id, partition): the whole durable state of one share partition:
  snapshot epoch, state epoch, leader epoch, start offset, delivery-complete count, timestamps
  and the state batches. Replaying it *replaces* the state. A tombstone deletes the state.
- ShareUpdate (group_id, topic_id, partition, slot): a delta (snapshot epoch, leader epoch, start
  offset or -1 for "unchanged", delivery-complete count, the written state batches) merged into
  the current state on replay. Kafka's update carries no state epoch: only a snapshot changes it.

Why updates have a `slot` in their key (a deviation from Kafka, whose ShareUpdateKey is just
group:topic:partition): Kafka's `__share_group_state` is not compacted; it is pruned up to the
last snapshot's offset (ShareCoordinatorOffsetsManager.lastRedundantOffset). Our internal logs
are compacted, keeping only the latest record per encoded key. With one key for every update of a
partition, compaction would keep only the last update and silently drop the ones between it and
the last snapshot. So an update is keyed by its slot: the number of updates written since the
last snapshot, 0..N-1 (N = share.coordinator.snapshot.update.records.per.snapshot); the N+1-th
write is a snapshot again, and the slots are reused after it.

Why that survives compaction: replay runs in log order and a snapshot replaces the whole state.
Everything written after the latest snapshot of a partition is the latest record of its key
(the snapshot itself, and updates with distinct slots 0..k-1), so compaction keeps all of it
and replay rebuilds exactly the live state. What else survives are updates of older rounds whose
slot was not reused yet (slots k..N-1); they sit *before* the latest snapshot in the log, so
whatever they build is wiped by it. Replaying an update with no base state must therefore not
fail: it is merged onto an empty state, which a later snapshot replaces. A deletion writes the
snapshot tombstone and a tombstone for every slot the partition has used (the shard tracks the
highest), so no update of a deleted partition can come back; replaying an update tombstone
changes nothing. (If the tombstones are themselves dropped after the retention, the values they
superseded are gone already.)
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from kernel.codec import Record, RecordCodec
from sharestate.inflight import RecordState


# The persisted delivery state is the in-flight RecordState (Kafka stores RecordState ids).
DeliveryState = RecordState


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Kafka's PersisterStateBatch: offsets first..last (inclusive) share one state and count."""

    first_offset: int
    last_offset: int
    delivery_state: int  # a DeliveryState value, stored as a plain int as on Kafka's wire
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotKey:
    group_id: str
    topic_id: UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1  # Kafka 4.2 (KIP-1226); -1: not known
    create_timestamp: int = 0
    write_timestamp: int = 0
    state_batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareUpdateKey:
    group_id: str
    topic_id: UUID
    partition: int
    slot: int  # updates since the last snapshot when this one was written (see module docstring)


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: the start offset is not being updated
    delivery_complete_count: int = -1
    state_batches: tuple[StateBatch, ...] = ()


CODEC = RecordCodec("share-coordinator")
CODEC.register(ShareSnapshotKey, ShareSnapshotValue, name="ShareSnapshot")
CODEC.register(ShareUpdateKey, ShareUpdateValue, name="ShareUpdate")


# -- factories --------------------------------------------------------------------------------------


def share_snapshot_record(
    group_id: str,
    topic_id: UUID,
    partition: int,
    *,
    snapshot_epoch: int,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    delivery_complete_count: int,
    create_timestamp: int,
    write_timestamp: int,
    state_batches: tuple[StateBatch, ...] = (),
) -> Record:
    """Kafka's ShareCoordinatorRecordHelpers.newShareSnapshotRecord."""
    return Record(
        ShareSnapshotKey(group_id, topic_id, partition),
        ShareSnapshotValue(
            snapshot_epoch=snapshot_epoch,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            create_timestamp=create_timestamp,
            write_timestamp=write_timestamp,
            state_batches=tuple(state_batches),
        ),
    )


def share_update_record(
    group_id: str,
    topic_id: UUID,
    partition: int,
    slot: int,
    *,
    snapshot_epoch: int,
    leader_epoch: int,
    start_offset: int,
    delivery_complete_count: int,
    state_batches: tuple[StateBatch, ...] = (),
) -> Record:
    """Kafka's ShareCoordinatorRecordHelpers.newShareUpdateRecord, keyed by its slot."""
    return Record(
        ShareUpdateKey(group_id, topic_id, partition, slot),
        ShareUpdateValue(
            snapshot_epoch=snapshot_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            state_batches=tuple(state_batches),
        ),
    )


def share_snapshot_tombstone(group_id: str, topic_id: UUID, partition: int) -> Record:
    """Kafka's newShareStateTombstoneRecord: the share partition's state is deleted."""
    return Record(ShareSnapshotKey(group_id, topic_id, partition), None)


def share_update_tombstone(group_id: str, topic_id: UUID, partition: int, slot: int) -> Record:
    """Removes an update slot from the compacted log; replaying it changes nothing."""
    return Record(ShareUpdateKey(group_id, topic_id, partition, slot), None)
