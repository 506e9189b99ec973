"""The share coordinator's settings, by Kafka's names (cluster/config.py maps them here)."""

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
