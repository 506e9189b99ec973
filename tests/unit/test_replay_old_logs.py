"""A log directory written by the code before issue 12 (its reflective codec, kio's batch writer)
replays through today's LogDisk (typed codec, lean batch reader) to the very same records."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cluster import recordbatch as rb
from cluster.log import LogConfig, PartitionLog
from cluster.log.batch_records import RecordsCorrupt, key_values
from cluster.runtime.disk import LogDisk
from coordinator import records as group
from kernel.codec import Record
from sharestate import records as share
from tests.unit import codec_reference
from tests.unit.test_codec_typed import reference_of
from tests.unit.test_records_golden import group_records, share_records



class Collect:
    def __init__(self) -> None:
        self.records: list[Record] = []

    def replay(self, record: Record) -> None:
        self.records.append(record)


def write_with_old_code(path: Path, codec, records: list[Record], per_batch: int) -> None:
    ref = reference_of(codec)
    log = PartitionLog.open(path, LogConfig(compacted=True, segment_bytes=4096))
    for start in range(0, len(records), per_batch):
        entries = ref.encode_all(codec_reference.Record(r.key, r.value) for r in records[start : start + per_batch])
        log.append([bytearray(rb.encode_records([(n, k, v) for n, (k, v) in enumerate(entries)], 1_000))], 0)
    log.close()


@pytest.mark.parametrize("codec,records", [(group.CODEC, group_records(300)), (share.CODEC, share_records())])
def test_an_old_log_replays_to_the_same_records(tmp_path, codec, records):
    write_with_old_code(tmp_path / "log", codec, records, per_batch=17)
    shard = Collect()
    with ThreadPoolExecutor(1) as pool:
        disk = LogDisk(codec, pool, tmp_path, LogConfig(compacted=True, segment_bytes=4096), None)
        log = PartitionLog.open(tmp_path / "log", LogConfig(compacted=True, segment_bytes=4096))
        assert disk._replay(log, shard) == len(records)
        log.close()
    assert shard.records == records


def test_the_lean_reader_reads_what_kio_reads():
    entries = [(0, b"k", b"v"), (1, None, b"x" * 200), (2, b"y" * 70, None), (3, b"", b"")]
    batch = rb.encode_records(entries, 1_000)
    assert [(k and bytes(k), v and bytes(v)) for k, v in key_values(batch)] == [
        (k, v) for _, k, v in rb.decode_records(batch)
    ]


def test_records_that_do_not_fit_their_batch_are_refused():
    batch = bytearray(rb.encode_records([(0, b"k", b"v"), (1, b"k2", b"v2")], 1_000))
    batch[60] = 3  # one record more than the batch holds
    with pytest.raises(RecordsCorrupt):
        key_values(batch)
