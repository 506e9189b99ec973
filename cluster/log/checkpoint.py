"""The recovery point: how far the last clean close left the log durable and verified.

close() writes it; open() reads it and skips the CRC check of the batches it covers, then deletes
it before anything is appended (a later crash must not let open() skip checks of newer bytes).
The CRCs open() skipped are checked when those batches are first read (PartitionLog.batches()),
so a byte flipped below the recovery point is still found and cut, only later.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

import crc32c

from cluster.log.files import LogFiles
from cluster.log.format import FORMAT_VERSION, TMP_SUFFIX

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "recovery-point"
TMP_NAME = CHECKPOINT_NAME + TMP_SUFFIX
_MAGIC = b"RGRCVPT\x00"
_BODY = struct.Struct(">8sIqq")  # magic, version, last segment's base offset, its byte length
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    base_offset: int  # of the last segment at close
    length: int  # its byte length at close

    def covers(self, segment_base: int, batch_end: int) -> bool:
        """Whether a batch ending at byte batch_end of the segment at segment_base was closed cleanly."""
        if segment_base != self.base_offset:
            return segment_base < self.base_offset
        return batch_end <= self.length


def read_checkpoint(files: LogFiles) -> Checkpoint | None:
    """The recovery point, or None when there is none or it is invalid (then open checks everything)."""
    try:
        data = (files.directory / CHECKPOINT_NAME).read_bytes()
    except FileNotFoundError:
        return None
    if len(data) != _BODY.size + _CRC.size:
        return None
    body = data[: _BODY.size]
    (crc,) = _CRC.unpack_from(data, _BODY.size)
    magic, version, base_offset, length = _BODY.unpack(body)
    if magic != _MAGIC or version != FORMAT_VERSION or crc != crc32c.crc32c(body):
        log.warning("%s: ignoring an invalid recovery point; verifying everything", files.directory)
        return None
    return Checkpoint(base_offset, length)


def write_checkpoint(files: LogFiles, checkpoint: Checkpoint) -> None:
    """Write-to-temp, fsync, rename, fsync the directory: a crash leaves the old file or the new one."""
    body = _BODY.pack(_MAGIC, FORMAT_VERSION, checkpoint.base_offset, checkpoint.length)
    files.replace_file(CHECKPOINT_NAME, body + _CRC.pack(crc32c.crc32c(body)), TMP_NAME)


def remove_checkpoint(files: LogFiles) -> None:
    path = files.directory / CHECKPOINT_NAME
    if path.exists():
        path.unlink()
