"""The coordinator runtime's appends share one sync across its partitions (RuntimeConfig.shared_sync,
issue 12): operations queued at once on several partitions are answered after one sync, a failed
sync fails (and reverts) every partition's batch in it, and nothing changes for flush=none or
raygroups.log.sync=file (one fsync per log, no syncfs)."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster.log import coordinator_log_config
from cluster.config import Config
from cluster.log import FlushPolicy, LogConfig, group_commit
from cluster.runtime import CoordinatorRuntime, ManualWakeups, RuntimeConfig, StorageError
from kernel.clock import ManualClock
from tests.unit.test_runtime import CODEC, CounterShard

TPS = [("__test", n) for n in range(3)]


class CountingSync:
    """Stands in for syncfs: counts syncs, and fails the ones the test asks to."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.fail:
            raise OSError(5, "Input/output error")
        os.fsync(fd)


@pytest.fixture
def sync(monkeypatch):
    counting = CountingSync()
    monkeypatch.setattr(group_commit, "_SYNCFS", counting)
    monkeypatch.setattr(group_commit, "syncfs", counting)
    return counting


def make_runtime(tmp_path, executor, *, shared_sync=True, log_config=None, log_opener=None):
    clock = ManualClock(1_000_000)
    return CoordinatorRuntime(
        codec=CODEC,
        shard_factory=CounterShard,
        config=RuntimeConfig(
            data_dir=tmp_path,
            log_config=log_config or LogConfig(compacted=True, segment_bytes=1 << 20),
            shared_sync=shared_sync,
        ),
        executor=executor,
        clock=clock,
        wakeups=ManualWakeups(clock),
        log_opener=log_opener,
    )


async def loaded(rt, epoch: int = 1):
    for tp in TPS:
        await rt.load(tp, epoch)
    return rt


async def values_after_reload(tmp_path, executor, **runtime_options) -> list[dict]:
    """Every partition's values as a new runtime replays them from the logs on disk."""
    rt = await loaded(make_runtime(tmp_path, executor, **runtime_options), epoch=2)
    values = [rt.shard(tp).values for tp in TPS]
    await rt.close()
    return values


def incr_everywhere(rt, name):
    return [rt.submit(tp, 1, lambda token, tp=tp: rt.shard(tp).incr(name)) for tp in TPS]


def test_partitions_written_at_once_share_one_sync_and_their_records_are_on_disk(tmp_path, sync):
    async def main():
        with ThreadPoolExecutor(1) as executor:
            rt = await loaded(make_runtime(tmp_path, executor))
            calls = sync.calls
            assert await asyncio.gather(*incr_everywhere(rt, "a")) == [1, 1, 1]
            assert sync.calls - calls == 1  # three partitions' batches, one sync
            await rt.close()
            assert await values_after_reload(tmp_path, executor) == [{"a": 1}] * 3

    asyncio.run(main())


def test_a_failed_shared_sync_fails_and_reverts_every_batch_in_it(tmp_path, sync):
    async def main():
        with ThreadPoolExecutor(1) as executor:
            rt = await loaded(make_runtime(tmp_path, executor))
            await asyncio.gather(*incr_everywhere(rt, "a"))
            sync.fail = True
            outcomes = await asyncio.gather(*incr_everywhere(rt, "a"), return_exceptions=True)
            assert all(isinstance(o, StorageError) for o in outcomes)
            sync.fail = False
            assert await asyncio.gather(*incr_everywhere(rt, "a")) == [2, 2, 2]
            await rt.close()
            assert await values_after_reload(tmp_path, executor) == [{"a": 2}] * 3

    asyncio.run(main())


@pytest.mark.parametrize(
    "log_config",
    [
        LogConfig(compacted=True, flush=FlushPolicy.NONE),
        LogConfig(compacted=True, sync_filesystem=False),
    ],
    ids=["flush-none", "sync-file"],
)
def test_no_syncfs_where_the_logs_would_not_share_one(tmp_path, sync, log_config):
    async def main():
        with ThreadPoolExecutor(1) as executor:
            for shared in (True, False):
                rt = await loaded(make_runtime(tmp_path / str(shared), executor, shared_sync=shared, log_config=log_config))
                assert await asyncio.gather(*incr_everywhere(rt, "a")) == [1, 1, 1]
                await rt.close()
        assert sync.calls == 0

    asyncio.run(main())


def test_the_coordinator_log_follows_raygroups_log_sync():
    assert coordinator_log_config(Config({})).sync_filesystem
    assert not coordinator_log_config(Config({"raygroups.log.sync": "file"})).sync_filesystem
