"""The state of one share partition as the share coordinator holds it after replay (Kafka 4.x
SharePartitionKey, ShareGroupOffset): built from a ShareSnapshot, advanced by each ShareUpdate."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from uuid import UUID

from sharestate import messages as m
from sharestate.batch_combiner import combine_state_batches
from sharestate.records import ShareSnapshotValue, ShareUpdateValue, StateBatch


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """Kafka's SharePartitionKey: one share group's view of one topic partition."""

    group_id: str
    topic_id: UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """Kafka's ShareGroupOffset: the state of one share partition after replay."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...] = ()
    create_timestamp: int = 0
    write_timestamp: int = 0

    @staticmethod
    def from_snapshot(value: ShareSnapshotValue) -> "ShareGroupOffset":
        return ShareGroupOffset(
            snapshot_epoch=value.snapshot_epoch,
            state_epoch=value.state_epoch,
            leader_epoch=value.leader_epoch,
            start_offset=value.start_offset,
            delivery_complete_count=value.delivery_complete_count,
            state_batches=tuple(value.state_batches),
            create_timestamp=value.create_timestamp,
            write_timestamp=value.write_timestamp,
        )

    def merge(self, update: ShareUpdateValue) -> "ShareGroupOffset":
        """Kafka's ShareCoordinatorShard.merge: an update applied to this state.

        -1 start offset or leader epoch means "unchanged". Snapshot epoch, state epoch and the
        timestamps stay (an update carries no time; only snapshots do).
        """
        start_offset = self.start_offset if update.start_offset == -1 else update.start_offset
        return dataclasses.replace(
            self,
            leader_epoch=self.leader_epoch if update.leader_epoch == -1 else update.leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=update.delivery_complete_count,
            state_batches=combine_state_batches(self.state_batches, update.state_batches, start_offset),
        )


def empty_base(update: ShareUpdateValue) -> ShareGroupOffset:
    """What an update with no state before it merges onto (Kafka: ShareGroupOffset.fromRecord)."""
    return ShareGroupOffset(
        snapshot_epoch=update.snapshot_epoch,
        state_epoch=m.DEFAULT_STATE_EPOCH,
        leader_epoch=-1,
        start_offset=m.UNINITIALIZED_START_OFFSET,
        delivery_complete_count=m.UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    )
