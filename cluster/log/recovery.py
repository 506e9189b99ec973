"""Recovery: validate the log, cut it at the first invalid batch, report what was cut.

One concept, two moments (Kafka's LogLoader / LogSegment.recover truncate at the first invalid
batch and log it):
- at open(), Recovery walks every segment, checking framing and offsets everywhere and CRCs past
  the recovery point;
- a CRC that open() skipped (below the recovery point) is checked when the batch is first read,
  and a failure there is cut the same way (plan_cut / remove_cut) and added to the same report.
Nothing past a cut is ever served or replayed.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from cluster import recordbatch
from cluster.log.checkpoint import TMP_NAME, Checkpoint, read_checkpoint, remove_checkpoint
from cluster.log.epoch_checkpoint import TMP_NAME as EPOCH_TMP_NAME
from cluster.log.partition_metadata import TMP_NAME as METADATA_TMP_NAME
from cluster.log.config import LogConfig
from cluster.log.errors import LogError, LogWriteError
from cluster.log.files import ChunkReader, LogFiles, SegmentFile, open_file
from cluster.log.format import (
    CLEANED_SUFFIX,
    FILE_HEADER,
    FILE_HEADER_SIZE,
    FILE_MAGIC,
    FORMAT_VERSION,
    file_header,
    segment_base_offset,
    segment_name,
)
from cluster.log.segment import Segment
from cluster.recordbatch import CRC_START, HEADER_SIZE, BatchError, BatchHeader

log = logging.getLogger(__name__)

_CRC = struct.Struct(">I")
_CRC_POS = 17  # the crc field in recordbatch.HEADER's layout


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found, at open() and at any later read that found a batch open() trusted.

    `truncated` is True when log data was cut (a torn or corrupt tail, a broken segment chain);
    `reason` says where and why in one line. `removed_files` names every file recovery deleted:
    stray `.cleaned` files and leftovers of a finished compaction (neither is a truncation) as
    well as the segments after a truncation point.
    """

    segments: int
    batches: int
    truncated: bool
    truncated_bytes: int
    reason: str | None
    removed_files: tuple[str, ...]


NOTHING_FOUND = RecoveryReport(0, 0, False, 0, None, ())


def cut_reason(segment: str, problem: str, position: int, truncated_bytes: int) -> str:
    """The one-line report of a cut, the same whether open() or a read found the problem."""
    return f"segment {segment}: {problem} at byte {position}; truncated {truncated_bytes} bytes"


class Recovery:
    """open()'s walk over the directory: validate, cut a bad tail, drop leftovers, build the index."""

    def __init__(self, files: LogFiles, config: LogConfig) -> None:
        self.files = files
        self.directory = files.directory
        self.config = config
        self.removed: list[str] = []
        self.truncated_bytes = 0
        self.cut: tuple[str, str, int] | None = None  # (segment, problem, position) of the last cut
        self.batches = 0
        # The recovery point trusted here: the batches it covers still need their CRC checked.
        self.checkpoint: Checkpoint | None = None

    def run(self) -> tuple[list[Segment], RecoveryReport]:
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(CLEANED_SUFFIX) or path.name in (TMP_NAME, EPOCH_TMP_NAME, METADATA_TMP_NAME):
                path.unlink()  # an interrupted compaction or checkpoint write; the originals are intact
                self.removed.append(path.name)
        checkpoint = self.checkpoint = read_checkpoint(self.files)
        files = sorted(
            (base, path)
            for path in self.directory.iterdir()
            if (base := segment_base_offset(path.name)) is not None
        )

        segments: list[Segment] = []
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
            file = open_file(path, truncate=True)
            self._write_header(file, path)
            segments.append(Segment(0, path, file, FILE_HEADER_SIZE))
        reason = cut_reason(*self.cut, self.truncated_bytes) if self.cut is not None else None
        remove_checkpoint(self.files)
        self.files.fsync_directory()
        report = RecoveryReport(
            segments=len(segments),
            batches=self.batches,
            truncated=reason is not None,
            truncated_bytes=self.truncated_bytes,
            reason=reason,
            removed_files=tuple(self.removed),
        )
        return segments, report

    def _open_segment(
        self,
        base_offset: int,
        path: Path,
        previous: Segment | None,
        checkpoint: Checkpoint | None,
        last: bool,
    ) -> tuple[Segment | None, bool]:
        """The segment (None if removed) and whether recovery stops here (everything later is cut)."""
        file = open_file(path)
        file_size = os.fstat(file.fd).st_size
        if previous is not None and not self.config.compacted:
            expected = previous.end_offset
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
            self.files.truncate(file.fd, 0)
            if file_size > FILE_HEADER_SIZE:
                self._cut(path, FILE_HEADER_SIZE, file_size - FILE_HEADER_SIZE, "file header zeroed")
            self._write_header(file, path)
            return Segment(base_offset, path, file, FILE_HEADER_SIZE), True
        magic, version, _reserved = FILE_HEADER.unpack(header)
        if magic != FILE_MAGIC:
            raise LogError(f"{path} is not a raygroups log segment (magic {magic!r})")
        if version > FORMAT_VERSION or version < 1:
            raise LogError(
                f"{path} has log format version {version}; this raygroups reads versions 1..{FORMAT_VERSION}"
            )

        segment = Segment(base_offset, path, file, FILE_HEADER_SIZE)
        if previous is None:
            next_offset, exact = base_offset, False  # the very first batch of the log
        elif previous.count:
            next_offset, exact = max(previous.last_offset + 1, base_offset), not self.config.compacted
        else:
            next_offset, exact = base_offset, not self.config.compacted
        reader = ChunkReader(file.fd, file_size)
        position = FILE_HEADER_SIZE
        problem: str | None = None
        while position < file_size:
            checked = check_batch(reader, position, file_size, next_offset, exact, base_offset, checkpoint)
            if isinstance(checked, str):
                problem = checked
                break
            segment.add(checked, position)
            position += checked.size
            next_offset, exact = checked.last_offset + 1, not self.config.compacted
        if problem is not None:
            self.files.truncate(file.fd, position)
            self.files.fsync(file.fd)
            self._cut(path, position, file_size - position, problem)
        segment.publish(position)
        return segment, problem is not None

    def _drop(self, file: SegmentFile, path: Path, file_size: int, problem: str) -> tuple[None, bool]:
        file.close()
        path.unlink()
        self.removed.append(path.name)
        self._cut(path, 0, file_size, problem)
        return None, True

    def _cut(self, path: Path, position: int, size: int, problem: str) -> None:
        self.truncated_bytes += size
        self.cut = (path.name, problem, position)

    def _write_header(self, file: SegmentFile, path: Path) -> None:
        data = file_header()
        if self.files.ops.write(file.fd, data) != len(data):
            raise LogWriteError(f"short write of the file header of {path}")
        self.files.fsync(file.fd)


def check_batch(
    reader: ChunkReader,
    position: int,
    file_size: int,
    next_offset: int,
    exact: bool,
    segment_base: int,
    checkpoint: Checkpoint | None,
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


def crc_matches(batch: memoryview) -> bool:
    """Whether a whole batch's CRC-32C holds (for reads of batches open() did not check)."""
    (crc,) = _CRC.unpack_from(batch, _CRC_POS)
    return crc32c.crc32c(batch[CRC_START:]) == crc


# -- a cut found after open, by a read of a batch open() trusted -------------------------------


@dataclass(frozen=True, slots=True)
class Cut:
    """The log after cutting it before one batch: what stays, where it ends, the updated report."""

    segment: Segment  # the segment cut, as it was
    position: int  # byte of the segment where the cut is
    removed: list[Segment]  # the segments after it, gone whole
    segments: list[Segment]  # what stays: those before, and the cut one truncated
    end_offset: int
    reason: str
    report: RecoveryReport


def plan_cut(
    segments: list[Segment], segment: Segment, index: int, problem: str, before: RecoveryReport
) -> Cut:
    """Cut `segments` before batch `index` of `segment`, as open() would cut there."""
    k = segments.index(segment)
    removed = segments[k + 1 :]
    position = segment.positions[index]
    kept = [*segments[:k], segment.truncated(index)]
    cut_bytes = segment.size - position + sum(s.size for s in removed)
    reason = cut_reason(segment.path.name, problem, position, cut_bytes)
    report = RecoveryReport(
        segments=len(kept),
        batches=sum(s.count for s in kept),
        truncated=True,
        truncated_bytes=before.truncated_bytes + cut_bytes,
        reason=reason if before.reason is None else f"{before.reason}; then {reason}",
        removed_files=before.removed_files + tuple(s.path.name for s in removed),
    )
    return Cut(segment, position, removed, kept, kept[-1].end_offset, reason, report)


def remove_cut(files: LogFiles, cut: Cut) -> None:
    """Make the cut on disk: truncate the segment, delete the later ones (their fds close by GC)."""
    files.truncate(cut.segment.file.fd, cut.position)
    files.fsync(cut.segment.file.fd)
    for segment in cut.removed:
        segment.path.unlink(missing_ok=True)
    files.fsync_directory()
