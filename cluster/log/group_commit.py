"""One sync for the appends of many logs on one file system (raygroups.log.flush=batch).

An fsync costs about the same for 100 bytes as for 100 KB, and a partition leader appends to
several partitions at once: per-log fsyncs made each produced batch pay its own. Here every log
of one process and one file system hands its staged append (PartitionLog.stage: offsets patched,
bytes written, nothing visible yet) to one queue; whatever queues while a sync is in flight is
written and then made durable by a single syncfs(2), and only then committed (visible to fetches)
and answered. So no record is acknowledged before it is on disk, as with an fsync per log.

syncfs is used only where it reports write-back errors (Linux 5.8 and later); elsewhere, or when
it is missing, `for_directory` gives None and the logs fsync on their own. A failed sync fails
every append of its group (each log truncates what it staged), even if the error came from
another file on the same file system: a spurious retriable error, never a lost record.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import platform
import weakref
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from cluster.batching import BatchingQueue
from cluster.log.config import FlushPolicy, LogConfig
from cluster.log.errors import LogError, write_error
from cluster.log.partition_log import PartitionLog, StagedAppend
from cluster.recordbatch import BatchHeader


def _load_syncfs():
    """libc's syncfs when the kernel reports write-back errors through it, else None."""
    if platform.system() != "Linux":
        return None
    try:
        major, minor = (int(x) for x in platform.release().split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (5, 8):  # before 5.8 syncfs returned 0 even when write-back had failed
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syncfs
    except (OSError, AttributeError):
        return None


_SYNCFS = _load_syncfs()


def syncfs(fd: int) -> None:
    """Make every write on the file system holding fd durable; raises OSError as fsync does."""
    if _SYNCFS(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@dataclass(slots=True)
class _Pending:
    log: PartitionLog
    batches: Sequence[bytearray]
    leader_epoch: int
    headers: Sequence[BatchHeader]
    future: asyncio.Future


class GroupCommit:
    """The appends of every log on one file system, one sync per group (see the module docstring)."""

    def __init__(self, executor: Executor, sync=None) -> None:
        # Weak: _groups is keyed weakly by the executor, and a strong reference from its value
        # would keep every leader's executor (and group) alive for good.
        self._executor = weakref.ref(executor)
        self._sync = sync or syncfs
        self._queue: BatchingQueue[_Pending] = BatchingQueue(self._commit)

    async def append(
        self, log: PartitionLog, batches: Sequence[bytearray], leader_epoch: int, headers: Sequence[BatchHeader]
    ) -> list[int]:
        """PartitionLog.append, durable under the shared sync; raises what append raises."""
        future = asyncio.get_running_loop().create_future()
        self._queue.put(_Pending(log, batches, leader_epoch, headers, future))
        return await future

    async def _commit(self, group: list[_Pending]) -> None:
        try:
            executor = self._executor()
            if executor is None:
                raise LogError("the log's I/O executor is gone")
            results = await asyncio.get_running_loop().run_in_executor(executor, self._write_and_sync, group)
        except BaseException as exc:  # a bug, or the loop going away: no caller may wait forever
            for pending in group:
                if not pending.future.done():
                    pending.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for pending, result in zip(group, results):
            if pending.future.done():
                continue
            if isinstance(result, BaseException):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)

    def _write_and_sync(self, group: list[_Pending]) -> list[list[int] | BaseException]:
        """In the executor: stage every append, one sync, then commit (or abandon) each."""
        staged: list[StagedAppend | None | BaseException] = []
        for p in group:
            try:
                staged.append(p.log.stage(p.batches, p.leader_epoch, p.headers))
            except (LogError, ValueError) as exc:
                staged.append(exc)
        written = [s for s in staged if isinstance(s, StagedAppend)]
        failure: BaseException | None = None
        if written:
            try:
                self._sync(written[0].fd)
            except OSError as exc:
                failure = exc
        results: list[list[int] | BaseException] = []
        for p, s in zip(group, staged):
            if s is None:
                results.append([])
            elif isinstance(s, BaseException):
                results.append(s)
            elif failure is not None:
                p.log.abandon(s)
                results.append(write_error(s.action, failure))  # type: ignore[arg-type]
            else:
                results.append(p.log.commit(s))
        return results


# One GroupCommit per executor (a partition leader's I/O threads) and file system.
_groups: weakref.WeakKeyDictionary[Executor, dict[int, GroupCommit]] = weakref.WeakKeyDictionary()


def for_directory(executor: Executor, directory: Path) -> GroupCommit | None:
    """The group commit for logs in `directory` written through `executor`, or None where syncfs
    is not to be trusted (the logs then fsync one by one)."""
    if _SYNCFS is None:
        return None
    try:
        device = os.stat(directory).st_dev
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    per_device = _groups.setdefault(executor, {})
    group = per_device.get(device)
    if group is None:
        group = per_device[device] = GroupCommit(executor)
    return group


def for_logs(executor: Executor, directory: Path, config: LogConfig) -> GroupCommit | None:
    """for_directory, for logs of this config: only where each append would be synced anyway
    (flush=batch; a syncfs must never add a sync to flush=none) and raygroups.log.sync=filesystem."""
    if config.flush is not FlushPolicy.BATCH or not config.sync_filesystem:
        return None
    return for_directory(executor, directory)
