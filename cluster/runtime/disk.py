"""The runtime's blocking I/O on partition logs, run on its executor so the event loop never waits
on a disk: open (with recovery), append, replay into a shard, compact, and reopen after a failed write.

With `shared_sync` the appends of all the runtime's partitions share one syncfs per group
(cluster/log/group_commit.py), as a partition leader's do: 1,000 members committing over 25
partitions paid one fsync per partition and batch (48 us of CPU each here, 15% of a coordinator's
samples); 25 fsyncs cost 4.2 ms and 1.3 ms CPU on this machine, one syncfs 0.26 ms and 0.09 ms."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from kernel.codec import RecordCodec

from cluster.log import LogConfig, LogWriteError, PartitionLog
from cluster.log import batch_records, group_commit
from cluster.runtime.collector import full_collections_paused
from cluster.runtime.partition import Partition, TopicPartition

log = logging.getLogger(__name__)

LogOpener = Callable[[Path, LogConfig], PartitionLog]


class LogDisk:
    def __init__(
        self,
        codec: RecordCodec,
        executor: Executor,
        data_dir: Path,
        log_config: LogConfig,
        opener: LogOpener | None,
        shared_sync: bool = False,
    ) -> None:
        self.codec = codec
        self.executor = executor
        self.data_dir = data_dir
        self.log_config = log_config
        self._open = opener or (lambda path, cfg: PartitionLog.open(path, cfg))
        self._key_values = batch_records.reader()
        self._shared_sync = shared_sync
        self._group: group_commit.GroupCommit | None = None

    async def run(self, fn: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def append(self, partition_log: PartitionLog, batches: list[bytearray], epoch: int) -> list[int]:
        """PartitionLog.append, durable before it returns (with flush=batch); raises what append raises."""
        group = self._sync_group()
        if group is None:
            return await self.run(partition_log.append, batches, epoch)
        return await group.append(partition_log, batches, epoch, None)

    def _sync_group(self) -> group_commit.GroupCommit | None:
        # Looked up at the first append: the data directory exists once a log is open.
        if self._shared_sync and self._group is None:
            self._group = group_commit.for_logs(self.executor, self.data_dir, self.log_config)
            self._shared_sync = self._group is not None
        return self._group

    async def open(self, tp: TopicPartition) -> PartitionLog:
        return await self.run(self._open, self.data_dir / f"{tp[0]}-{tp[1]}", self.log_config)

    async def replay(self, partition_log: PartitionLog, shard: Any) -> int:
        return await self.run(self._replay, partition_log, shard)

    def _replay(self, partition_log: PartitionLog, shard: Any) -> int:
        """Every record of the log into the shard, a log batch at a time (issue 12): one decode_all
        and, where the shard has it, one replay_all per batch rather than calls per record."""
        count = 0
        key_values = self._key_values
        decode_all = self.codec.decode_all
        replay_all = getattr(shard, "replay_all", None)
        replay = shard.replay
        with full_collections_paused():
            for batch in partition_log.batches():
                records = decode_all(key_values(batch))
                if replay_all is not None:
                    replay_all(records)
                else:
                    for record in records:
                        replay(record)
                count += len(records)
        return count

    async def reopen(self, partition: Partition) -> None:
        """After a write the log could not even cut off its tail: reopen it and cut it back to the
        end it had, so that it matches the reverted state again. Recovery alone drops only a torn
        batch; one whole in the page cache, whose sync failed, it would keep, and a later load
        would replay what the client was told had failed."""
        old_log, partition.log = partition.log, None
        end_offset = old_log.end_offset if old_log is not None else None
        if old_log is not None:
            await self.run(old_log.close)
        try:
            partition.log = await self.open(partition.tp)
        except LogWriteError:
            # Still unreadable: every later append fails fast until the partition is moved.
            log.exception("%s: reopening the log after a failed write failed", partition.tp)
            partition.log = old_log
            return
        if end_offset is not None:
            try:
                await self.run(partition.log.truncate_to, end_offset, "not durable when its append failed")
            except LogWriteError:
                # The log refuses appends now; its readers stop at end_offset already.
                log.exception("%s: cutting the failed append off the reopened log failed", partition.tp)

    async def compact(self, partition: Partition, now_ms: int, below: int) -> None:
        """Compact below `below`, the committed offset (PartitionLog.compact says why)."""
        try:
            report = await self.run(partition.log.compact, now_ms, below)
            log.info("compacted %s: %s", partition.tp, report)
        except LogWriteError:
            log.exception("compaction of %s failed; the log is unchanged", partition.tp)
