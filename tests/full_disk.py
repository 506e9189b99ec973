"""A file system that runs out of space on demand: writes fail with ENOSPC while it is full."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from cluster.log import FileOps


class FullDisk(FileOps):
    def __init__(self) -> None:
        self.full = False

    def write(self, fd, data):
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(fd, data)

    @contextlib.contextmanager
    def filled(self) -> Iterator[None]:
        self.full = True
        try:
            yield
        finally:
            self.full = False
