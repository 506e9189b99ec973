"""A user-topic partition in memory, as the share partitions see it on their leader.

It offers what SharePartitionManager and SharePartitionHost use of cluster/partition.py's
UserPartition: the leader epoch, the log's start and end offsets, whole batches read from an
offset, and the event a long poll waits on. Produce and retention are the schedule's to call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from cluster.partition import FetchOutcome
from cluster.recordbatch import assign_offset, encode_records

# One encoded batch per size; appending copies one and stamps its base offset (not under the CRC).
_TEMPLATES = {n: encode_records([(i, b"k", b"v") for i in range(n)], 1_700_000_000_000) for n in (1, 2, 3)}


@dataclass
class SimLogView:
    log_start_offset: int = 0
    end_offset: int = 0  # the next offset to be written


@dataclass
class SimUserPartition:
    topic: str
    partition: int
    epoch: int
    log: SimLogView = field(default_factory=SimLogView)
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # (base, last, bytes)
    data_appended: asyncio.Event = field(default_factory=asyncio.Event)

    def produce(self, records: int) -> tuple[int, int]:
        base = self.log.end_offset
        data = bytearray(_TEMPLATES[records])
        assign_offset(data, base, self.epoch)
        self.batches.append((base, base + records - 1, bytes(data)))
        self.log.end_offset = base + records
        self.data_appended.set()
        self.data_appended = asyncio.Event()
        return base, base + records - 1

    def retain_from(self, batch_index: int) -> int:
        """Retention deleted the batches before this one: the log starts at its base offset."""
        base = self.batches[batch_index][0] if batch_index < len(self.batches) else self.log.end_offset
        self.log.log_start_offset = max(self.log.log_start_offset, base)
        return self.log.log_start_offset

    def read(self, offset: int, max_bytes: int) -> FetchOutcome:
        end, start = self.log.end_offset, self.log.log_start_offset
        if offset > end or offset < start:
            return FetchOutcome(ErrorCode.offset_out_of_range, end, start)
        if max_bytes <= 0 or offset == end:
            return FetchOutcome(ErrorCode.none, end, start)
        out, size = [], 0
        for base, last, data in self.batches:
            if last < offset:
                continue
            if out and size + len(data) > max_bytes:
                break  # at least one whole batch, as the real log
            out.append(data)
            size += len(data)
        return FetchOutcome(ErrorCode.none, end, start, b"".join(out))

    def offset_for(self, timestamp: int) -> tuple[int, int]:
        return self.log.log_start_offset, -1
