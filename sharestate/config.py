"""The share coordinator's and the share partitions' settings, by Kafka's names (cluster/config.py
maps them here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    # share.coordinator.snapshot.update.records.per.snapshot: ShareUpdates written between two
    # ShareSnapshots of one share partition (0: every write is a snapshot, as Kafka allows).
    snapshot_update_records_per_snapshot: int = 500

    def __post_init__(self) -> None:
        if self.snapshot_update_records_per_snapshot < 0:
            raise ValueError("share.coordinator.snapshot.update.records.per.snapshot must be >= 0")


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_inflight_records: int = 2000  # group.share.partition.max.record.locks

    @property
    def throttle_records_delivery_limit(self) -> int:
        """From this delivery count on, a batch is handed out in smaller pieces (Kafka 4.2's
        SharePartition.throttleRecordsDeliveryLimit): half the delivery limit rounded up, at least 2."""
        return max(2, -(-self.delivery_count_limit // 2))
