"""Lock-free lookups over one snapshot of a log's segments, bounded by the end offset read first.

PartitionLog passes its current segment list and end offset; appends only add past both, and a
compaction or a cut replaces the list, so a lookup that started keeps a consistent view.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

from cluster.log.files import ChunkReader
from cluster.log.format import FILE_HEADER_SIZE
from cluster.log.segment import Segment
from cluster.recordbatch import HEADER, HEADER_SIZE, BatchHeader

# batch_headers() reads whole chunks rather than one pread per header below this average batch size.
HEADER_SCAN_CHUNKED_BELOW = 4096


def read_from(segments: Sequence[Segment], end: int, offset: int, max_bytes: int, up_to: int | None = None) -> bytes:
    """Whole batches from one segment, from the one holding `offset` (KIP-74: at least one batch),
    none after the one holding `up_to` when given (a share fetch needs that many offsets at most).

    The caller has checked log_start <= offset < end.
    """
    first = max(bisect_right(segments, offset, key=lambda s: s.base_offset) - 1, 0)
    for segment in segments[first:]:
        count = segment.count
        # In a compacted log `offset` may fall in a gap: the first batch ending at or after it serves.
        i = bisect_left(segment.last_offsets, offset, 0, count)
        if i == count or segment.base_offsets[i] >= end:
            continue
        total = segment.sizes[i]
        j = i + 1
        stop = count if up_to is None else min(count, bisect_left(segment.last_offsets, up_to, i, count) + 1)
        while j < stop and segment.base_offsets[j] < end and total + segment.sizes[j] <= max_bytes:
            total += segment.sizes[j]
            j += 1
        return segment.pread(total, segment.positions[i])
    return b""


def batch_headers(segments: Sequence[Segment], end: int) -> Iterator[BatchHeader]:
    """The 61-byte header of every batch, in order, without the records.

    Where batches are large, one small pread per header skips the record bytes; where they are
    small (under HEADER_SCAN_CHUNKED_BELOW on average), reading the segment in large chunks
    costs fewer syscalls than it saves in bytes.
    """
    for segment in segments:
        count = segment.count
        if not count:
            continue
        chunked = (segment.size - FILE_HEADER_SIZE) / count < HEADER_SCAN_CHUNKED_BELOW
        reader = ChunkReader(segment.file.fd, segment.size) if chunked else None
        for j in range(count):
            if segment.base_offsets[j] >= end:
                return
            position = segment.positions[j]
            raw = reader.view(position, HEADER_SIZE) if reader else segment.pread(HEADER_SIZE, position)
            yield BatchHeader(*HEADER.unpack(raw))


def offset_for_timestamp(segments: Sequence[Segment], end: int, timestamp_ms: int) -> bytes | None:
    """The first batch whose max_timestamp >= timestamp_ms, or None."""
    for segment in segments:
        if segment.largest[0] < timestamp_ms:
            continue  # the segment's largest timestamp spares a scan of its batches
        stamps = segment.max_timestamps
        for i in range(segment.count):
            if segment.base_offsets[i] >= end:
                return None
            if stamps[i] >= timestamp_ms:
                return segment.pread(segment.sizes[i], segment.positions[i])
    return None


def max_timestamp_batch(segments: Sequence[Segment], end: int) -> bytes | None:
    """The first batch with the largest max_timestamp, or None."""
    best: tuple[int, Segment, int] | None = None
    for segment in segments:
        largest, index = segment.largest
        if 0 <= index < segment.count and segment.base_offsets[index] < end:
            if best is None or largest > best[0]:
                best = (largest, segment, index)
    if best is None:
        return None
    _, segment, index = best
    return segment.pread(segment.sizes[index], segment.positions[index])
