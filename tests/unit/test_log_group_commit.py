"""Group commit: the appends of several logs made durable by one sync, visible only after it, and
all failed (each log as it was) when it fails."""

from __future__ import annotations

import asyncio
import errno
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster.log import LogWriteError, PartitionLog, group_commit
from cluster.log.group_commit import GroupCommit
from cluster.recordbatch import check_produced, encode_records, parse_header
from tests.unit.log_helpers import SMALL, snapshot


def _checked(i: int):
    checked = check_produced(encode_records([(0, b"k%d" % i, b"v" * (100 + i))], 1_000 + i))
    return [b for b, _ in checked], [h for _, h in checked]


class RecordingSync:
    """Counts syncs and checks that nothing staged is visible while the sync runs."""

    def __init__(self, logs: list[PartitionLog], fail: bool = False) -> None:
        self.logs = logs
        self.fail = fail
        self.calls = 0
        self.ends_seen: list[list[int]] = []

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self.ends_seen.append([log.end_offset for log in self.logs])
        if self.fail:
            raise OSError(errno.EIO, "Input/output error")


def _append_all(group: GroupCommit, logs: list[PartitionLog], i: int):
    async def main():
        return await asyncio.gather(
            *(group.append(log, _checked(i + n)[0], 0, _checked(i + n)[1]) for n, log in enumerate(logs)),
            return_exceptions=True,
        )

    return asyncio.run(main())


def test_appends_of_several_logs_share_one_sync_and_become_visible_after_it(tmp_path):
    logs = [PartitionLog.open(tmp_path / f"p{n}", SMALL) for n in range(3)]
    sync = RecordingSync(logs)
    with ThreadPoolExecutor(2) as executor:
        group = GroupCommit(executor, sync)
        for round_ in range(4):  # SMALL rolls segments, so some rounds stage new segments
            assert _append_all(group, logs, round_) == [[round_]] * 3
    assert sync.calls == 4
    assert sync.ends_seen == [[r] * 3 for r in range(4)]  # the sync ran before anything was visible
    for log in logs:
        assert log.end_offset == 4 and log.segment_count > 1
        assert [parse_header(b).base_offset for b in log.batches()] == [0, 1, 2, 3]

    # The same appends through PartitionLog.append leave the same files.
    plain = PartitionLog.open(tmp_path / "plain", SMALL)
    for round_ in range(4):
        batches, headers = _checked(round_)
        plain.append(batches, 0, headers)
    for log in (*logs, plain):
        log.close()
    assert snapshot(tmp_path / "plain") == snapshot(tmp_path / "p0")


def test_a_failed_sync_fails_every_append_of_its_group_and_leaves_each_log_as_it_was(tmp_path):
    logs = [PartitionLog.open(tmp_path / f"p{n}", SMALL) for n in range(2)]
    sync = RecordingSync(logs)
    with ThreadPoolExecutor(2) as executor:
        group = GroupCommit(executor, sync)
        _append_all(group, logs, 0)
        for log in logs:
            log.close()
        logs = [PartitionLog.open(tmp_path / f"p{n}", SMALL) for n in range(2)]
        sync.logs = logs
        before = {n: snapshot(tmp_path / f"p{n}") for n in range(2)}

        for size in (0, 80):  # the first fits the active segment, the second rolls to a new one (SMALL)
            sync.fail = True
            results = _append_all(group, logs, size)
            assert all(isinstance(r, LogWriteError) and r.errno == errno.EIO for r in results)
            assert [log.end_offset for log in logs] == [1, 1]
            assert {n: snapshot(tmp_path / f"p{n}") for n in range(2)} == before

        sync.fail = False
        assert _append_all(group, logs, 3) == [[1], [1]]
    for log in logs:
        assert [parse_header(b).base_offset for b in log.batches()] == [0, 1]
        log.close()


def test_one_group_per_executor_and_file_system_and_none_without_a_trustworthy_syncfs(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with ThreadPoolExecutor(1) as one, ThreadPoolExecutor(1) as other:
        if group_commit._SYNCFS is not None:
            group = group_commit.for_directory(one, tmp_path / "a")
            assert group is not None and group is group_commit.for_directory(one, tmp_path / "b")
            assert group_commit.for_directory(other, tmp_path / "a") is not group
        monkeypatch.setattr(group_commit, "_SYNCFS", None)
        assert group_commit.for_directory(one, tmp_path / "a") is None


@pytest.mark.skipif(group_commit._SYNCFS is None, reason="no syncfs that reports write-back errors here")
def test_the_real_syncfs_makes_a_group_durable(tmp_path):
    logs = [PartitionLog.open(tmp_path / f"p{n}") for n in range(2)]
    with ThreadPoolExecutor(1) as executor:
        group = group_commit.for_directory(executor, tmp_path)
        assert _append_all(group, logs, 0) == [[0], [0]]
    for log in logs:
        log.close()


def test_a_group_does_not_keep_its_executor_alive(tmp_path):
    import gc
    import weakref

    executor = ThreadPoolExecutor(1)
    group_commit.for_directory(executor, tmp_path)
    gone = weakref.ref(executor)
    executor.shutdown()
    del executor
    gc.collect()
    assert gone() is None



def test_raygroups_log_sync_file_keeps_one_fsync_per_log(tmp_path):
    from cluster.actors.partition_leader import user_log_config
    from cluster.config import Config
    from cluster.partition import UserPartition

    with ThreadPoolExecutor(1) as executor:
        for sync, grouped in (("filesystem", group_commit._SYNCFS is not None), ("file", False)):
            config = user_log_config(Config({"raygroups.log.sync": sync}))
            log = PartitionLog.open(tmp_path / sync, config)
            partition = UserPartition("t", 0, 1, log, executor, 1 << 20)
            assert (partition._group is not None) is grouped, sync
            log.close()
