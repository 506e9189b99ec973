"""One segment: its file and the in-memory index of its batches (rebuilt at open, never stored)."""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from cluster.log.files import SegmentFile
from cluster.recordbatch import BatchHeader


@dataclass(slots=True, eq=False)
class Segment:
    """A segment file and its index as compact int64 columns, one row per batch.

    Appends grow the columns first and `count` last (publish()), so a reader on another thread
    that bounds itself by `count` never sees a half-indexed batch.
    """

    base_offset: int
    path: Path
    file: SegmentFile
    size: int  # bytes of the file that hold published data, file header included
    base_offsets: array = field(default_factory=lambda: array("q"))
    last_offsets: array = field(default_factory=lambda: array("q"))
    positions: array = field(default_factory=lambda: array("q"))
    sizes: array = field(default_factory=lambda: array("q"))
    max_timestamps: array = field(default_factory=lambda: array("q"))
    count: int = 0  # published batches; readers never look past it
    largest: tuple[int, int] = (-1, -1)  # (largest max_timestamp, index of the first batch with it)

    def add(self, header: BatchHeader, position: int) -> None:
        """Index one batch; visible to readers only once `count` covers it (publish())."""
        self.index(header.base_offset, header.last_offset, position, header.size, header.max_timestamp)

    def index(self, base_offset: int, last_offset: int, position: int, size: int, max_timestamp: int) -> None:
        """add() from the fields themselves (the append path knows them without a patched header)."""
        self.base_offsets.append(base_offset)
        self.last_offsets.append(last_offset)
        self.positions.append(position)
        self.sizes.append(size)
        self.max_timestamps.append(max_timestamp)
        if max_timestamp > self.largest[0] or self.largest[1] < 0:
            self.largest = (max_timestamp, len(self.max_timestamps) - 1)

    def publish(self, size: int) -> None:
        self.size = size
        self.count = len(self.positions)

    def truncated(self, count: int) -> Segment:
        """A copy holding only the first `count` batches (same file); readers of this one keep theirs."""
        kept = Segment(self.base_offset, self.path, self.file, self.positions[count])
        kept.base_offsets, kept.last_offsets = self.base_offsets[:count], self.last_offsets[:count]
        kept.positions, kept.sizes = self.positions[:count], self.sizes[:count]
        kept.max_timestamps = self.max_timestamps[:count]
        if count:
            largest = max(kept.max_timestamps)
            kept.largest = (largest, kept.max_timestamps.index(largest))
        kept.count = count
        return kept

    @property
    def last_offset(self) -> int | None:
        return self.last_offsets[self.count - 1] if self.count else None

    @property
    def end_offset(self) -> int:
        """The offset after its last batch (its base offset while empty)."""
        return self.last_offsets[self.count - 1] + 1 if self.count else self.base_offset

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self.file.fd, size, position)
