"""A batch corrupted below the recovery point: open trusts it, the first read that finds it cuts the
log there and reports the cut as open does (Kafka's LogSegment.recover truncates at the first
invalid batch), so a coordinator's replay loads what is before it instead of failing forever."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cluster import recordbatch as rb
from cluster.log import CHECKPOINT_NAME, FILE_HEADER_SIZE, LogConfig, PartitionLog
from cluster.runtime import CoordinatorRuntime, ManualWakeups, RuntimeConfig
from kernel.clock import ManualClock
from kernel.codec import Record, RecordCodec
from kernel.result import Result

# Small segments so the corrupt batch sits in a middle segment, as in a long-lived __consumer_offsets.
OFFSETS_LIKE = LogConfig(segment_bytes=400, compacted=True)


def commit(i: int) -> bytearray:
    """An offset-commit-like batch: a key per group/partition, the committed offset as value."""
    key, value = b"group-%d/topic-0" % (i % 3), b"offset=%08d" % i
    return bytearray(rb.encode_records([(0, key, value)], 1_000))


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def flip_a_value_byte(segment: Path, batch_index: int) -> int:
    """Flip the last byte of the batch_index-th batch (a value byte only the CRC sees); its position."""
    data = bytearray(segment.read_bytes())
    position = FILE_HEADER_SIZE
    for _ in range(batch_index):
        position += rb.parse_header(data, position).size
    size = rb.parse_header(data, position).size
    data[position + size - 1] ^= 0x01
    segment.write_bytes(bytes(data))
    return position


def closed_log_with_a_flipped_byte(path: Path) -> tuple[list[bytes], int, int, list[Path]]:
    """(the batches before the corrupt one, its base offset, the bytes from it to the end, files)."""
    log = PartitionLog.open(path, OFFSETS_LIKE)
    for i in range(30):
        log.append([commit(i)], leader_epoch=0)
    everything = list(log.batches())
    log.close()  # a clean shutdown: the recovery point covers all of it
    assert (path / CHECKPOINT_NAME).exists()
    files = segment_files(path)
    assert len(files) >= 4
    position = flip_a_value_byte(files[1], 1)
    corrupt_base = rb.parse_header(files[1].read_bytes(), position).base_offset
    kept = [b for b in everything if rb.parse_header(b).base_offset < corrupt_base]
    cut_bytes = files[1].stat().st_size - position + sum(f.stat().st_size for f in files[2:])
    return kept, corrupt_base, cut_bytes, files


def test_reading_a_corrupt_batch_below_the_recovery_point_cuts_the_log_there(tmp_path: Path) -> None:
    path = tmp_path / "__consumer_offsets-0"
    kept, corrupt_base, cut_bytes, files = closed_log_with_a_flipped_byte(path)

    log = PartitionLog.open(path, OFFSETS_LIKE)
    assert not log.recovery.truncated  # covered by the recovery point: open did not look

    replayed = list(log.batches())
    assert replayed == kept
    for batch in replayed:
        rb.decode_records(batch)  # what the runtime's replay does; raises on a bad CRC
    report = log.recovery
    assert report.truncated and "CRC mismatch" in report.reason and files[1].name in report.reason
    assert report.truncated_bytes == cut_bytes
    assert set(report.removed_files) == {f.name for f in files[2:]}
    assert (report.segments, report.batches) == (2, len(kept))
    assert log.end_offset == corrupt_base and log.segment_count == 2
    assert [f.name for f in segment_files(path)] == [files[0].name, files[1].name]

    # Reading again finds nothing more to cut, and the log goes on from the cut.
    assert list(log.batches()) == kept and log.recovery == report
    assert log.append([commit(99)], leader_epoch=1) == [corrupt_base]
    log.close()

    reopened = PartitionLog.open(path, OFFSETS_LIKE)
    assert not reopened.recovery.truncated
    assert len(list(reopened.batches())) == len(kept) + 1 and not reopened.recovery.truncated
    assert reopened.end_offset == corrupt_base + 1
    reopened.close()


def test_a_cut_found_by_reading_adds_to_what_open_cut(tmp_path: Path) -> None:
    path = tmp_path / "__consumer_offsets-1"
    kept, corrupt_base, cut_bytes, _files = closed_log_with_a_flipped_byte(path)
    stray = path / (segment_files(path)[0].name + ".cleaned")
    stray.write_bytes(b"left by an interrupted compaction")

    log = PartitionLog.open(path, OFFSETS_LIKE)
    assert log.recovery.removed_files == (stray.name,) and not log.recovery.truncated
    assert list(log.batches()) == kept
    assert log.recovery.removed_files[0] == stray.name and log.recovery.truncated_bytes == cut_bytes
    log.close()


def test_compaction_of_a_log_with_a_corrupt_batch_compacts_what_is_before_it(tmp_path: Path) -> None:
    path = tmp_path / "__consumer_offsets-2"
    kept, corrupt_base, _cut, _files = closed_log_with_a_flipped_byte(path)
    log = PartitionLog.open(path, OFFSETS_LIKE)
    log.compact(now_ms=2_000)
    assert log.recovery.truncated and log.end_offset == corrupt_base
    latest = {}
    for batch in kept:
        for offset, key, value in rb.decode_records(batch):
            latest[key] = (offset, value)
    survivors = {key: (offset, value) for b in log.batches() for offset, key, value in rb.decode_records(b)}
    assert survivors == latest
    log.close()


# -- the coordinator runtime's load: the replay gets the good prefix and the cut is reported ------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int


CODEC = RecordCodec("corruption-test")
CODEC.register(OffsetKey, OffsetValue, name="Offset")


class OffsetsShard:
    def __init__(self, tp, clock) -> None:
        self.offsets: dict[str, int] = {}

    def replay(self, record: Record) -> None:
        self.offsets[record.key.group] = record.value.offset

    def on_loaded(self) -> None:
        pass

    def commit(self, group: str, offset: int) -> Result:
        return Result([Record(OffsetKey(group), OffsetValue(offset))], offset)


def runtime(data_dir: Path) -> CoordinatorRuntime:
    clock = ManualClock(1_000_000)
    return CoordinatorRuntime(
        codec=CODEC,
        shard_factory=OffsetsShard,
        config=RuntimeConfig(data_dir=data_dir, log_config=OFFSETS_LIKE),
        executor=ThreadPoolExecutor(1),
        clock=clock,
        wakeups=ManualWakeups(clock),
    )


def test_a_coordinator_load_over_a_corrupt_batch_loads_the_prefix_and_reports_the_cut(tmp_path: Path) -> None:
    tp = ("__consumer_offsets", 0)

    async def main() -> None:
        rt = runtime(tmp_path)
        await rt.load(tp, 1)
        for i in range(30):
            await rt.write(tp, 1, lambda token, i=i: rt.shard(tp).commit(f"g{i % 3}", i))
        await rt.close()  # clean: the recovery point covers everything

        directory = tmp_path / "__consumer_offsets-0"
        files = segment_files(directory)
        flip_a_value_byte(files[1], 0)

        rt = runtime(tmp_path)
        reason = await rt.load(tp, 2)
        assert reason is not None and "CRC mismatch" in reason and files[1].name in reason
        # The offsets committed before the corrupt batch survive; the shard serves again.
        assert rt.shard(tp).offsets and max(rt.shard(tp).offsets.values()) < 30
        assert await rt.write(tp, 2, lambda token: rt.shard(tp).commit("g0", 100)) == 100
        await rt.close()

        rt = runtime(tmp_path)
        assert await rt.load(tp, 3) is None
        assert rt.shard(tp).offsets["g0"] == 100
        await rt.close()

    asyncio.run(main())
