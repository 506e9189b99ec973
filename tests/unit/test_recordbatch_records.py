"""Walking the records of a stored batch is bounded by the batch's bytes, not by its record count
(issue 10): a produced batch with a valid CRC, record_count 2^31 - 1 and a record of length -1 made
ListOffsets by timestamp turn ~2^31 times in place on the partition leader."""

from __future__ import annotations

import asyncio
import signal
import struct
from contextlib import contextmanager

import crc32c
import pytest
from kio.schema.errors import ErrorCode

from cluster.actors.partition_leader import PartitionLeader
from cluster.config import Config
from cluster.recordbatch import (
    CRC_START,
    HEADER,
    LOG_OVERHEAD,
    BatchError,
    encode_records,
    record_timestamps,
    split_produced,
)
from cluster.calls import ListOffsetsItem, LogEnd, ProduceItem

BASE_TS = 1_700_000_000_000


def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def raw_batch(records: bytes, record_count: int, last_offset_delta: int | None = None) -> bytes:
    """A batch with a valid CRC around whatever record bytes: what a raw client can produce."""
    delta = record_count - 1 if last_offset_delta is None else last_offset_delta
    length = HEADER.size - LOG_OVERHEAD + len(records)
    header = HEADER.pack(0, length, 0, 2, 0, 0, delta, BASE_TS, BASE_TS + 5, -1, -1, -1, record_count)
    batch = bytearray(header + records)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def record(ts_delta: int, offset_delta: int, length: int | None = None) -> bytes:
    body = b"\x00" + zigzag(ts_delta) + zigzag(offset_delta) + zigzag(-1) + zigzag(-1) + zigzag(0)
    return zigzag(len(body) if length is None else length) + body


@contextmanager
def deadline(seconds: int):
    def expired(*_):
        raise TimeoutError(f"still walking after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


BOMBS = {
    "length -1": raw_batch(record(0, 0, length=-1), 2_147_483_647),
    "length 0": raw_batch(record(0, 0, length=0), 2_147_483_647),
    "record past the batch": raw_batch(record(0, 0, length=1000), 1),
    "fields past the record": raw_batch(record(0, 0, length=1) + b"\x00" * 8, 1),
    "count beyond the records": raw_batch(record(0, 0) * 3, 2_147_483_647),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_malformed_record_is_a_corrupt_batch_found_at_once(name):
    with deadline(5):
        with pytest.raises(BatchError) as caught:
            record_timestamps(BOMBS[name])
    assert caught.value.error_code == ErrorCode.corrupt_message


def test_well_formed_records_are_read_as_before():
    stamps = record_timestamps(raw_batch(record(0, 0) + record(3, 1) + record(5, 2), 3))
    assert stamps == [(0, BASE_TS), (1, BASE_TS + 3), (2, BASE_TS + 5)]
    coordinator = encode_records([(0, b"k", b"v"), (1, b"k2", None)], BASE_TS)
    assert record_timestamps(coordinator) == [(0, BASE_TS), (1, BASE_TS)]


def test_list_offsets_by_time_over_malformed_records_answers_at_the_batch_grain_at_once(tmp_path):
    async def main():
        leader = PartitionLeader("partition-leader-0", Config({}), tmp_path)
        await leader.load([("t", 0, 1)])
        # Produce checks the header only, so records that fit their count but not their lengths pass.
        malformed = raw_batch(record(0, 0, length=-1).ljust(7 * 1000, b"\x00"), 1000)
        (produced,) = await leader.produce([ProduceItem("t", 0, 1, malformed)])
        assert produced.error_code == ErrorCode.none
        with deadline(5):
            answers = await leader.list_offsets([ListOffsetsItem("t", 0, 1, -1, BASE_TS + 1), ListOffsetsItem("t", 0, 1, -1, -3)])
        # Kafka never stores such a batch; the batch itself is the finest grain left to answer with.
        assert answers == [LogEnd(ErrorCode.none, 0, BASE_TS + 5, 1)] * 2
        await leader.shutdown()

    asyncio.run(main())


def test_a_produced_batch_declaring_more_records_than_its_bytes_hold_is_invalid():
    # Kafka reads the records and finds the batch ends early (InvalidRecordException). Taken, its
    # 2^31 - 1 offsets became one state each when a share partition split the batch.
    for bomb in ("length -1", "count beyond the records"):
        with pytest.raises(BatchError) as caught:
            split_produced(BOMBS[bomb])
        assert caught.value.error_code == ErrorCode.invalid_record
    seven = raw_batch(record(0, 0).ljust(7 * 3, b"\x00"), 3)
    assert len(split_produced(seven)) == 1


def test_a_produced_batch_whose_offset_range_disagrees_with_its_count_is_invalid_as_in_kafka():
    # Kafka's LogValidator.validateBatch: lastOffsetDelta + 1 must be the record count.
    for count, delta in ((1, 2_147_483_646), (3, 1)):
        with pytest.raises(BatchError) as caught:
            split_produced(raw_batch(record(0, 0) * 3, count, delta))
        assert caught.value.error_code == ErrorCode.invalid_record
    assert len(split_produced(raw_batch(record(0, 0) + record(0, 1), 2))) == 1
