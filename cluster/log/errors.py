"""What the log raises, and how an OSError becomes a LogWriteError that names the errno."""

from __future__ import annotations

import errno as errno_module
import os


class LogError(Exception):
    """The log cannot be opened or used (unknown format, a call the log does not support)."""


class LogWriteError(LogError):
    """An append or compaction write failed (ENOSPC, EIO, ...); the log is unchanged."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class OffsetOutOfRange(LogError):
    """A read below the log start offset or past the log end offset (OFFSET_OUT_OF_RANGE)."""


def write_error(action: str, exc: OSError) -> LogWriteError:
    """`exc` as a LogWriteError whose message names the errno (the operator sees ENOSPC, not 28)."""
    code = exc.errno
    if code is None and len(exc.args) == 1 and isinstance(exc.args[0], int):
        code = exc.args[0]  # OSError(errno.ENOSPC) keeps the code only in args
    name = errno_module.errorcode.get(code, "") if code is not None else ""
    detail = exc.strerror or (os.strerror(code) if code is not None else str(exc))
    return LogWriteError(f"{action} failed: {name} {detail}".replace("  ", " "), code)
