"""An in-memory disk for partition logs, and an executor whose work runs only when the schedule says.

The disk outlives the runtime's logs, so crash-and-reload replays what was durable. An append
can be made to fail (a full disk): like the real log, a failed append writes nothing.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cluster import recordbatch
from cluster.log import LogConfig, LogWriteError
from cluster.log.recovery import RecoveryReport


@dataclass
class MemoryDisk:
    files: dict[Path, list[bytes]] = field(default_factory=dict)
    fail_appends: int = 0  # how many of the next appends fail
    appended: list[tuple[Path, bytes]] = field(default_factory=list)  # every durable batch, in order
    ends: dict[Path, int] = field(default_factory=dict)  # records stored per log: its end offset

    def open(self, path: Path, config: LogConfig) -> "MemoryLog":
        return MemoryLog(self, path)


class MemoryLog:
    def __init__(self, disk: MemoryDisk, path: Path) -> None:
        self.disk = disk
        self.path = path
        self.recovery = RecoveryReport(
            segments=1, batches=len(disk.files.get(path, ())), truncated=False, truncated_bytes=0, reason=None, removed_files=()
        )
        self.closed = False
        # A full disk fails an append cleanly (nothing written), so the log stays usable.
        self.failed = False

    def append(self, batches: list[bytearray], leader_epoch: int) -> list[int]:
        if self.closed:
            raise LogWriteError(f"{self.path} is closed")
        if self.disk.fail_appends > 0:
            self.disk.fail_appends -= 1
            raise LogWriteError("No space left on device (simulated)")
        stored = self.disk.files.setdefault(self.path, [])
        for batch in batches:
            stored.append(bytes(batch))
            self.disk.ends[self.path] = self.end_offset + recordbatch.parse_header(batch).last_offset_delta + 1
            self.disk.appended.append((self.path, bytes(batch)))
        return [0] * len(batches)

    @property
    def end_offset(self) -> int:
        """The records stored (a coordinator's batches carry offsets from 0; the runtime compares
        what it wrote with what is committed, which with this disk is everything stored)."""
        return self.disk.ends.get(self.path, 0)

    def batches(self, from_offset: int = 0):
        yield from list(self.disk.files.get(self.path, ()))

    def compact(self, now_ms: int, below: int | None = None) -> Any:
        return None

    def close(self) -> None:
        self.closed = True


class ManualExecutor(Executor):
    """Blocking work (log open, append, replay) waits here until the schedule completes it, in order."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Future, Callable, tuple]] = []

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        self.jobs.append((future, fn, args))
        return future

    def run_next(self) -> bool:
        if not self.jobs:
            return False
        future, fn, args = self.jobs.pop(0)
        if not future.set_running_or_notify_cancel():
            return True  # cancelled before it ran (its actor died): a thread pool skips it too
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to the awaiting coroutine, as a thread pool would
            future.set_exception(exc)
        return True
