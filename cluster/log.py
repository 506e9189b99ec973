"""A segmented, checksummed, append-only partition log (SPEC.md §4; format in docs/log-format.md).

One log per partition, in `<data-dir>/<topic>-<partition>/`, for user topics and for the internal
coordinator partitions alike. Every entry is a Kafka RecordBatch v2 (cluster/recordbatch.py): its
batchLength is the length prefix and its CRC-32C the checksum, so user batches are stored as the
producer sent them and served to Fetch without re-encoding.

Threads: mutating calls (append, compact, close, delete) come one at a time, possibly from a worker
thread, while reads (read, batches, offset_for_timestamp, max_timestamp_batch, the properties) may
run concurrently on another thread. Nothing takes a lock; instead
- bytes are written (and fsynced, with flush=batch) before the index entries that describe them,
  and the index entries before `end_offset`, so a reader never sees an offset it cannot read;
- a segment's `count` is the reader's bound into its index arrays (appends grow the arrays first);
- the segment list is replaced, never mutated, and readers take one snapshot of it;
- a segment's file is closed only by garbage collection of its last holder (or by close()), so a
  reader still walking a segment that compaction replaced keeps reading the old inode.
"""

from __future__ import annotations

import enum
import errno as errno_module
import logging
import os
import shutil
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import crc32c

from cluster import recordbatch
from cluster.recordbatch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchError, BatchHeader

log = logging.getLogger(__name__)

FILE_MAGIC = b"RGLOG\x00\x00\x00"
FORMAT_VERSION = 1
_FILE_HEADER = struct.Struct(">8sII")  # magic, format version, reserved
FILE_HEADER_SIZE = _FILE_HEADER.size  # 16

CHECKPOINT_NAME = "recovery-point"
_CHECKPOINT_MAGIC = b"RGRCVPT\x00"
_CHECKPOINT = struct.Struct(">8sIqq")  # magic, version, last segment's base offset, its byte length
_CRC = struct.Struct(">I")

SEGMENT_SUFFIX = ".log"
CLEANED_SUFFIX = ".cleaned"
_TMP_SUFFIX = ".tmp"

# Recovery and batches() read this much per syscall: replaying a log is one large sequential read,
# not one pread per (often ~100-byte) coordinator batch.
READ_CHUNK = 1024 * 1024
# batch_headers() reads whole chunks rather than one pread per header below this average batch size.
HEADER_SCAN_CHUNKED_BELOW = 4096

# Byte positions of header fields compaction rewrites (recordbatch.HEADER's layout).
_CRC_POS = 17
_LAST_OFFSET_DELTA_POS = 23
_INT32 = struct.Struct(">i")
_TIMESTAMPS = struct.Struct(">qq")  # baseTimestamp, maxTimestamp at 27
_TIMESTAMPS_POS = 27


class LogError(Exception):
    """The log cannot be opened or used (unknown format, a call the log does not support)."""


class LogWriteError(LogError):
    """An append or compaction write failed (ENOSPC, EIO, ...); the log is unchanged."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class OffsetOutOfRange(LogError):
    """A read below the log start offset or past the log end offset (OFFSET_OUT_OF_RANGE)."""


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


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What open() found.

    `truncated` is True when log data was cut (a torn or corrupt tail, a broken segment chain);
    `reason` says where and why in one line. `removed_files` names every file open() deleted:
    stray `.cleaned` files and leftovers of a finished compaction (neither is a truncation) as
    well as the segments after a truncation point.
    """

    segments: int
    batches: int
    truncated: bool
    truncated_bytes: int
    reason: str | None
    removed_files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CompactionReport:
    segments_before: int
    records_before: int
    records_after: int
    bytes_before: int
    bytes_after: int


class FileOps:
    """The writes the log makes, as a seam: tests swap in one that fails like a full disk."""

    def write(self, fd: int, data: bytes | memoryview) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)


class _File:
    """An open segment file descriptor, closed when its last holder lets go.

    A raw fd (not a FileIO) so reads are os.pread, which shares no file position between threads.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to from a finalizer (or at shutdown)
            pass


def _open_file(path: Path, truncate: bool = False) -> _File:
    # O_APPEND: after a failed write is truncated away, the next write lands at the new end.
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if truncate else 0)
    return _File(os.open(path, flags, 0o644))


@dataclass(slots=True, eq=False)
class _Segment:
    """One segment file and its in-memory index (rebuilt at open by walking batch headers)."""

    base_offset: int
    path: Path
    file: _File
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
        self.base_offsets.append(header.base_offset)
        self.last_offsets.append(header.last_offset)
        self.positions.append(position)
        self.sizes.append(header.size)
        self.max_timestamps.append(header.max_timestamp)
        if header.max_timestamp > self.largest[0] or self.largest[1] < 0:
            self.largest = (header.max_timestamp, len(self.max_timestamps) - 1)

    def publish(self, size: int) -> None:
        self.size = size
        self.count = len(self.positions)

    def truncated(self, count: int) -> _Segment:
        """A copy holding only the first `count` batches (same file); readers of this one keep theirs."""
        kept = _Segment(self.base_offset, self.path, self.file, self.positions[count])
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

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self.file.fd, size, position)


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    base_offset: int
    length: int

    def covers(self, segment_base: int, batch_end: int) -> bool:
        if segment_base != self.base_offset:
            return segment_base < self.base_offset
        return batch_end <= self.length


class _ChunkReader:
    """Views of file ranges served from large sequential preads."""

    def __init__(self, fd: int, end: int) -> None:
        self._fd = fd
        self._end = end
        self._buf = b""
        self._start = 0

    def view(self, position: int, size: int) -> memoryview:
        """Up to `size` bytes at position (fewer only at the end of the file)."""
        rel = position - self._start
        if rel < 0 or rel + size > len(self._buf):
            want = min(max(size, READ_CHUNK), max(self._end - position, 0))
            self._buf = os.pread(self._fd, want, position)
            self._start = position
            rel = 0
        return memoryview(self._buf)[rel : rel + size]


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def _file_header() -> bytes:
    return _FILE_HEADER.pack(FILE_MAGIC, FORMAT_VERSION, 0)


class PartitionLog:
    """One partition's log; see the module docstring for the threading rules."""

    def __init__(
        self, directory: Path, config: LogConfig, file_ops: FileOps, segments: list[_Segment]
    ) -> None:
        self.directory = directory
        self.config = config
        self._ops = file_ops
        self._segments = segments
        last = segments[-1]
        self.end_offset = last.last_offset + 1 if last.count else last.base_offset
        self.recovery = RecoveryReport(0, 0, False, 0, None, ())
        # The recovery point open() trusted: batches it covers had no CRC check yet; batches() does it.
        self._unverified: _Checkpoint | None = None
        self._failed: LogWriteError | None = None
        self._closed = False

    # -- opening and recovery --------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig = LogConfig(), file_ops: FileOps | None = None
    ) -> PartitionLog:
        directory = Path(directory)
        recovery = _Recovery(directory, config, file_ops or FileOps())
        try:
            directory.mkdir(parents=True, exist_ok=True)
            segments, report = recovery.run()
        except OSError as exc:  # a disk that cannot even be read or repaired: a storage error
            raise _write_error(f"opening {directory}", exc) from exc
        partition_log = cls(directory, config, recovery.ops, segments)
        partition_log.recovery = report
        partition_log._unverified = recovery.checkpoint
        if report.truncated:
            log.warning("%s: %s", directory, report.reason)
        return partition_log

    # -- properties ------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def failed(self) -> bool:
        return self._failed is not None

    # -- appending -------------------------------------------------------------------------

    def append(self, batches: Sequence[bytearray], leader_epoch: int) -> list[int]:
        """Assign offsets to `batches` (patched in place), write them durably, return their base offsets."""
        self._check_writable()
        if not batches:
            return []
        headers: list[BatchHeader] = []
        for batch in batches:
            header = recordbatch.parse_header(batch)
            if header.size != len(batch) or header.last_offset_delta < 0:
                raise ValueError("append() takes whole record batches, one per element")
            headers.append(header)
        total = sum(len(batch) for batch in batches)

        active = self._segments[-1]
        roll = active.count > 0 and active.size + total > self.config.segment_bytes
        next_offset = self.end_offset
        base_offsets: list[int] = []
        patched: list[BatchHeader] = []
        for batch, header in zip(batches, headers):
            recordbatch.assign_offset(batch, next_offset, leader_epoch)
            base_offsets.append(next_offset)
            patched.append(replace(header, base_offset=next_offset))
            next_offset += header.last_offset_delta + 1
        payload = b"".join(batches)

        if roll:
            segment = self._write_new_segment(self.end_offset, payload)
            segments = [*self._segments, segment]
            start = FILE_HEADER_SIZE
        else:
            segment = active
            self._write_to_active(segment, payload)
            segments = self._segments
            start = segment.size

        position = start
        for header in patched:
            segment.add(header, position)
            position += header.size
        segment.publish(position)
        self._segments = segments
        self.end_offset = next_offset
        return base_offsets

    def _check_writable(self) -> None:
        if self._closed:
            raise LogError(f"log {self.directory} is closed")
        if self._failed is not None:
            message = f"log {self.directory} failed earlier and must be reopened: {self._failed}"
            raise LogWriteError(message, self._failed.errno)

    def _write_to_active(self, segment: _Segment, payload: bytes) -> None:
        fd = segment.file.fd
        try:
            self._write_all(fd, payload)
            if self.config.flush is FlushPolicy.BATCH:
                self._ops.fsync(fd)
        except OSError as exc:
            error = _write_error(f"append to {segment.path.name}", exc)
            try:
                self._ops.truncate(fd, segment.size)
            except OSError as truncate_exc:
                # The file may now hold bytes the index does not: refuse writes until a reopen lets
                # recovery (which CRC-checks everything past the last clean close) cut them.
                action = f"truncating {segment.path.name} after a failed append"
                self._failed = _write_error(action, truncate_exc)
                log.error("%s: %s; the log refuses appends until reopened", self.directory, self._failed)
            raise error from exc

    def _write_new_segment(self, base_offset: int, payload: bytes) -> _Segment:
        """A new segment holding payload, fully written before anyone can see it; removed on failure."""
        path = self.directory / segment_name(base_offset)
        try:
            file = _open_file(path, truncate=True)
        except OSError as exc:
            raise _write_error(f"create {path.name}", exc) from exc
        try:
            self._write_all(file.fd, _file_header() + payload)
            if self.config.flush is FlushPolicy.BATCH:
                self._ops.fsync(file.fd)
                self._fsync_directory()
        except OSError as exc:
            file.close()
            try:
                path.unlink()
            except OSError:
                pass  # an empty or partial last segment is cleaned by recovery
            raise _write_error(f"roll to {path.name}", exc) from exc
        return _Segment(base_offset, path, file, FILE_HEADER_SIZE)

    def _write_all(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._ops.write(fd, view)
            if written <= 0:
                raise OSError(errno_module.EIO, "write made no progress")
            view = view[written:]

    def _fsync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._ops.fsync(fd)
        finally:
            os.close(fd)

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from one segment, from the one holding `offset` (KIP-74: at least one batch)."""
        end = self.end_offset
        segments = self._segments
        if offset < segments[0].base_offset or offset > end:
            raise OffsetOutOfRange(
                f"offset {offset} outside [{segments[0].base_offset}, {end}] of {self.directory.name}"
            )
        if offset == end:
            return b""
        first = max(bisect_right(segments, offset, key=lambda s: s.base_offset) - 1, 0)
        for segment in segments[first:]:
            count = segment.count
            # In a compacted log `offset` may fall in a gap: the first batch ending at or after it serves.
            i = bisect_left(segment.last_offsets, offset, 0, count)
            if i == count or segment.base_offsets[i] >= end:
                continue
            total = segment.sizes[i]
            j = i + 1
            while j < count and segment.base_offsets[j] < end and total + segment.sizes[j] <= max_bytes:
                total += segment.sizes[j]
                j += 1
            return segment.pread(total, segment.positions[i])
        return b""

    def batches(self, from_offset: int = 0) -> Iterator[bytes]:
        """Every batch ending at or after from_offset, in order (the replay path).

        open() trusted the bytes below the recovery point without a CRC check; this is where they
        are checked, because replay reads them anyway. The first that fails is handled as open()
        handles a corrupt batch: the log is cut there and the cut added to `recovery`, and the
        iteration ends at the cut. A cut is a mutation: call this where mutating calls may run.
        """
        end = self.end_offset
        unverified = self._unverified
        segments = self._segments
        for segment in segments:
            count = segment.count
            i = bisect_left(segment.last_offsets, from_offset, 0, count)
            if i == count:
                continue
            reader = _ChunkReader(segment.file.fd, segment.size)
            for j in range(i, count):
                if segment.base_offsets[j] >= end:
                    return
                position, size = segment.positions[j], segment.sizes[j]
                view = reader.view(position, size)
                if unverified is not None and unverified.covers(segment.base_offset, position + size):
                    if crc32c.crc32c(view[CRC_START:]) != recordbatch.parse_header(view).crc:
                        self._cut_at(segment, j, "CRC mismatch")
                        return
                yield bytes(view)
        if from_offset <= segments[0].base_offset:
            self._unverified = None  # every batch has been checked once: later reads skip the CRCs

    def _cut_at(self, segment: _Segment, index: int, problem: str) -> None:
        """Cut the log before batch `index` of segment, as recovery at open cuts a corrupt tail."""
        segments = self._segments
        if segment not in segments:
            return  # a compaction replaced it, and its own read of this batch made the cut
        k = segments.index(segment)
        later = segments[k + 1 :]
        position = segment.positions[index]
        kept = segment.truncated(index)
        cut_bytes = segment.size - position + sum(s.size for s in later)
        # Lower end_offset first: a concurrent reader bounded by it never reaches the cut bytes.
        self.end_offset = kept.last_offset + 1 if kept.count else kept.base_offset
        self._segments = [*segments[:k], kept]
        reason = _cut_reason(segment.path.name, problem, position, cut_bytes)
        before = self.recovery
        self.recovery = RecoveryReport(
            segments=len(self._segments),
            batches=sum(s.count for s in self._segments),
            truncated=True,
            truncated_bytes=before.truncated_bytes + cut_bytes,
            reason=reason if before.reason is None else f"{before.reason}; then {reason}",
            removed_files=before.removed_files + tuple(s.path.name for s in later),
        )
        log.warning("%s: %s", self.directory, reason)
        try:
            self._ops.truncate(segment.file.fd, position)
            self._ops.fsync(segment.file.fd)
            for removed in later:
                removed.path.unlink(missing_ok=True)
            self._fsync_directory()
        except OSError as exc:
            # The files may still hold the corrupt bytes: no appends after them, and no recovery
            # point at close, so the next open verifies (and cuts) everything.
            self._failed = _write_error(f"cutting {segment.path.name} at byte {position}", exc)
            raise self._failed from exc

    def batch_headers(self) -> Iterator[BatchHeader]:
        """The 61-byte header of every batch, in order, without the records (producer state rebuild).

        Where batches are large, one small pread per header skips the record bytes; where they are
        small (under HEADER_SCAN_CHUNKED_BELOW on average), reading the segment in large chunks
        costs fewer syscalls than it saves in bytes.
        """
        end = self.end_offset
        for segment in self._segments:
            count = segment.count
            if not count:
                continue
            chunked = (segment.size - FILE_HEADER_SIZE) / count < HEADER_SCAN_CHUNKED_BELOW
            reader = _ChunkReader(segment.file.fd, segment.size) if chunked else None
            for j in range(count):
                if segment.base_offsets[j] >= end:
                    return
                position = segment.positions[j]
                raw = reader.view(position, HEADER_SIZE) if reader else segment.pread(HEADER_SIZE, position)
                yield BatchHeader(*HEADER.unpack(raw))

    def offset_for_timestamp(self, timestamp_ms: int) -> bytes | None:
        """The first batch whose max_timestamp >= timestamp_ms (ListOffsets by time), or None."""
        end = self.end_offset
        for segment in self._segments:
            if segment.largest[0] < timestamp_ms:
                continue
            stamps = segment.max_timestamps
            for i in range(segment.count):
                if segment.base_offsets[i] >= end:
                    return None
                if stamps[i] >= timestamp_ms:
                    return segment.pread(segment.sizes[i], segment.positions[i])
        return None

    def max_timestamp_batch(self) -> bytes | None:
        """The first batch with the largest max_timestamp (ListOffsets MAX_TIMESTAMP), or None."""
        end = self.end_offset
        best: tuple[int, _Segment, int] | None = None
        for segment in self._segments:
            largest, index = segment.largest
            if 0 <= index < segment.count and segment.base_offsets[index] < end:
                if best is None or largest > best[0]:
                    best = (largest, segment, index)
        if best is None:
            return None
        _, segment, index = best
        return segment.pread(segment.sizes[index], segment.positions[index])

    # -- compaction ------------------------------------------------------------------------

    def compact(self, now_ms: int) -> CompactionReport:
        """Rewrite every closed segment into one keeping the latest record per key (Kafka's cleaner).

        Each output batch keeps its input batch's last offset (as Kafka's v2 cleaner does), and the
        last one reaches the last closed offset, so the cleaned segment covers exactly the offsets
        of the segments it replaces: that is how recovery tells leftovers of a crash after the
        rename from live segments.
        """
        if not self.config.compacted:
            raise LogError(f"log {self.directory} is not compacted")
        self._check_writable()
        if len(self._segments) < 2:
            return CompactionReport(0, 0, 0, 0, 0)

        # Before the segments are taken: this read may cut the log at a corrupt batch.
        latest: dict[bytes, int] = {}
        for batch in self.batches():
            for offset, key, _value in recordbatch.decode_records(batch):
                if key is not None:
                    latest[key] = offset
        segments = self._segments
        closed = segments[:-1]
        if not closed:
            return CompactionReport(0, 0, 0, 0, 0)

        horizon = now_ms - self.config.tombstone_retention_ms
        closed_last = next((s.last_offset for s in reversed(closed) if s.count), None)
        output: list[bytearray] = []
        records_before = records_after = 0
        last_input: BatchHeader | None = None
        for segment in closed:
            reader = _ChunkReader(segment.file.fd, segment.size)
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
                    or (latest[key] == offset and not (value is None and header.max_timestamp < horizon))
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

        cleaned = self._write_cleaned(closed[0], output)
        bytes_before = sum(segment.size for segment in closed)
        self._segments = [cleaned, segments[-1]]
        for segment in closed[1:]:
            try:
                segment.path.unlink()
            except OSError:
                log.warning("could not remove %s after compaction; recovery will", segment.path,
                            exc_info=True)
        try:
            self._fsync_directory()
        except OSError:
            log.warning("fsync of %s after compaction failed", self.directory, exc_info=True)
        return CompactionReport(len(closed), records_before, records_after, bytes_before, cleaned.size)

    def _write_cleaned(self, first: _Segment, output: list[bytearray]) -> _Segment:
        """Write, fsync and rename the cleaned segment over the first closed one."""
        tmp_path = first.path.with_name(first.path.name + CLEANED_SUFFIX)
        try:
            file = _open_file(tmp_path, truncate=True)
        except OSError as exc:
            raise _write_error(f"create {tmp_path.name}", exc) from exc
        segment = _Segment(first.base_offset, first.path, file, FILE_HEADER_SIZE)
        position = FILE_HEADER_SIZE
        for batch in output:
            header = recordbatch.parse_header(batch)
            segment.add(header, position)
            position += header.size
        segment.publish(position)
        try:
            self._write_all(file.fd, _file_header() + b"".join(output))
            self._ops.fsync(file.fd)
            os.rename(tmp_path, first.path)
        except OSError as exc:
            file.close()
            try:
                tmp_path.unlink()
            except OSError:
                pass  # recovery deletes stray .cleaned files
            raise _write_error(f"write {tmp_path.name}", exc) from exc
        # From here the cleaned segment is the live one whatever else fails: a crash leaves either
        # the old segments (rename not durable) or the new one plus leftovers recovery removes.
        try:
            self._fsync_directory()
        except OSError:
            log.warning("fsync of %s after rename failed", self.directory, exc_info=True)
        return segment

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, leave a recovery point so the next open skips CRC checks of what is here, close files.

        Never raises for a failed flush: the checkpoint is an optimisation and is skipped.
        """
        if self._closed:
            return
        self._closed = True
        segments = self._segments
        if self._failed is None:
            try:
                self._write_checkpoint(segments[-1])
            except OSError:
                log.warning("%s: no recovery point written; next open verifies everything", self.directory,
                            exc_info=True)
        for segment in segments:
            segment.file.close()

    def _write_checkpoint(self, last: _Segment) -> None:
        if self.config.flush is FlushPolicy.NONE:  # with flush=batch every append already was
            for segment in self._segments:
                self._ops.fsync(segment.file.fd)
        body = _CHECKPOINT.pack(_CHECKPOINT_MAGIC, FORMAT_VERSION, last.base_offset, last.size)
        data = body + _CRC.pack(crc32c.crc32c(body))
        tmp_path = self.directory / (CHECKPOINT_NAME + _TMP_SUFFIX)
        fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self._write_all(fd, data)
            self._ops.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp_path, self.directory / CHECKPOINT_NAME)
        self._fsync_directory()

    def delete(self) -> None:
        """Close without a checkpoint and remove the directory (DeleteTopics)."""
        self._closed = True
        for segment in self._segments:
            segment.file.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        try:
            fd = os.open(self.directory.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass


# -- recovery -------------------------------------------------------------------------------


class _Recovery:
    """open()'s walk over the directory: validate, cut a bad tail, drop leftovers, build the index."""

    def __init__(self, directory: Path, config: LogConfig, ops: FileOps) -> None:
        self.directory = directory
        self.config = config
        self.ops = ops
        self.removed: list[str] = []
        self.truncated_bytes = 0
        self.reason: str | None = None
        self.cut: tuple[str, str, int] | None = None
        self.batches = 0
        self.checkpoint: _Checkpoint | None = None

    def run(self) -> tuple[list[_Segment], RecoveryReport]:
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(CLEANED_SUFFIX) or path.name == CHECKPOINT_NAME + _TMP_SUFFIX:
                path.unlink()  # an interrupted compaction or checkpoint; the originals are intact
                self.removed.append(path.name)
        checkpoint = self.checkpoint = self._read_checkpoint()
        files = sorted(
            (int(path.name[: -len(SEGMENT_SUFFIX)]), path)
            for path in self.directory.iterdir()
            if path.name.endswith(SEGMENT_SUFFIX) and path.name[: -len(SEGMENT_SUFFIX)].isdigit()
        )

        segments: list[_Segment] = []
        for index, (base_offset, path) in enumerate(files):
            previous = segments[-1] if segments else None
            if previous is not None and previous.count and base_offset <= previous.last_offset:
                # A finished compaction's cleaned segment covers this one: the rename happened, the
                # deletes did not.
                path.unlink()
                self.removed.append(path.name)
                continue
            last = index == len(files) - 1
            segment, stop = self._open_segment(base_offset, path, previous, checkpoint, last)
            if segment is not None:
                segments.append(segment)
                self.batches += segment.count
            if stop:
                for _, later in files[index + 1 :]:
                    if later.exists():
                        self.truncated_bytes += later.stat().st_size
                        later.unlink()
                        self.removed.append(later.name)
                break

        if not segments:
            path = self.directory / segment_name(0)
            file = _open_file(path, truncate=True)
            self._write_header(file, path)
            segments.append(_Segment(0, path, file, FILE_HEADER_SIZE))
        if self.cut is not None:
            self.reason = _cut_reason(*self.cut, self.truncated_bytes)
        # Gone before anything is appended: a later crash must not skip checks of newer bytes.
        checkpoint_path = self.directory / CHECKPOINT_NAME
        if checkpoint_path.exists():
            checkpoint_path.unlink()
        self._fsync_directory()
        report = RecoveryReport(
            segments=len(segments),
            batches=self.batches,
            truncated=self.reason is not None,
            truncated_bytes=self.truncated_bytes,
            reason=self.reason,
            removed_files=tuple(self.removed),
        )
        return segments, report

    def _read_checkpoint(self) -> _Checkpoint | None:
        try:
            data = (self.directory / CHECKPOINT_NAME).read_bytes()
        except FileNotFoundError:
            return None
        if len(data) != _CHECKPOINT.size + _CRC.size:
            return None
        body = data[: _CHECKPOINT.size]
        (crc,) = _CRC.unpack_from(data, _CHECKPOINT.size)
        magic, version, base_offset, length = _CHECKPOINT.unpack(body)
        if magic != _CHECKPOINT_MAGIC or version != FORMAT_VERSION or crc != crc32c.crc32c(body):
            log.warning("%s: ignoring an invalid recovery point; verifying everything", self.directory)
            return None
        return _Checkpoint(base_offset, length)

    def _open_segment(
        self,
        base_offset: int,
        path: Path,
        previous: _Segment | None,
        checkpoint: _Checkpoint | None,
        last: bool,
    ) -> tuple[_Segment | None, bool]:
        """The segment (None if removed) and whether recovery stops here (everything later is cut)."""
        file = _open_file(path)
        file_size = os.fstat(file.fd).st_size
        if previous is not None and not self.config.compacted:
            expected = previous.last_offset + 1 if previous.count else previous.base_offset
            if base_offset != expected:
                problem = f"base offset {base_offset} does not follow {expected}"
                return self._drop(file, path, file_size, problem)

        header = os.pread(file.fd, FILE_HEADER_SIZE, 0)
        if len(header) < FILE_HEADER_SIZE or (last and header == bytes(FILE_HEADER_SIZE)):
            if not last:
                return self._drop(file, path, file_size, f"file header torn ({len(header)} bytes)")
            # A crash while creating the segment: nothing of it was ever acknowledged.
            if any(header):
                log.warning("%s: rewriting the torn file header of %s", self.directory, path.name)
            self.ops.truncate(file.fd, 0)
            if file_size > FILE_HEADER_SIZE:
                self._cut(path, FILE_HEADER_SIZE, file_size - FILE_HEADER_SIZE, "file header zeroed")
            self._write_header(file, path)
            return _Segment(base_offset, path, file, FILE_HEADER_SIZE), True
        magic, version, _reserved = _FILE_HEADER.unpack(header)
        if magic != FILE_MAGIC:
            raise LogError(f"{path} is not a raygroups log segment (magic {magic!r})")
        if version > FORMAT_VERSION or version < 1:
            raise LogError(
                f"{path} has log format version {version}; this raygroups reads versions 1..{FORMAT_VERSION}"
            )

        segment = _Segment(base_offset, path, file, FILE_HEADER_SIZE)
        if previous is None:
            next_offset, exact = base_offset, False  # the very first batch of the log
        elif previous.count:
            next_offset, exact = max(previous.last_offset + 1, base_offset), not self.config.compacted
        else:
            next_offset, exact = base_offset, not self.config.compacted
        reader = _ChunkReader(file.fd, file_size)
        position = FILE_HEADER_SIZE
        problem: str | None = None
        while position < file_size:
            checked = _check_batch(reader, position, file_size, next_offset, exact, base_offset, checkpoint)
            if isinstance(checked, str):
                problem = checked
                break
            segment.add(checked, position)
            position += checked.size
            next_offset, exact = checked.last_offset + 1, not self.config.compacted
        if problem is not None:
            self.ops.truncate(file.fd, position)
            self.ops.fsync(file.fd)
            self._cut(path, position, file_size - position, problem)
        segment.publish(position)
        return segment, problem is not None

    def _drop(self, file: _File, path: Path, file_size: int, problem: str) -> tuple[None, bool]:
        file.close()
        path.unlink()
        self.removed.append(path.name)
        self._cut(path, 0, file_size, problem)
        return None, True

    def _cut(self, path: Path, position: int, size: int, problem: str) -> None:
        self.truncated_bytes += size
        self.cut = (path.name, problem, position)

    def _write_header(self, file: _File, path: Path) -> None:
        data = _file_header()
        if self.ops.write(file.fd, data) != len(data):
            raise LogWriteError(f"short write of the file header of {path}")
        self.ops.fsync(file.fd)

    def _fsync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.ops.fsync(fd)
        finally:
            os.close(fd)


def _cut_reason(segment_name: str, problem: str, position: int, truncated_bytes: int) -> str:
    """The one-line report of a cut, the same whether open() or a read found the problem."""
    return f"segment {segment_name}: {problem} at byte {position}; truncated {truncated_bytes} bytes"


def _check_batch(
    reader: _ChunkReader,
    position: int,
    file_size: int,
    next_offset: int,
    exact: bool,
    segment_base: int,
    checkpoint: _Checkpoint | None,
) -> BatchHeader | str:
    """The header of the batch at position if it validly continues the log, else why not."""
    remaining = file_size - position
    if remaining < HEADER_SIZE:
        return f"torn batch header ({remaining} of {HEADER_SIZE} bytes)"
    try:
        header = recordbatch.parse_header(reader.view(position, HEADER_SIZE))
    except BatchError as exc:
        return str(exc)
    if header.size > remaining:
        return f"batch of {header.size} bytes runs past the end of the file ({remaining} left)"
    if header.last_offset_delta < 0:
        return f"negative last offset delta {header.last_offset_delta}"
    if header.base_offset < next_offset or (exact and header.base_offset != next_offset):
        return f"base offset {header.base_offset} where {next_offset} was expected"
    if checkpoint is None or not checkpoint.covers(segment_base, position + header.size):
        if crc32c.crc32c(reader.view(position, header.size)[CRC_START:]) != header.crc:
            return "CRC mismatch"
    return header


# -- compaction helpers: header rewrites recordbatch.encode_records cannot express ------------------


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


def _write_error(action: str, exc: OSError) -> LogWriteError:
    code = exc.errno
    if code is None and len(exc.args) == 1 and isinstance(exc.args[0], int):
        code = exc.args[0]  # OSError(errno.ENOSPC) keeps the code only in args
    name = errno_module.errorcode.get(code, "") if code is not None else ""
    detail = exc.strerror or (os.strerror(code) if code is not None else str(exc))
    return LogWriteError(f"{action} failed: {name} {detail}".replace("  ", " "), code)
