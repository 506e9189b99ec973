"""File I/O for the log: the FileOps seam, segment file descriptors, chunked reads, durable writes.

Every write, fsync and truncate the log makes goes through FileOps, so a test can make the disk
fail like a full one (tests/full_disk.py) at any of them.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

# Recovery and batches() read this much per syscall: replaying a log is one large sequential read,
# not one pread per (often ~100-byte) coordinator batch.
READ_CHUNK = 1024 * 1024


class FileOps:
    """The writes the log makes, as a seam: tests swap in one that fails like a full disk."""

    def write(self, fd: int, data: bytes | memoryview) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)


class SegmentFile:
    """An open segment file descriptor, closed when its last holder lets go.

    A raw fd (not a FileIO) so reads are os.pread, which shares no file position between threads;
    closed by garbage collection so a reader still walking a segment that compaction or a cut
    replaced keeps reading the old inode.
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


def open_file(path: Path, truncate: bool = False) -> SegmentFile:
    # O_APPEND: after a failed write is truncated away, the next write lands at the new end.
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if truncate else 0)
    return SegmentFile(os.open(path, flags, 0o644))


class ChunkReader:
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


class LogFiles:
    """One log directory's writes through its FileOps: whole writes, fsyncs, directory fsyncs."""

    def __init__(self, directory: Path, ops: FileOps) -> None:
        self.directory = directory
        self.ops = ops

    def write_all(self, fd: int, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            written = self.ops.write(fd, view)
            if written <= 0:
                raise OSError(errno.EIO, "write made no progress")
            view = view[written:]

    def fsync(self, fd: int) -> None:
        self.ops.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        self.ops.truncate(fd, size)

    def replace_file(self, name: str, data: bytes, tmp_name: str, exclusive: bool = False) -> None:
        """Write `name` whole or not at all: to `tmp_name`, fsync, rename over `name`, fsync the
        directory (a crash leaves the old file or the new one; open() removes a stray tmp file).
        `exclusive`: only if `name` does not exist (FileExistsError otherwise), for a file several
        processes may race to create: link(2), unlike rename, never replaces, so exactly one wins."""
        tmp_path = self.directory / tmp_name
        fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self.write_all(fd, data)
            self.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            try:
                os.link(tmp_path, self.directory / name)
            finally:
                os.unlink(tmp_path)
        else:
            os.rename(tmp_path, self.directory / name)
        self.fsync_directory()

    def fsync_directory(self) -> None:
        """Make creates, renames and unlinks in the directory durable."""
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.ops.fsync(fd)
        finally:
            os.close(fd)


def remove_directory(directory: Path) -> None:
    """Remove a log directory and make that durable in its parent (best effort: DeleteTopics)."""
    shutil.rmtree(directory, ignore_errors=True)
    try:
        fd = os.open(directory.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
