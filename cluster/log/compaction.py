"""Compaction: rewrite a compacted log's closed segments keeping the latest record per key.

A simplified Kafka log cleaner. Each output batch keeps its input batch's last offset (as Kafka's
v2 cleaner does), and the last one reaches the last closed offset, so the cleaned segment covers
exactly the offsets of the segments it replaces: that is how recovery tells leftovers of a crash
after the rename from live segments.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import crc32c

from cluster import recordbatch
from cluster.log.errors import write_error
from cluster.log.files import ChunkReader, LogFiles, open_file
from cluster.log.format import CLEANED_SUFFIX, FILE_HEADER_SIZE, file_header
from cluster.log.segment import Segment
from cluster.recordbatch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader

log = logging.getLogger(__name__)

# Byte positions of header fields compaction rewrites (recordbatch.HEADER's layout).
_CRC_POS = 17
_LAST_OFFSET_DELTA_POS = 23
_INT32 = struct.Struct(">i")
_CRC = struct.Struct(">I")
_TIMESTAMPS = struct.Struct(">qq")  # baseTimestamp, maxTimestamp at 27
_TIMESTAMPS_POS = 27


@dataclass(frozen=True, slots=True)
class CompactionReport:
    segments_before: int
    records_before: int
    records_after: int
    bytes_before: int
    bytes_after: int


def latest_offsets(batches: Iterable[bytes], below: int | None = None) -> dict[bytes, int]:
    """Key -> offset of its latest record below `below` (None: over the whole log)."""
    latest: dict[bytes, int] = {}
    for batch in batches:
        for offset, key, _value in recordbatch.decode_records(batch):
            if below is not None and offset >= below:
                return latest
            if key is not None:
                latest[key] = offset
    return latest


def compact_segments(
    files: LogFiles, closed: list[Segment], latest: dict[bytes, int], horizon_ms: int
) -> tuple[Segment, CompactionReport]:
    """Write the cleaned segment replacing `closed` (renamed over the first of them) and report.

    Tombstones whose batch is older than horizon_ms go; records without a key stay. The caller
    swaps the segment list and removes the other closed segments.
    """
    closed_last = next((s.last_offset for s in reversed(closed) if s.count), None)
    output: list[bytearray] = []
    records_before = records_after = 0
    last_input: BatchHeader | None = None
    for segment in closed:
        reader = ChunkReader(segment.file.fd, segment.size)
        for i in range(segment.count):
            batch = bytes(reader.view(segment.positions[i], segment.sizes[i]))
            header = recordbatch.parse_header(batch)
            last_input = header
            records = recordbatch.decode_records(batch)
            records_before += len(records)
            kept = [
                (offset, key, value)
                for offset, key, value in records
                if key is None
                or (latest[key] == offset and not (value is None and header.max_timestamp < horizon_ms))
            ]
            if kept:
                records_after += len(kept)
                output.append(_compacted_batch(kept, header))
    if closed_last is not None and last_input is not None:
        if output:
            _restamp(output[-1], last_offset=closed_last)
        else:
            # Nothing survived: an empty batch still marks the offsets the old segments covered.
            output.append(_empty_batch(closed[0].base_offset, closed_last, last_input))

    cleaned = _write_cleaned(files, closed[0], output)
    bytes_before = sum(segment.size for segment in closed)
    return cleaned, CompactionReport(len(closed), records_before, records_after, bytes_before, cleaned.size)


def _write_cleaned(files: LogFiles, first: Segment, output: list[bytearray]) -> Segment:
    """Write, fsync and rename the cleaned segment over the first closed one."""
    tmp_path = first.path.with_name(first.path.name + CLEANED_SUFFIX)
    try:
        file = open_file(tmp_path, truncate=True)
    except OSError as exc:
        raise write_error(f"create {tmp_path.name}", exc) from exc
    segment = Segment(first.base_offset, first.path, file, FILE_HEADER_SIZE)
    position = FILE_HEADER_SIZE
    for batch in output:
        header = recordbatch.parse_header(batch)
        segment.add(header, position)
        position += header.size
    segment.publish(position)
    try:
        files.write_all(file.fd, file_header() + b"".join(output))
        files.fsync(file.fd)
        os.rename(tmp_path, first.path)
    except OSError as exc:
        file.close()
        try:
            tmp_path.unlink()
        except OSError:
            pass  # recovery deletes stray .cleaned files
        raise write_error(f"write {tmp_path.name}", exc) from exc
    # From here the cleaned segment is the live one whatever else fails: a crash leaves either
    # the old segments (rename not durable) or the new one plus leftovers recovery removes.
    try:
        files.fsync_directory()
    except OSError:
        log.warning("fsync of %s after rename failed", files.directory, exc_info=True)
    return segment


# -- header rewrites recordbatch.encode_records cannot express ------------------------------------


def _compacted_batch(kept: list[tuple[int, bytes | None, bytes | None]], original: BatchHeader) -> bytearray:
    batch = bytearray(recordbatch.encode_records(kept, original.max_timestamp))
    recordbatch.assign_offset(batch, kept[0][0], original.partition_leader_epoch)
    _restamp(batch, last_offset=original.last_offset, timestamp_ms=original.max_timestamp)
    return batch


def _restamp(batch: bytearray, last_offset: int, timestamp_ms: int | None = None) -> None:
    """Set lastOffsetDelta (and the batch timestamps) and recompute the CRC.

    The timestamps are rewritten because kio derives them through float seconds and may lose a
    millisecond; every record of a compacted batch has timestamp delta 0, so the batch's own
    timestamps are the records' timestamps.
    """
    base_offset = recordbatch.parse_header(batch).base_offset
    _INT32.pack_into(batch, _LAST_OFFSET_DELTA_POS, last_offset - base_offset)
    if timestamp_ms is not None:
        _TIMESTAMPS.pack_into(batch, _TIMESTAMPS_POS, timestamp_ms, timestamp_ms)
    _CRC.pack_into(batch, _CRC_POS, crc32c.crc32c(memoryview(batch)[CRC_START:]))


def _empty_batch(base_offset: int, last_offset: int, like: BatchHeader) -> bytearray:
    """A batch with no records spanning [base_offset, last_offset] (Kafka keeps such batches too)."""
    batch = bytearray(
        HEADER.pack(
            base_offset, HEADER_SIZE - LOG_OVERHEAD, like.partition_leader_epoch, recordbatch.MAGIC, 0, 0,
            last_offset - base_offset, like.max_timestamp, like.max_timestamp, -1, -1, -1, 0,
        )
    )
    _restamp(batch, last_offset=last_offset)
    return batch
