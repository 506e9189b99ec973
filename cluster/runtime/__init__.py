"""The coordinator runtime (SPEC.md §4), Kafka's CoordinatorRuntime on asyncio, by concept:

- runtime.py: CoordinatorRuntime itself (leadership, the operation queue, loading);
- partition.py: one partition's lifecycle (PartitionStatus) and what it holds;
- batch.py: running a batch: write, then respond; or revert through the shard's snapshot;
- timers.py: a partition's armed timers; wakeups.py: when they fire (real or manual time);
- disk.py: the blocking log I/O, on the executor; errors.py: what a caller is told instead;
- writer.py: where batches are appended and when they count as committed.
"""

from cluster.runtime.errors import RUNTIME_ERRORS, LoadInProgress, NotCoordinator, NotEnoughReplicas, StorageError, WriteTimeout
from cluster.runtime.partition import Operation, PartitionStatus, TopicPartition
from cluster.runtime.runtime import CoordinatorRuntime, RuntimeConfig, Shard, ShardFactory
from cluster.runtime.timers import TIMER_RETRY_BACKOFF_MS
from cluster.runtime.wakeups import LoopWakeups, ManualWakeups, SystemClock, WakeupTimer, Wakeups
from cluster.runtime.writer import LocalWriter, PartitionWriter

__all__ = [
    "RUNTIME_ERRORS",
    "LocalWriter",
    "NotEnoughReplicas",
    "PartitionWriter",
    "WriteTimeout",
    "TIMER_RETRY_BACKOFF_MS",
    "CoordinatorRuntime",
    "LoadInProgress",
    "LoopWakeups",
    "ManualWakeups",
    "NotCoordinator",
    "Operation",
    "PartitionStatus",
    "RuntimeConfig",
    "Shard",
    "ShardFactory",
    "StorageError",
    "SystemClock",
    "TopicPartition",
    "WakeupTimer",
    "Wakeups",
]
