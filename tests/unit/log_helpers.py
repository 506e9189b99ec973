"""Helpers shared by the cluster/log/ tests: batches, a disk that fails on demand, crashes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from cluster import recordbatch as rb
from cluster.log import FileOps, LogConfig, PartitionLog

SMALL = LogConfig(segment_bytes=400)
COMPACTED = LogConfig(segment_bytes=400, compacted=True, tombstone_retention_ms=1000)


# -- helpers --------------------------------------------------------------------------------


def batch(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int = 1_000) -> bytearray:
    """A fresh batch as a coordinator (or a producer) hands it to append: offsets 0..n-1."""
    return bytearray(rb.encode_records([(i, k, v) for i, (k, v) in enumerate(records)], timestamp_ms))


def one(i: int, timestamp_ms: int = 1_000, size: int = 8) -> bytearray:
    return batch([(b"key-%d" % i, b"v" * size)], timestamp_ms)


def split(data: bytes) -> list[bytes]:
    """The whole batches in data; fails on a partial one."""
    out = [bytes(data[pos : pos + header.size]) for pos, header in rb.iter_batches(data)]
    assert sum(map(len, out)) == len(data), "read returned a partial batch"
    return out


def header(data: bytes) -> rb.BatchHeader:
    return rb.parse_header(data)


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def crash(partition_log: PartitionLog) -> None:
    """Drop the log without close(): no recovery point, files closed by the garbage collector."""
    del partition_log


class FlakyOps(FileOps):
    """A disk that fills up on demand; flags flip back to healthy without reopening the log."""

    def __init__(self) -> None:
        self.fail_write = False
        self.partial_write_first = False  # write half of the first chunk, then fail
        self.fail_fsync = False
        self.fail_truncate = False

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self.fail_write:
            if self.partial_write_first and len(data) > 1:
                self.partial_write_first = False
                return os.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC)
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.fail_fsync:
            raise OSError(errno.EIO, "Input/output error")
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        if self.fail_truncate:
            raise OSError(errno.EIO, "Input/output error")
        os.ftruncate(fd, size)


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [r for b in log.batches() for r in rb.decode_records(b)]
