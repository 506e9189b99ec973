"""What acquiring and acknowledging records need of a share partition (sharestate/acquisition.py,
sharestate/acknowledgement.py): its offsets, in-flight batches and bookkeeping. SharePartition
(sharestate/partition.py) is the one implementation; naming the need here keeps those two modules
below the partition that calls them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from sharestate.config import SharePartitionConfig
from sharestate.inflight import DeliveryCountOps, InFlightBatch, InFlightState
from sharestate.partition_state import SharePartitionState
from sharestate.state_batches import StateWrite


class PartitionView(Protocol):
    state: SharePartitionState
    config: SharePartitionConfig
    start_offset: int
    end_offset: int
    cached_state: dict[int, InFlightBatch]
    find_next: bool
    pending: dict[int, list[InFlightState]]
    transition_ids: Iterator[int]
    lock_ids: Iterator[int]
    expired_locks: set[int]

    def in_flight_records(self) -> int: ...

    def schedule_lock(self, lock_id: int, member_id: str, first: int, last: int) -> None: ...

    def release(self, states: list[InFlightState], ops: DeliveryCountOps = DeliveryCountOps.NONE) -> StateWrite: ...

    def advance_start_offset(self) -> None: ...

    def start_offset_if_committed(self, own: set[int]) -> int: ...

    def split(self, batch: InFlightBatch) -> None: ...

    def insert(self, batch: InFlightBatch) -> None: ...

    def batch_at(self, offset: int) -> InFlightBatch | None: ...

    def floor_batch(self, offset: int) -> InFlightBatch | None: ...

    def next_first_after(self, offset: int) -> int | None: ...

    def firsts_overlapping(self, lo: int, hi: int) -> list[int]: ...
