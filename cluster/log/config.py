"""A log's settings: segment size, when bytes reach the disk, compaction."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class FlushPolicy(enum.Enum):
    """`raygroups.log.flush`: when an append's bytes reach the disk.

    BATCH: fsync once per append call (one group commit), so an acknowledged write survives a power loss.
    NONE: page cache only; survives a process kill, not a power loss.
    """

    BATCH = "batch"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 64 * 1024 * 1024
    flush: FlushPolicy = FlushPolicy.BATCH
    compacted: bool = False
    tombstone_retention_ms: int = 24 * 3600 * 1000
    # raygroups.log.sync: with BATCH, one syncfs for the appends of many logs on a file system
    # (group_commit.py) rather than one fsync per log; syncfs also writes back what other programs
    # left dirty on that file system, which a disk shared with heavy writers may not want.
    sync_filesystem: bool = True


def coordinator_log_config(settings: Mapping[str, Any]) -> LogConfig:
    """The log of an internal (coordinator) partition, from the cluster's settings: compacted."""
    return LogConfig(
        segment_bytes=settings["raygroups.coordinator.log.segment.bytes"],
        flush=FlushPolicy(settings["raygroups.log.flush"]),
        compacted=True,
        tombstone_retention_ms=settings["raygroups.log.tombstone.retention.ms"],
        sync_filesystem=settings["raygroups.log.sync"] == "filesystem",
    )
