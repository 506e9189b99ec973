"""PartitionLog: one partition's segmented, checksummed, append-only log (SPEC.md §4).

Threads: mutating calls (append, compact, close, delete) come one at a time, possibly from a worker
thread, while reads (read, batches, offset_for_timestamp, max_timestamp_batch, the properties) may
run concurrently on another thread. Nothing takes a lock; instead
- bytes are written (and fsynced, with flush=batch) before the index entries that describe them,
  and the index entries before `end_offset`, so a reader never sees an offset it cannot read;
- a segment's `count` is the reader's bound into its index arrays (appends grow the arrays first);
- the segment list is replaced, never mutated, and readers take one snapshot of it;
- a segment's file is closed only by garbage collection of its last holder (or by close()), so a
  reader still walking a segment that compaction replaced keeps reading the old inode.
The exception is batches() finding a corrupt batch open() trusted: it cuts the log, a mutation,
so the replay that calls it runs where mutating calls may (before the log is shared, or compact()).
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from cluster import recordbatch
from cluster.log import reads
from cluster.log.checkpoint import Checkpoint, write_checkpoint
from cluster.log.compaction import CompactionReport, compact_segments, latest_offsets
from cluster.log.epoch_checkpoint import read_epoch_checkpoint, write_epoch_checkpoint
from cluster.log.config import FlushPolicy, LogConfig
from cluster.log.errors import LogError, LogWriteError, OffsetOutOfRange, write_error
from cluster.log.files import ChunkReader, FileOps, LogFiles, open_file, remove_directory
from cluster.log.format import FILE_HEADER_SIZE, file_header, segment_name
from cluster.log.recovery import NOTHING_FOUND, Recovery, RecoveryReport, crc_matches, plan_cut, remove_cut
from cluster.log.segment import Segment
from cluster.recordbatch import BatchHeader

log = logging.getLogger(__name__)


@dataclass(slots=True)
class StagedAppend:
    """Batches written past the end of a segment (or into a new one) and not yet visible."""

    segment: Segment
    new_segment: bool
    start: int  # where the first batch begins in the segment file
    base_offsets: list[int]
    headers: Sequence[BatchHeader]
    end_offset: int  # the log's end offset once committed

    @property
    def fd(self) -> int:
        return self.segment.file.fd

    @property
    def action(self) -> str:
        return f"{'roll to' if self.new_segment else 'append to'} {self.segment.path.name}"


class PartitionLog:
    """One partition's log; see the module docstring for the threading rules."""

    def __init__(self, directory: Path, config: LogConfig, file_ops: FileOps, segments: list[Segment]) -> None:
        self.directory = directory
        self.config = config
        self._files = LogFiles(directory, file_ops)
        self._segments = segments
        self.end_offset = segments[-1].end_offset
        self.recovery: RecoveryReport = NOTHING_FOUND
        # The recovery point open() trusted: batches it covers had no CRC check yet; batches() does it.
        self._unverified: Checkpoint | None = None
        self._failed: LogWriteError | None = None
        self._closed = False

    @classmethod
    def open(cls, directory: Path, config: LogConfig = LogConfig(), file_ops: FileOps | None = None) -> PartitionLog:
        directory = Path(directory)
        files = LogFiles(directory, file_ops or FileOps())
        recovery = Recovery(files, config)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            segments, report = recovery.run()
        except OSError as exc:  # a disk that cannot even be read or repaired: a storage error
            raise write_error(f"opening {directory}", exc) from exc
        partition_log = cls(directory, config, files.ops, segments)
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

    def append(
        self, batches: Sequence[bytearray], leader_epoch: int, headers: Sequence[BatchHeader] | None = None
    ) -> list[int]:
        """Assign offsets to `batches` (patched in place), write them durably, return their base offsets.

        `headers` are the batches' parsed headers when the caller has them already (the produce
        path validated every batch); without them each batch is parsed and checked here.
        """
        staged = self.stage(batches, leader_epoch, headers)
        if staged is None:
            return []
        return self._sync_and_commit(staged)

    def _sync_and_commit(self, staged: StagedAppend) -> list[int]:
        if self.config.flush is FlushPolicy.BATCH:
            try:
                self._files.fsync(staged.fd)
                if staged.new_segment:
                    self._files.fsync_directory()
            except OSError as exc:
                self.abandon(staged)
                raise write_error(staged.action, exc) from exc
        return self.commit(staged)

    def stage(
        self, batches: Sequence[bytearray], leader_epoch: int, headers: Sequence[BatchHeader] | None = None
    ) -> StagedAppend | None:
        """append() up to the sync: offsets patched and bytes written, nothing visible to readers.

        The caller then makes the bytes durable (an fsync of `fd`, and of the directory for a new
        segment, or one syncfs covering several logs: group_commit.py) and calls commit(), or
        abandon() if that failed. Nothing else may change the log between the two.
        """
        self._check_writable()
        if not batches:
            return None
        return self._stage(batches, leader_epoch, headers)

    def _stage(
        self, batches: Sequence[bytearray], leader_epoch: int | None, headers: Sequence[BatchHeader] | None
    ) -> StagedAppend:
        if headers is None:
            headers = []
            for batch in batches:
                header = recordbatch.parse_header(batch)
                if header.size != len(batch) or header.last_offset_delta < 0:
                    raise ValueError("append() takes whole record batches, one per element")
                headers.append(header)
        elif len(headers) != len(batches):
            raise ValueError("append() takes one header per batch")
        next_offset = self.end_offset
        base_offsets: list[int] = []
        for batch, header in zip(batches, headers):
            if leader_epoch is not None:
                recordbatch.assign_offset(batch, next_offset, leader_epoch)
            elif header.base_offset < next_offset:
                raise ValueError(f"replicated batch at offset {header.base_offset} is below the log end {next_offset}")
            else:
                next_offset = header.base_offset  # a compacted leader's batches may leave gaps
            base_offsets.append(next_offset)
            next_offset += header.last_offset_delta + 1
        payload = b"".join(batches)
        active = self._segments[-1]
        if active.count > 0 and active.size + len(payload) > self.config.segment_bytes:
            segment = self._write_new_segment(self.end_offset, payload)
            return StagedAppend(segment, True, FILE_HEADER_SIZE, base_offsets, headers, next_offset)
        self._write_to_active(active, payload)
        return StagedAppend(active, False, active.size, base_offsets, headers, next_offset)

    def append_replicated(self, data: bytes | bytearray | memoryview) -> list[BatchHeader]:
        """A follower's append (Kafka's appendAsFollower): whole batches as the leader's log holds
        them, offsets and leader epochs kept, each checked (CRC, and that it starts at or past
        this log's end: a compacted log has gaps), written as durably as append() writes. Returns their headers (the follower's epoch
        cache and producer state learn from them). A partial batch at the end of `data` is left
        out (a fetch answer cut at its byte limit); a corrupt one refuses the whole append."""
        self._check_writable()
        batches: list[bytearray] = []
        headers: list[BatchHeader] = []
        view = memoryview(data)
        for position, header in recordbatch.iter_batches(view):
            if not recordbatch.crc_ok(view, position, header):
                raise recordbatch.BatchError(
                    ErrorCode.corrupt_message, f"replicated batch at offset {header.base_offset} fails its CRC"
                )
            batches.append(bytearray(view[position:position + header.size]))
            headers.append(header)
        if not batches:
            return []
        staged = self._stage(batches, None, headers)
        self._sync_and_commit(staged)
        return headers

    def commit(self, staged: StagedAppend) -> list[int]:
        """Index the staged batches and make them visible (after they are durable); their offsets."""
        segment = staged.segment
        position = staged.start
        for base_offset, header in zip(staged.base_offsets, staged.headers):
            size = header.size
            segment.index(base_offset, base_offset + header.last_offset_delta, position, size, header.max_timestamp)
            position += size
        segment.publish(position)
        if staged.new_segment:
            self._segments = [*self._segments, segment]
        self.end_offset = staged.end_offset
        return staged.base_offsets

    def abandon(self, staged: StagedAppend) -> None:
        """Undo a staged append whose sync failed: the log is as before stage()."""
        segment = staged.segment
        if staged.new_segment:
            segment.file.close()
            try:
                segment.path.unlink()
            except OSError:
                pass  # an empty or partial last segment is cleaned by recovery
            return
        try:
            self._files.truncate(segment.file.fd, segment.size)
        except OSError as truncate_exc:
            # The file may now hold bytes the index does not: refuse writes until a reopen lets
            # recovery (which CRC-checks everything past the last clean close) cut them.
            self._failed = write_error(f"truncating {segment.path.name} after a failed append", truncate_exc)
            log.error("%s: %s; the log refuses appends until reopened", self.directory, self._failed)

    def _check_writable(self) -> None:
        # A failed log says so first, closed or not: the runtime keeps a failed log it could not
        # reopen, and each append to it must fail as a write does, so that the runtime answers
        # the batch and tries the reopen again (a plain LogError there went unanswered: a hang).
        if self._failed is not None:
            message = f"log {self.directory} failed earlier and must be reopened: {self._failed}"
            raise LogWriteError(message, self._failed.errno)
        if self._closed:
            raise LogError(f"log {self.directory} is closed")

    def _write_to_active(self, segment: Segment, payload: bytes) -> None:
        try:
            self._files.write_all(segment.file.fd, payload)
        except OSError as exc:
            self.abandon(StagedAppend(segment, False, segment.size, [], (), self.end_offset))
            raise write_error(f"append to {segment.path.name}", exc) from exc

    def _write_new_segment(self, base_offset: int, payload: bytes) -> Segment:
        """A new segment holding payload, written (not yet synced) before anyone can see it; removed on failure."""
        path = self.directory / segment_name(base_offset)
        try:
            file = open_file(path, truncate=True)
        except OSError as exc:
            raise write_error(f"create {path.name}", exc) from exc
        segment = Segment(base_offset, path, file, FILE_HEADER_SIZE)
        try:
            self._files.write_all(file.fd, file_header() + payload)
        except OSError as exc:
            self.abandon(StagedAppend(segment, True, FILE_HEADER_SIZE, [], (), self.end_offset))
            raise write_error(f"roll to {path.name}", exc) from exc
        return segment

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, up_to: int | None = None) -> bytes:
        """Whole batches from one segment, from the one holding `offset` (KIP-74: at least one batch),
        none after the one holding `up_to` when given."""
        end = self.end_offset
        segments = self._segments
        if offset < segments[0].base_offset or offset > end:
            raise OffsetOutOfRange(
                f"offset {offset} outside [{segments[0].base_offset}, {end}] of {self.directory.name}"
            )
        if offset == end:
            return b""
        return reads.read_from(segments, end, offset, max_bytes, up_to)

    def batches(self, from_offset: int = 0) -> Iterator[bytes]:
        """Every batch ending at or after from_offset, in order (the replay path).

        open() trusted the bytes below the recovery point without a CRC check; this is where they
        are checked, because replay reads them anyway. The first that fails is handled as open()
        handles a corrupt batch: the log is cut there, the cut is added to `recovery`, and the
        iteration ends at the cut.
        """
        end = self.end_offset
        unverified = self._unverified
        segments = self._segments
        for segment in segments:
            count = segment.count
            i = bisect_left(segment.last_offsets, from_offset, 0, count)
            if i == count:
                continue
            reader = ChunkReader(segment.file.fd, segment.size)
            for j in range(i, count):
                if segment.base_offsets[j] >= end:
                    return
                position, size = segment.positions[j], segment.sizes[j]
                view = reader.view(position, size)
                if unverified is not None and unverified.covers(segment.base_offset, position + size):
                    if not crc_matches(view):
                        self._cut_at(segment, j, "CRC mismatch")
                        return
                yield bytes(view)
        if from_offset <= segments[0].base_offset:
            self._unverified = None  # every batch has been checked once: later reads skip the CRCs

    def truncate_to(self, end_offset: int, problem: str) -> None:
        """Cut every batch at or past `end_offset` (Kafka's Log.truncateTo): after a reopen, the
        batches of an append that was answered as failed, which recovery keeps when they are whole
        (their sync failed, and so did cutting them off). Raises LogWriteError if the cut fails."""
        for segment in self._segments:  # the first batch at or past end_offset, and all after it
            i = bisect_left(segment.base_offsets, end_offset, 0, segment.count)
            if i < segment.count:
                self._cut_at(segment, i, problem)
                return

    def truncate_replica(self, offset: int) -> None:
        """A follower's truncation (Kafka's UnifiedLog.truncateTo): every batch holding `offset` or
        a later one goes, a batch that straddles it included, so the log ends at a batch boundary
        at or below `offset` (end_offset says where). A routine step of replication, not damage:
        the recovery report is left as it was. Only on a follower, whose log nobody else reads
        while it follows: a reader holding the old index could read bytes a later append writes
        at the same positions. Raises LogWriteError if the cut fails."""
        self._check_writable()
        for segment in self._segments:
            i = bisect_right(segment.last_offsets, offset - 1, 0, segment.count)  # first last_offset >= offset
            if i < segment.count:
                self._cut_at(segment, i, "a follower's truncation", damage=False)
                return

    def _cut_at(self, segment: Segment, index: int, problem: str, damage: bool = True) -> None:
        """Cut the log before batch `index` of segment, as recovery at open cuts a corrupt tail
        (`damage`: recorded in the recovery report and logged as a warning)."""
        if segment not in self._segments:
            return  # a compaction replaced it, and its own read of this batch made the cut
        cut = plan_cut(self._segments, segment, index, problem, self.recovery)
        # Lower end_offset first: a concurrent reader bounded by it never reaches the cut bytes.
        self.end_offset = cut.end_offset
        self._segments = cut.segments
        if damage:
            self.recovery = cut.report
            log.warning("%s: %s", self.directory, cut.reason)
        try:
            remove_cut(self._files, cut)
        except OSError as exc:
            # The files may still hold the corrupt bytes: no appends after them, and no recovery
            # point at close, so the next open verifies (and cuts) everything.
            self._failed = write_error(f"cutting {segment.path.name} at byte {cut.position}", exc)
            raise self._failed from exc

    def read_epoch_history(self) -> list[tuple[int, int]] | None:
        """The leader-epoch checkpoint beside the segments (epoch_checkpoint.py), or None."""
        return read_epoch_checkpoint(self._files)

    def write_epoch_history(self, entries: list[tuple[int, int]]) -> None:
        """Replace the leader-epoch checkpoint, durably; LogWriteError if the disk refuses."""
        try:
            write_epoch_checkpoint(self._files, entries)
        except OSError as exc:
            raise write_error("writing the leader-epoch checkpoint", exc) from exc

    def batch_headers(self) -> Iterator[BatchHeader]:
        """The 61-byte header of every batch, in order, without the records (producer state rebuild)."""
        return reads.batch_headers(self._segments, self.end_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> bytes | None:
        """The first batch whose max_timestamp >= timestamp_ms (ListOffsets by time), or None."""
        return reads.offset_for_timestamp(self._segments, self.end_offset, timestamp_ms)

    def max_timestamp_batch(self) -> bytes | None:
        """The first batch with the largest max_timestamp (ListOffsets MAX_TIMESTAMP), or None."""
        return reads.max_timestamp_batch(self._segments, self.end_offset)

    # -- compaction ------------------------------------------------------------------------

    def compact(self, now_ms: int, below: int | None = None) -> CompactionReport:
        """Rewrite the closed segments that end below `below` into one, keeping the latest record
        per key among the records below it (compaction.py). None: below the log end.

        A replicated log passes its high watermark: Kafka's cleaner never cleans past the last
        stable offset. A newer record above it could otherwise delete the committed record before
        it, and then be cut away by a truncation to the new leader's log, leaving the key without
        either."""
        if not self.config.compacted:
            raise LogError(f"log {self.directory} is not compacted")
        self._check_writable()
        if len(self._segments) < 2:
            return CompactionReport(0, 0, 0, 0, 0)
        limit = self.end_offset if below is None else min(below, self.end_offset)
        # Before the segments are taken: this read may cut the log at a corrupt batch.
        latest = latest_offsets(self.batches(), limit)
        segments = self._segments
        count = 0
        while count < len(segments) - 1 and segments[count].end_offset <= limit:
            count += 1
        closed = segments[:count]
        if not closed:
            return CompactionReport(0, 0, 0, 0, 0)
        horizon = now_ms - self.config.tombstone_retention_ms
        cleaned, report = compact_segments(self._files, closed, latest, horizon)
        self._segments = [cleaned, *segments[count:]]
        for segment in closed[1:]:
            try:
                segment.path.unlink()
            except OSError:
                log.warning("could not remove %s after compaction; recovery will", segment.path, exc_info=True)
        try:
            self._files.fsync_directory()
        except OSError:
            log.warning("fsync of %s after compaction failed", self.directory, exc_info=True)
        return report

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
                if self.config.flush is FlushPolicy.NONE:  # with flush=batch every append already was
                    for segment in segments:
                        self._files.fsync(segment.file.fd)
                write_checkpoint(self._files, Checkpoint(segments[-1].base_offset, segments[-1].size))
            except OSError:
                log.warning("%s: no recovery point written; next open verifies everything", self.directory,
                            exc_info=True)
        for segment in segments:
            segment.file.close()

    def delete(self) -> None:
        """Close without a checkpoint and remove the directory (DeleteTopics)."""
        self._closed = True
        for segment in self._segments:
            segment.file.close()
        remove_directory(self.directory)
