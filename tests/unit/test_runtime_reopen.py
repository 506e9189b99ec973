"""A coordinator append whose sync failed, and whose bytes the log could not cut off either: the
runtime reverts the state and reopens the log, which must then hold nothing of that append (its
client was told it failed), even though the batch is whole in the page cache and recovery alone
would keep it. With one fsync per log and with the shared syncfs."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster.log import LogConfig, PartitionLog
from cluster.log.files import FileOps
from cluster.runtime import CoordinatorRuntime, ManualWakeups, RuntimeConfig, StorageError
from kernel.clock import ManualClock
from tests.unit.test_runtime import CODEC, CounterShard
from tests.unit.test_runtime_shared_sync import TPS, incr_everywhere, sync  # noqa: F401 (sync: a fixture)


class Disk(FileOps):
    """Real files whose fsync (and syncfs, through CountingSync) and truncate fail on demand."""

    failing = False

    def fsync(self, fd: int) -> None:
        if Disk.failing:
            raise OSError(5, "Input/output error")
        super().fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        if Disk.failing:
            raise OSError(5, "Input/output error")
        super().truncate(fd, size)


@pytest.fixture(autouse=True)
def disk_works_again():
    yield
    Disk.failing = False


def runtime(tmp_path, executor, shared_sync: bool) -> CoordinatorRuntime:
    clock = ManualClock(1_000_000)
    return CoordinatorRuntime(
        codec=CODEC,
        shard_factory=CounterShard,
        config=RuntimeConfig(data_dir=tmp_path, log_config=LogConfig(compacted=True), shared_sync=shared_sync),
        executor=executor,
        clock=clock,
        wakeups=ManualWakeups(clock),
        log_opener=lambda path, config: PartitionLog.open(path, config, Disk()),
    )


@pytest.mark.parametrize("shared_sync", [False, True], ids=["fsync-per-log", "shared-syncfs"])
def test_an_append_that_failed_is_not_in_the_log_after_the_reopen(tmp_path, sync, shared_sync):
    async def main():
        with ThreadPoolExecutor(1) as executor:
            rt = runtime(tmp_path, executor, shared_sync)
            for tp in TPS:
                await rt.load(tp, 1)
            assert await asyncio.gather(*incr_everywhere(rt, "a")) == [1, 1, 1]
            Disk.failing = sync.fail = True
            outcomes = await asyncio.gather(*incr_everywhere(rt, "b"), return_exceptions=True)
            assert all(isinstance(o, StorageError) for o in outcomes), outcomes
            Disk.failing = sync.fail = False
            assert await asyncio.gather(*incr_everywhere(rt, "a")) == [2, 2, 2]  # after the reopen
            await rt.close()
            rt = runtime(tmp_path, executor, shared_sync)
            for tp in TPS:
                await rt.load(tp, 2)
            # {"a": 2, "b": 1} if the failed increment of b had stayed in the log
            assert [rt.shard(tp).values for tp in TPS] == [{"a": 2}] * 3
            await rt.close()

    asyncio.run(main())
