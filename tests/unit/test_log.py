"""cluster/log/: offsets, reads, recovery of torn and corrupt tails, full disks, compaction."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cluster import recordbatch as rb
from cluster.log import (
    CHECKPOINT_NAME,
    FILE_HEADER_SIZE,
    FileOps,
    FlushPolicy,
    LogConfig,
    LogError,
    LogWriteError,
    OffsetOutOfRange,
    PartitionLog,
    segment_name,
)

SMALL = LogConfig(segment_bytes=400)
COMPACTED = LogConfig(segment_bytes=400, compacted=True, tombstone_retention_ms=1000)


# -- helpers --------------------------------------------------------------------------------


def batch(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int = 1_000) -> bytearray:
    """A fresh batch as a coordinator (or a producer) hands it to append: offsets 0..n-1."""
    return bytearray(rb.encode_records([(i, k, v) for i, (k, v) in enumerate(records)], timestamp_ms))


def one(i: int, timestamp_ms: int = 1_000, size: int = 8) -> bytearray:
    return batch([(b"key-%d" % i, b"v" * size)], timestamp_ms)


def split(data: bytes) -> list[bytes]:
    """The whole batches in data; fails on a partial one."""
    out = [bytes(data[pos : pos + header.size]) for pos, header in rb.iter_batches(data)]
    assert sum(map(len, out)) == len(data), "read returned a partial batch"
    return out


def header(data: bytes) -> rb.BatchHeader:
    return rb.parse_header(data)


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def crash(partition_log: PartitionLog) -> None:
    """Drop the log without close(): no recovery point, files closed by the garbage collector."""
    del partition_log


class FlakyOps(FileOps):
    """A disk that fills up on demand; flags flip back to healthy without reopening the log."""

    def __init__(self) -> None:
        self.fail_write = False
        self.partial_write_first = False  # write half of the first chunk, then fail
        self.fail_fsync = False
        self.fail_truncate = False

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self.fail_write:
            if self.partial_write_first and len(data) > 1:
                self.partial_write_first = False
                return os.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC)
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.fail_fsync:
            raise OSError(errno.EIO, "Input/output error")
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        if self.fail_truncate:
            raise OSError(errno.EIO, "Input/output error")
        os.ftruncate(fd, size)


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


# -- compaction -----------------------------------------------------------------------------


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [r for b in log.batches() for r in rb.decode_records(b)]


def fill_compacted(log: PartitionLog, rounds: int, timestamp_ms: int = 1_000) -> None:
    for i in range(rounds):
        records = [(b"a", b"a%d" % i), (b"b%d" % (i % 4), b"b%d" % i)]
        log.append([batch(records, timestamp_ms)], leader_epoch=1)


def test_compaction_keeps_the_latest_value_per_key_and_their_offsets(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    fill_compacted(log, 20)
    before = records(log)
    end, segments = log.end_offset, log.segment_count
    active_base = int(segment_files(path)[-1].name[:20])
    latest = {key: offset for offset, key, _ in before}

    report = log.compact(now_ms=2_000)

    expected = [r for r in before if r[0] >= active_base or latest[r[1]] == r[0]]
    assert records(log) == expected
    assert (log.end_offset, log.log_start_offset, log.segment_count) == (end, 0, 2)
    assert report.segments_before == segments - 1
    assert report.records_before == sum(1 for r in before if r[0] < active_base)
    assert report.records_after == sum(1 for r in expected if r[0] < active_base)
    assert report.bytes_after < report.bytes_before
    for stored in log.batches():
        assert rb.crc_ok(stored, 0, header(stored))
        assert header(stored).max_timestamp == 1_000 and header(stored).partition_leader_epoch == 1
    # Reads land on the batch after a compacted-away offset.
    gap = next(o for o in range(end) if o not in {r[0] for r in expected})
    assert header(log.read(gap, 1)).last_offset >= gap

    crash(log)
    reopened = PartitionLog.open(path, COMPACTED)
    assert not reopened.recovery.truncated and not reopened.recovery.removed_files
    assert records(reopened) == expected and reopened.end_offset == end
    fill_compacted(reopened, 3)  # compacting an already compacted segment again is fine
    assert reopened.compact(now_ms=2_000).segments_before >= 1
    latest = {key: (offset, value) for offset, key, value in records(reopened)}
    survivors = {key: (offset, value) for offset, key, value in records(reopened) if latest[key][0] == offset}
    assert survivors == latest


def test_tombstones_are_dropped_only_after_retention(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    log.append([batch([(b"gone", b"v")], 1_000)], leader_epoch=0)
    log.append([batch([(b"gone", None)], 5_000)], leader_epoch=0)
    for i in range(8):  # roll the tombstone into a closed segment
        log.append([batch([(b"other%d" % i, b"x" * 40)], 5_000)], leader_epoch=0)
    assert log.segment_count > 1

    log.compact(now_ms=5_000 + COMPACTED.tombstone_retention_ms)  # max_timestamp not yet < horizon
    assert [r for r in records(log) if r[1] == b"gone"] == [(1, b"gone", None)]
    log.compact(now_ms=5_001 + COMPACTED.tombstone_retention_ms)
    assert [r for r in records(log) if r[1] == b"gone"] == []
    assert log.end_offset == 10


def test_compaction_with_nothing_surviving_keeps_the_offsets_covered(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    for i in range(6):
        log.append([batch([(b"k", b"x" * 60)])], leader_epoch=0)
    files = segment_files(path)
    assert len(files) == 3
    copies = {p.name: p.read_bytes() for p in files[1:-1]}
    log.compact(now_ms=2_000)
    survivors = [(4, b"k", b"x" * 60), (5, b"k", b"x" * 60)]  # the active segment is never cleaned
    assert records(log) == survivors
    (empty, *_rest) = list(log.batches())
    assert header(empty).record_count == 0 and header(empty).last_offset == int(files[-1].name[:20]) - 1
    # A crash after the rename but before the deletes: leftovers are still recognised.
    for name, data in copies.items():
        (path / name).write_bytes(data)
    crash(log)
    log = PartitionLog.open(path, COMPACTED)
    assert set(log.recovery.removed_files) == set(copies) and not log.recovery.truncated
    assert records(log) == survivors


def test_interrupted_compaction_leftovers_are_cleaned_at_open(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    fill_compacted(log, 20)
    files = segment_files(path)
    leftovers = {p.name: p.read_bytes() for p in files[1:-1]}
    log.compact(now_ms=2_000)
    compacted = list(log.batches())
    crash(log)

    # The rename happened, the deletes did not; and an earlier attempt left a .cleaned file.
    for name, data in leftovers.items():
        (path / name).write_bytes(data)
    (path / (files[0].name + ".cleaned")).write_bytes(b"half a segment")
    log = PartitionLog.open(path, COMPACTED)
    assert set(log.recovery.removed_files) == set(leftovers) | {files[0].name + ".cleaned"}
    assert not log.recovery.truncated
    assert list(log.batches()) == compacted  # nothing lost, nothing duplicated
    assert [p.name for p in segment_files(path)] == [files[0].name, files[-1].name]


def test_crash_before_the_rename_keeps_the_uncompacted_log(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    fill_compacted(log, 20)
    before = list(log.batches())
    crash(log)
    (path / (segment_name(0) + ".cleaned")).write_bytes(b"RGLOG\x00\x00\x00" + bytes(8) + b"torn")
    log = PartitionLog.open(path, COMPACTED)
    assert list(log.batches()) == before and not log.recovery.truncated


def test_failed_compaction_leaves_the_log_unchanged(path: Path) -> None:
    ops = FlakyOps()
    log = PartitionLog.open(path, COMPACTED, file_ops=ops)
    fill_compacted(log, 20)
    before = snapshot(path)
    ops.fail_write = True
    with pytest.raises(LogWriteError):
        log.compact(now_ms=2_000)
    assert snapshot(path) == before and log.segment_count > 2
    ops.fail_write = False
    ops.fail_fsync = True
    with pytest.raises(LogWriteError):
        log.compact(now_ms=2_000)
    assert snapshot(path) == before
    ops.fail_fsync = False
    assert log.compact(now_ms=2_000).segments_before > 1


def test_a_reader_keeps_its_view_across_a_compaction(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    fill_compacted(log, 20)
    before = list(log.batches())
    replay = log.batches()
    first = next(replay)  # a replay in progress on another thread holds the old segments
    log.compact(now_ms=2_000)
    assert [first, *replay] == before
    assert list(log.batches()) != before


def test_compaction_edge_cases(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    assert log.compact(now_ms=0).segments_before == 0  # nothing closed yet
    plain = PartitionLog.open(path.with_name("plain-0"))
    with pytest.raises(LogError):
        plain.compact(now_ms=0)


# -- the model-based test -------------------------------------------------------------------

record_strategy = st.tuples(st.binary(min_size=1, max_size=6), st.one_of(st.none(), st.binary(max_size=40)))
batch_strategy = st.tuples(st.lists(record_strategy, min_size=1, max_size=5), st.integers(0, 2**40))
# What a crash leaves at the end of the last segment: nothing, garbage, or a torn write of a batch.
TAILS = st.one_of(st.none(), st.binary(min_size=1, max_size=120), st.tuples(batch_strategy, st.data()))


class LogMachine(RuleBasedStateMachine):
    """Random appends, reads, crashes (with torn tails), clean restarts and flipped bytes.

    The model is the list of batches appended so far; with flush=batch every append is durable,
    so after any reopen the log must hold exactly the model, minus what a corruption removed.
    """

    config = LogConfig(segment_bytes=500)

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="rglog-"))
        self.path = self.root / "topic-0"
        self.log = PartitionLog.open(self.path, self.config)
        self.model: list[bytes] = []

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def model_end(self) -> int:
        return header(self.model[-1]).last_offset + 1 if self.model else 0

    @rule(specs=st.lists(batch_strategy, min_size=1, max_size=3), epoch=st.integers(0, 3))
    def append(self, specs: list, epoch: int) -> None:
        batches = [batch(records, ts) for records, ts in specs]
        expected = []
        offset = self.model_end
        for b in batches:
            expected.append(offset)
            offset += header(b).last_offset_delta + 1
        assert self.log.append(batches, epoch) == expected
        self.model.extend(bytes(b) for b in batches)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.model_end), label="offset")
        max_bytes = data.draw(st.integers(0, 1_000), label="max_bytes")
        out = self.log.read(offset, max_bytes)
        if offset == self.model_end:
            assert out == b""
            return
        got = split(out)
        start = next(i for i, b in enumerate(self.model) if header(b).last_offset >= offset)
        if not self.config.compacted:  # a compacted log serves the first batch after a gap
            assert header(got[0]).base_offset <= offset
        assert got == self.model[start : start + len(got)]
        assert len(got) == 1 or len(out) <= max_bytes

    @rule(tail=TAILS)
    def crash_and_reopen(self, tail: None | bytes | tuple) -> None:
        crash(self.log)
        self.log = None  # type: ignore[assignment]
        if isinstance(tail, tuple):  # a torn write: a strict prefix of the next batch
            (records, ts), data = tail
            torn = batch(records, ts)
            rb.assign_offset(torn, self.model_end, 0)
            tail = bytes(torn[: data.draw(st.integers(1, len(torn) - 1), label="torn length")])
        if tail is not None:
            with open(segment_files(self.path)[-1], "ab") as f:
                f.write(tail)
        self.reopen(expect_truncated=tail is not None)

    @rule()
    def close_and_reopen(self) -> None:
        self.log.close()
        self.reopen(expect_truncated=False)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def flip_a_byte_in_the_last_batch(self, data: st.DataObject) -> None:
        crash(self.log)
        self.log = None  # type: ignore[assignment]
        last = self.model[-1]
        holder = [p for p in segment_files(self.path) if int(p.name[:20]) <= header(last).base_offset][-1]
        contents = bytearray(holder.read_bytes())
        position = len(contents) - len(last)
        assert contents[position:] == last
        # Everything from the magic byte on is checked (the epoch before it is not under the CRC).
        flip = position + data.draw(st.integers(rb.LOG_OVERHEAD + 4, len(last) - 1), label="byte")
        contents[flip] ^= data.draw(st.integers(1, 255), label="mask")
        holder.write_bytes(bytes(contents))
        self.model.pop()
        self.reopen(expect_truncated=True)

    @precondition(lambda self: self.config.compacted)
    @rule(now_ms=st.integers(0, 2**40 + 2_000))
    def compact(self, now_ms: int) -> None:
        active_base = int(segment_files(self.path)[-1].name[:20])
        horizon = now_ms - self.config.tombstone_retention_ms
        stored = [(r, header(b).max_timestamp) for b in self.model for r in rb.decode_records(b)]
        latest = {key: offset for (offset, key, _), _ in stored}
        expected = [
            (offset, key, value)
            for (offset, key, value), max_timestamp in stored
            if offset >= active_base
            or (latest[key] == offset and not (value is None and max_timestamp < horizon))
        ]
        self.log.compact(now_ms)
        assert records(self.log) == expected
        self.model = list(self.log.batches())  # from here on the compacted bytes are the model

    def reopen(self, expect_truncated: bool) -> None:
        self.log = PartitionLog.open(self.path, self.config)
        assert self.log.recovery.truncated is expect_truncated, self.log.recovery
        assert (self.log.recovery.reason is not None) is expect_truncated
        assert not (self.path / CHECKPOINT_NAME).exists()
        assert list(self.log.batches()) == self.model
        assert self.log.recovery.batches == len(self.model)

    @invariant()
    def offsets_match_the_model(self) -> None:
        assert self.log.end_offset == self.model_end
        assert self.log.log_start_offset == 0


class CompactedLogMachine(LogMachine):
    """The same, on a compacted log (gaps allowed between batches), with compactions in between."""

    config = LogConfig(segment_bytes=500, compacted=True, tombstone_retention_ms=1_000)


MACHINE_SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LogMachine.TestCase.settings = MACHINE_SETTINGS
CompactedLogMachine.TestCase.settings = MACHINE_SETTINGS
TestLogMachine = LogMachine.TestCase
TestCompactedLogMachine = CompactedLogMachine.TestCase
