"""One coordinator partition as the runtime holds it: its lifecycle, its queue of operations, its
shard with the shard's snapshot, its log and its timers."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernel.lifecycle import validate_transition
from kernel.result import RequestToken, Result
from kernel.snapshot import ShardSnapshot

from cluster.batching import BatchingQueue
from cluster.log import PartitionLog
from cluster.runtime.timers import Fired, TimerTable

TopicPartition = tuple[str, int]
Operation = Callable[[RequestToken], Result]


class PartitionStatus(enum.Enum):
    """loading -> active -> closed; a load that is cut short (unload, failure) goes to closed."""

    LOADING = "loading"  # replaying the log: requests get "load in progress"
    ACTIVE = "active"
    CLOSED = "closed"

    def validate_transition(self, target: "PartitionStatus") -> None:
        validate_transition(_VALID_PREVIOUS, self, target, "coordinator partition")


_VALID_PREVIOUS: dict[PartitionStatus, frozenset[PartitionStatus]] = {
    PartitionStatus.ACTIVE: frozenset({PartitionStatus.LOADING}),
    PartitionStatus.CLOSED: frozenset({PartitionStatus.LOADING, PartitionStatus.ACTIVE}),
}


@dataclass(slots=True)
class Pending:
    operation: Operation
    future: asyncio.Future | None  # None for a timer's expiry: nobody waits for its answer
    token: RequestToken
    timer: Fired | None = None  # set when this is a timer's expiry


@dataclass(slots=True)
class Partition:
    tp: TopicPartition
    epoch: int
    queue: BatchingQueue[Pending]
    timers: TimerTable
    status: PartitionStatus = PartitionStatus.LOADING
    shard: Any = None
    snapshot: ShardSnapshot | None = None
    log: PartitionLog | None = None
    parked: dict[RequestToken, asyncio.Future] = field(default_factory=dict)
    records_since_compaction: int = 0
    loading: asyncio.Task | None = None  # the load under way, which a second load of this epoch joins
    # The log's end after the last append, and the offset below which it is committed (Kafka's
    # lastWrittenOffset and lastCommittedOffset). Equal with a local writer; a replicated one
    # commits at the high watermark, and answers wait for it (batch.py).
    written: int = 0
    committed: int = 0
    commit_advanced: asyncio.Event = field(default_factory=asyncio.Event)  # set when committed may have moved
    # What the writer keeps for this partition from its open to its close (a replicated log's
    # replica, writer.py); None for a log of its own.
    source: Any = None

    def move_to(self, target: PartitionStatus) -> None:
        self.status.validate_transition(target)
        self.status = target

    def fail_parked(self, exc: Exception) -> None:
        for future in self.parked.values():
            set_exception(future, exc)
        self.parked.clear()


def set_exception(future: asyncio.Future | None, exc: Exception) -> None:
    if future is not None and not future.done():
        future.set_exception(exc)
