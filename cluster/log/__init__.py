"""A segmented, checksummed, append-only partition log (SPEC.md §4; format in docs/log-format.md).

One log per partition, in `<data-dir>/<topic>-<partition>/`, for user topics and for the internal
coordinator partitions alike. Every entry is a Kafka RecordBatch v2 (cluster/recordbatch.py): its
batchLength is the length prefix and its CRC-32C the checksum, so user batches are stored as the
producer sent them and served to Fetch without re-encoding.

Split along Kafka's seams (storage's UnifiedLog / LogSegment / LogLoader / LogCleaner):
- partition_log.py  PartitionLog: append, read, replay, compact, close (the threading rules)
- segment.py        one segment file and its in-memory index
- reads.py          lock-free lookups over a snapshot of the segments
- recovery.py       validate and cut at the first invalid batch, at open or when a read finds one
- checkpoint.py     the recovery point a clean close leaves
- compaction.py     the cleaner: keep the latest record per key
- format.py         file names and the segment file header
- files.py          the FileOps seam (tests fail the disk there), fds, chunked reads
- group_commit.py   one syncfs for the appends of many logs on one file system
- config.py, errors.py

This package exports the names other modules use; the rest is imported from its module.
"""

from cluster.log.checkpoint import CHECKPOINT_NAME
from cluster.log.config import FlushPolicy, LogConfig, coordinator_log_config
from cluster.log.errors import LogError, LogWriteError, OffsetOutOfRange
from cluster.log.files import FileOps
from cluster.log.format import FILE_HEADER_SIZE, segment_name
from cluster.log.partition_log import PartitionLog

__all__ = [
    "CHECKPOINT_NAME",
    "FILE_HEADER_SIZE",
    "FileOps",
    "FlushPolicy",
    "LogConfig",
    "LogError",
    "LogWriteError",
    "OffsetOutOfRange",
    "PartitionLog",
    "coordinator_log_config",
    "segment_name",
]
