"""cluster/log/: offsets, reads, recovery of torn and corrupt tails, full disks."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from cluster import recordbatch as rb
from cluster.log import (
    CHECKPOINT_NAME,
    FILE_HEADER_SIZE,
    FlushPolicy,
    LogConfig,
    LogError,
    LogWriteError,
    OffsetOutOfRange,
    PartitionLog,
    segment_name,
)
from tests.unit.log_helpers import SMALL, FlakyOps, batch, crash, header, one, segment_files, snapshot, split


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


# -- offsets and reads ----------------------------------------------------------------------


def test_new_log_is_empty(path: Path) -> None:
    log = PartitionLog.open(path)
    assert (log.log_start_offset, log.end_offset, log.segment_count) == (0, 0, 1)
    assert log.read(0, 1000) == b""
    assert list(log.batches()) == []
    assert log.recovery.truncated is False
    assert (path / segment_name(0)).read_bytes()[:8] == b"RGLOG\x00\x00\x00"


def test_append_assigns_consecutive_offsets_across_segment_rolls(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    appended: list[bytes] = []
    expected_offset = 0
    for i in range(30):
        batches = [batch([(b"k%d" % i, b"v")] * (1 + i % 3)), one(i)]
        offsets = log.append(batches, leader_epoch=7)
        assert offsets[0] == expected_offset
        assert offsets[1] == expected_offset + 1 + i % 3
        expected_offset = offsets[1] + 1
        appended.extend(bytes(b) for b in batches)
    assert log.end_offset == expected_offset
    assert log.segment_count > 5
    assert list(log.batches()) == appended
    for stored in appended:
        h = header(stored)
        assert h.partition_leader_epoch == 7 and rb.crc_ok(stored, 0, h)
    # Every offset is served by the batch holding it, from that batch's segment only.
    for offset in range(log.end_offset):
        got = split(log.read(offset, 10**6))
        assert header(got[0]).base_offset <= offset <= header(got[0]).last_offset
        start = appended.index(got[0])
        assert got == appended[start : start + len(got)]
        names = [p.name for p in segment_files(path)]
        holding = [n for n in names if int(n[:20]) <= offset][-1]
        assert b"".join(got) in (path / holding).read_bytes()
    assert list(log.batches(from_offset=10)) == [b for b in appended if header(b).last_offset >= 10]


def test_producer_batch_stored_as_sent_but_offset_and_epoch(path: Path) -> None:
    log = PartitionLog.open(path)
    log.append([one(0)], leader_epoch=0)
    sent = one(1, timestamp_ms=5_000)
    original = bytes(sent)
    log.append([sent], leader_epoch=3)
    (stored,) = split(log.read(1, 10_000))
    assert stored[rb.LOG_OVERHEAD + 4 :] == original[rb.LOG_OVERHEAD + 4 :]
    assert (header(stored).base_offset, header(stored).partition_leader_epoch) == (1, 3)


def test_read_respects_max_bytes_but_returns_at_least_one_batch(path: Path) -> None:
    log = PartitionLog.open(path)
    log.append([one(i) for i in range(5)], leader_epoch=0)
    size = len(one(0))
    assert len(split(log.read(0, 2 * size))) == 2
    assert len(split(log.read(0, 2 * size - 1))) == 1
    assert len(split(log.read(0, 0))) == 1  # KIP-74: a batch larger than max_bytes still goes out
    assert len(split(log.read(3, 10**6))) == 2
    assert log.read(5, 10**6) == b""


def test_read_outside_the_log_is_out_of_range(path: Path) -> None:
    path.mkdir(parents=True)
    with open(path / segment_name(100), "wb") as f:  # a log whose first offset is 100
        f.write(b"RGLOG\x00\x00\x00" + (1).to_bytes(4, "big") + bytes(4))
    log = PartitionLog.open(path)
    assert (log.log_start_offset, log.end_offset) == (100, 100)
    assert log.append([one(0)], leader_epoch=0) == [100]
    with pytest.raises(OffsetOutOfRange):
        log.read(99, 1000)
    with pytest.raises(OffsetOutOfRange):
        log.read(102, 1000)
    assert log.read(101, 1000) == b""
    assert header(log.read(100, 1000)).base_offset == 100


def test_offset_for_timestamp_and_max_timestamp(path: Path) -> None:
    log = PartitionLog.open(path, LogConfig(segment_bytes=200))
    for i, ts in enumerate([10, 30, 20, 40, 40, 5]):
        log.append([one(i, timestamp_ms=ts)], leader_epoch=0)
    assert log.segment_count > 1

    def found(ts: int) -> int | None:
        data = log.offset_for_timestamp(ts)
        return None if data is None else header(data).base_offset

    assert [found(ts) for ts in (0, 10, 11, 25, 31, 40, 41)] == [0, 0, 1, 1, 3, 3, None]
    assert header(log.max_timestamp_batch()).base_offset == 3  # the first of the two at 40
    assert PartitionLog.open(path.with_name("empty-0")).max_timestamp_batch() is None


# -- a full disk and failed writes ----------------------------------------------------------


@pytest.mark.parametrize("failure", ["write", "partial write", "fsync"])
def test_failed_append_leaves_the_log_unchanged(path: Path, failure: str) -> None:
    ops = FlakyOps()
    log = PartitionLog.open(path, SMALL, file_ops=ops)
    log.append([one(0), one(1)], leader_epoch=0)
    before = (log.end_offset, log.size_bytes, log.segment_count, snapshot(path))

    ops.fail_write = failure != "fsync"
    ops.partial_write_first = failure == "partial write"
    ops.fail_fsync = failure == "fsync"
    with pytest.raises(LogWriteError) as raised:
        log.append([one(2)], leader_epoch=0)
    assert raised.value.errno == (errno.EIO if failure == "fsync" else errno.ENOSPC)
    with pytest.raises(LogWriteError):  # a roll to a new segment fails the same way
        log.append([one(3, size=500)], leader_epoch=0)
    assert (log.end_offset, log.size_bytes, log.segment_count, snapshot(path)) == before

    ops.fail_write = ops.fail_fsync = False
    assert log.append([one(4)], leader_epoch=0) == [2]
    assert log.append([one(5, size=500)], leader_epoch=0) == [3]
    kept = list(log.batches())
    crash(log)
    reopened = PartitionLog.open(path, SMALL)
    assert not reopened.recovery.truncated
    assert list(reopened.batches()) == kept and reopened.end_offset == 4


def test_failed_truncate_marks_the_log_failed_until_reopened(path: Path) -> None:
    ops = FlakyOps()
    log = PartitionLog.open(path, file_ops=ops)
    log.append([one(0)], leader_epoch=0)
    ops.fail_write = ops.partial_write_first = ops.fail_truncate = True
    with pytest.raises(LogWriteError):
        log.append([one(1)], leader_epoch=0)
    assert log.failed
    ops.fail_write = ops.fail_truncate = False
    with pytest.raises(LogWriteError, match="reopened"):
        log.append([one(2)], leader_epoch=0)
    assert header(log.read(0, 1000)).base_offset == 0  # reads keep working
    assert log.read(1, 1000) == b""

    log.close()  # no recovery point from a failed log: the half-written tail gets checked
    reopened = PartitionLog.open(path)
    assert reopened.recovery.truncated and reopened.end_offset == 1
    assert reopened.append([one(3)], leader_epoch=0) == [1]


def test_a_whole_batch_whose_sync_and_cut_failed_survives_a_reopen_until_truncate_to(path: Path) -> None:
    # The append was answered as failed, but its bytes are whole in the page cache: recovery
    # keeps them, so the owner of the log cuts back to the end it knew (Kafka's truncateTo).
    ops = FlakyOps()
    log = PartitionLog.open(path, file_ops=ops)
    log.append([one(0)], leader_epoch=0)
    ops.fail_fsync = ops.fail_truncate = True
    with pytest.raises(LogWriteError):
        log.append([one(1), one(2)], leader_epoch=0)
    assert log.failed and log.end_offset == 1
    ops.fail_fsync = ops.fail_truncate = False
    log.close()

    reopened = PartitionLog.open(path)
    assert reopened.end_offset == 3  # recovery cannot tell these batches were never answered
    reopened.truncate_to(1, "not durable when its append failed")
    assert reopened.end_offset == 1 and reopened.recovery.truncated
    assert "not durable" in (reopened.recovery.reason or "")
    reopened.truncate_to(1, "nothing past the end: no cut")
    assert reopened.append([one(3)], leader_epoch=0) == [1]
    reopened.close()
    assert [header(b).base_offset for b in PartitionLog.open(path).batches()] == [0, 1]


def test_truncate_to_cuts_across_segments(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    for i in range(6):
        log.append([one(i, size=500)], leader_epoch=0)
    assert log.segment_count > 2
    log.truncate_to(2, "test")
    assert log.end_offset == 2 and [header(b).base_offset for b in log.batches()] == [0, 1]
    assert log.append([one(9)], leader_epoch=0) == [2]


# -- recovery -------------------------------------------------------------------------------


def test_torn_tail_is_truncated_and_reported(path: Path) -> None:
    log = PartitionLog.open(path)
    log.append([one(0), one(1)], leader_epoch=0)
    crash(log)
    torn = one(2)
    rb.assign_offset(torn, 2, 0)
    with open(segment_files(path)[-1], "ab") as f:
        f.write(torn[:-3])
    log = PartitionLog.open(path)
    assert log.end_offset == 2
    report = log.recovery
    assert report.truncated and report.truncated_bytes == len(torn) - 3
    assert report.reason.startswith(f"segment {segment_name(0)}: batch of ")
    cut_at = FILE_HEADER_SIZE + 2 * len(torn)
    assert report.reason.endswith(f"at byte {cut_at}; truncated {len(torn) - 3} bytes")
    assert log.append([one(3)], leader_epoch=0) == [2]


def test_corruption_in_a_middle_segment_cuts_everything_after_it(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    for i in range(20):
        log.append([one(i)], leader_epoch=0)
    files = segment_files(path)
    assert len(files) >= 4
    crash(log)
    second = files[1]
    data = bytearray(second.read_bytes())
    data[-5] ^= 0xFF  # the last batch of the second segment
    second.write_bytes(bytes(data))
    log = PartitionLog.open(path, SMALL)
    report = log.recovery
    assert report.truncated and "CRC mismatch" in report.reason and second.name in report.reason
    assert [p.name for p in segment_files(path)] == [files[0].name, files[1].name]
    assert set(report.removed_files) == {p.name for p in files[2:]}
    assert log.end_offset == header(list(log.batches())[-1]).last_offset + 1
    assert log.end_offset == int(files[2].name[:20]) - 1


def test_missing_middle_segment_of_a_plain_log_is_a_cut(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    for i in range(20):
        log.append([one(i)], leader_epoch=0)
    files = segment_files(path)
    crash(log)
    files[1].unlink()
    log = PartitionLog.open(path, SMALL)
    assert log.recovery.truncated and "does not follow" in log.recovery.reason
    assert log.end_offset == int(files[1].name[:20])
    assert log.segment_count == 1


def test_short_file_header(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    for i in range(10):
        log.append([one(i)], leader_epoch=0)
    end = log.end_offset
    files = segment_files(path)
    crash(log)
    # A crash while rolling leaves a last segment shorter than its header: rewritten, nothing lost.
    (path / segment_name(end)).write_bytes(b"RGL")
    log = PartitionLog.open(path, SMALL)
    assert not log.recovery.truncated and log.end_offset == end
    assert log.append([one(99)], leader_epoch=0) == [end]
    crash(log)
    # Anywhere else it is corruption at that point.
    files[1].write_bytes(b"RGL")
    log = PartitionLog.open(path, SMALL)
    assert log.recovery.truncated and log.end_offset == int(files[1].name[:20])


def test_unknown_format_version_is_rejected(path: Path) -> None:
    PartitionLog.open(path).append([one(0)], leader_epoch=0)
    segment = segment_files(path)[0]
    data = bytearray(segment.read_bytes())
    data[8:12] = (2).to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    with pytest.raises(LogError, match="format version 2"):
        PartitionLog.open(path)
    segment.write_bytes(b"NOTALOG!" + bytes(data[8:]))
    with pytest.raises(LogError, match="not a raygroups log segment"):
        PartitionLog.open(path)


def test_recovery_point_skips_crc_of_covered_segments_only(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    for i in range(12):
        log.append([one(i)], leader_epoch=0)
    end = log.end_offset
    log.close()
    assert (path / CHECKPOINT_NAME).exists()
    first = segment_files(path)[0]
    data = bytearray(first.read_bytes())
    data[FILE_HEADER_SIZE + len(one(0)) - 1] ^= 0x01  # last value byte of batch 0: only the CRC sees it
    first.write_bytes(bytes(data))

    log = PartitionLog.open(path, SMALL)
    assert not (path / CHECKPOINT_NAME).exists()  # consumed before anything is appended
    assert not log.recovery.truncated and log.end_offset == end
    served = log.read(0, 1)
    assert not rb.crc_ok(served, 0, header(served))  # covered: trusted, not re-verified

    crash(log)  # no recovery point this time: everything is verified
    log = PartitionLog.open(path, SMALL)
    assert log.recovery.truncated and "CRC mismatch" in log.recovery.reason
    assert log.end_offset == 0


def test_bytes_past_the_recovery_point_are_verified(path: Path) -> None:
    log = PartitionLog.open(path)
    log.append([one(0)], leader_epoch=0)
    log.close()
    with open(segment_files(path)[-1], "ab") as f:
        f.write(b"\x00" * 70)
    log = PartitionLog.open(path)
    assert log.recovery.truncated and log.recovery.truncated_bytes == 70 and log.end_offset == 1


def test_flush_none_still_recovers_and_checkpoints(path: Path) -> None:
    config = LogConfig(segment_bytes=400, flush=FlushPolicy.NONE)
    log = PartitionLog.open(path, config)
    for i in range(10):
        log.append([one(i)], leader_epoch=0)
    crash(log)  # a process kill: the page cache keeps everything
    log = PartitionLog.open(path, config)
    assert log.end_offset == 10 and not log.recovery.truncated
    log.close()
    assert (path / CHECKPOINT_NAME).exists()


def test_reads_concurrent_with_appends(path: Path) -> None:
    log = PartitionLog.open(path, LogConfig(segment_bytes=2_000))
    done = threading.Event()
    problems: list[BaseException] = []

    def reader() -> None:
        try:
            while not done.is_set():
                end = log.end_offset
                for offset in range(max(0, end - 3), end):
                    got = split(log.read(offset, 500))
                    assert header(got[0]).base_offset <= offset <= header(got[0]).last_offset
                replay = list(log.batches())
                assert [header(b).base_offset for b in replay][: min(end, len(replay))] == list(
                    range(min(end, len(replay)))
                )
        except BaseException as exc:  # noqa: BLE001 - reported below
            problems.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(300):
        log.append([one(i)], leader_epoch=0)
    done.set()
    thread.join()
    assert not problems, problems[0]


def test_delete_removes_the_directory(path: Path) -> None:
    log = PartitionLog.open(path)
    log.append([one(0)], leader_epoch=0)
    log.delete()
    assert not path.exists()


# -- a follower's append (replication) ----------------------------------------------------------


def test_a_replicated_append_keeps_the_leaders_offsets_and_epochs_across_rolls(path: Path, tmp_path: Path) -> None:
    leader = PartitionLog.open(tmp_path / "leader", SMALL)
    for epoch in (0, 0, 3, 3, 3, 7):
        leader.append([one(epoch), one(epoch + 1)], leader_epoch=epoch)
    follower = PartitionLog.open(path, SMALL)
    offset = 0
    while offset < leader.end_offset:
        follower.append_replicated(leader.read(offset, 150))  # small reads: several per segment
        offset = follower.end_offset
    assert follower.segment_count > 1
    assert list(follower.batches()) == list(leader.batches())
    follower.close()
    assert list(PartitionLog.open(path, SMALL).batches()) == list(leader.batches())


def test_a_replicated_append_may_skip_offsets_but_never_goes_back(path: Path, tmp_path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    first = one(1)
    rb.assign_offset(first, 0, 2)
    gap = one(2)
    rb.assign_offset(gap, 5, 2)  # a compacted leader's batches leave gaps
    log.append_replicated(bytes(first) + bytes(gap))
    assert log.end_offset == 6
    behind = one(3)
    rb.assign_offset(behind, 4, 2)
    with pytest.raises(ValueError, match="below the log end"):
        log.append_replicated(bytes(behind))
    assert log.end_offset == 6


def test_a_replicated_append_leaves_a_partial_batch_out(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    whole = one(1)
    rb.assign_offset(whole, 0, 0)
    cut = one(2)
    rb.assign_offset(cut, 1, 0)
    headers = log.append_replicated(bytes(whole) + bytes(cut)[:-3])
    assert [h.base_offset for h in headers] == [0] and log.end_offset == 1


def test_a_replica_truncation_cuts_the_batch_holding_the_offset_and_is_no_recovery_problem(path: Path) -> None:
    log = PartitionLog.open(path, SMALL)
    log.append([batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])], leader_epoch=1)  # offsets 0..2
    log.append([one(4), one(5)], leader_epoch=1)  # 3, 4
    log.truncate_replica(4)
    assert log.end_offset == 4
    log.truncate_replica(1)  # inside the first batch: all of it goes, Kafka's truncateTo
    assert log.end_offset == 0
    assert log.recovery.truncated is False
    log.truncate_replica(0)  # nothing left: nothing to do
    assert log.end_offset == 0
    log.append([one(6)], leader_epoch=2)
    assert [rb.parse_header(b).base_offset for b in log.batches()] == [0]
