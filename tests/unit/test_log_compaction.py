"""cluster/log/ compaction: latest value per key, tombstones, offsets kept, crashes mid-compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import recordbatch as rb
from cluster.log import LogError, LogWriteError, PartitionLog, segment_name
from tests.unit.log_helpers import COMPACTED, FlakyOps, batch, crash, header, records, segment_files, snapshot


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


# -- compaction -----------------------------------------------------------------------------


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


# -- compaction below the high watermark (a replicated log) ---------------------------------


def test_compaction_below_the_high_watermark_keeps_the_committed_record_a_truncation_would_orphan(path: Path) -> None:
    """A newer record above the high watermark must not delete the committed one before it: a
    truncation to the new leader's log (KIP-279) could cut the newer one away, and the key would
    be left with neither. Kafka's cleaner stops at the last stable offset."""
    log = PartitionLog.open(path, COMPACTED)
    fill_compacted(log, 12)
    high_watermark = log.end_offset  # everything so far is committed, "a" last set to a11
    for i in range(12):
        log.append([batch([(b"a", b"uncommitted-%d" % i)])], leader_epoch=2)
    assert log.segment_count > 3

    log.compact(now_ms=2_000, below=high_watermark)

    # Nothing at or above the high watermark was rewritten, and nothing below it that counts was lost.
    above = [r for r in records(log) if r[0] >= high_watermark]
    assert above == [(high_watermark + i, b"a", b"uncommitted-%d" % i) for i in range(12)]
    log.truncate_replica(high_watermark)
    assert log.end_offset == high_watermark
    latest = {key: value for _, key, value in records(log)}
    assert latest[b"a"] == b"a11"
    assert {latest[b"b%d" % k] for k in range(4)} == {b"b8", b"b9", b"b10", b"b11"}


def test_unbounded_compaction_then_truncation_loses_the_key(path: Path) -> None:
    """The failure the bound prevents, shown on the same log: without `below`, the committed "a"
    goes, and the truncation then takes its successor."""
    log = PartitionLog.open(path, COMPACTED)
    fill_compacted(log, 12)
    high_watermark = log.end_offset
    for i in range(12):
        log.append([batch([(b"a", b"uncommitted-%d" % i)])], leader_epoch=2)

    log.compact(now_ms=2_000)
    log.truncate_replica(high_watermark)

    assert b"a" not in {key for _, key, _ in records(log)}


def test_compaction_bounded_inside_a_closed_segment_leaves_that_segment_and_later_ones(path: Path) -> None:
    log = PartitionLog.open(path, COMPACTED)
    fill_compacted(log, 30)
    before = records(log)
    bases = [int(f.name[:20]) for f in segment_files(path)]
    assert len(bases) >= 4
    below = bases[2] + 1  # inside the third segment: only the first two can be cleaned

    report = log.compact(now_ms=2_000, below=below)

    assert report.segments_before == 2
    assert [r for r in records(log) if r[0] >= bases[2]] == [r for r in before if r[0] >= bases[2]]
    latest = {key: offset for offset, key, _ in before if offset < below}
    assert [r for r in records(log) if r[0] < bases[2]] == [
        r for r in before if r[0] < bases[2] and latest[r[1]] == r[0]
    ]
    assert log.end_offset == before[-1][0] + 1
    crash(log)
    reopened = PartitionLog.open(path, COMPACTED)
    assert not reopened.recovery.truncated and records(reopened) == records(log)
