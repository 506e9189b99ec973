"""Produced compressed batches are decompressed (bounded) and their records counted (issue 10): a
gzip batch claiming record_count 2^31 - 1 with a matching last offset delta in a few bytes moved the
log end by 2^31, and a share partition splitting it built one state per offset. Kafka's LogValidator
reads the records of a compressed batch on produce and answers INVALID_RECORD when they disagree."""

from __future__ import annotations

import asyncio
import gzip
import struct

import cramjam
import crc32c
import pytest
from kio.schema.errors import ErrorCode

from cluster.actors.partition_leader import PartitionLeader
from cluster.config import Config
from cluster import recordbatch
from cluster.recordbatch import CRC_START, HEADER, LOG_OVERHEAD, BatchError, split_produced
from tests.unit.test_recordbatch_records import BASE_TS, record
from cluster.calls import ProduceItem

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def compressed_batch(codec: int, payload: bytes, record_count: int) -> bytes:
    length = HEADER.size - LOG_OVERHEAD + len(payload)
    header = HEADER.pack(0, length, 0, 2, 0, codec, record_count - 1, BASE_TS, BASE_TS, -1, -1, -1, record_count)
    batch = bytearray(header + payload)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def xerial(raw_records: bytes) -> bytes:
    """The Java clients' snappy framing: a magic header, then length-prefixed raw snappy blocks."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for i in range(0, len(raw_records), 100):
        block = bytes(cramjam.snappy.compress_raw(raw_records[i : i + 100]))
        out += struct.pack(">i", len(block)) + block
    return out


COMPRESS = {
    "gzip": (GZIP, gzip.compress),
    "snappy raw": (SNAPPY, lambda b: bytes(cramjam.snappy.compress_raw(b))),
    "snappy xerial": (SNAPPY, xerial),
    "lz4 frame": (LZ4, lambda b: bytes(cramjam.lz4.compress(b))),
    "zstd": (ZSTD, lambda b: bytes(cramjam.zstd.compress(b))),
}

RECORDS = b"".join(record(i, i) for i in range(50))


def test_a_gzip_batch_claiming_2_31_records_in_a_few_bytes_is_invalid_and_nothing_is_appended(tmp_path):
    bomb = compressed_batch(GZIP, gzip.compress(record(0, 0)), 2_147_483_647)
    with pytest.raises(BatchError) as caught:
        split_produced(bomb)
    assert caught.value.error_code == ErrorCode.invalid_record

    async def main():
        leader = PartitionLeader("partition-leader-0", Config({}), tmp_path)
        await leader.load([("t", 0, 1)])
        (produced,) = await leader.produce([ProduceItem("t", 0, 1, bomb)])
        assert produced.error_code == ErrorCode.invalid_record
        (ok,) = await leader.produce([ProduceItem("t", 0, 1, compressed_batch(GZIP, gzip.compress(RECORDS), 50))])
        assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 0)
        await leader.shutdown()

    asyncio.run(main())


@pytest.mark.parametrize("name", list(COMPRESS))
def test_each_codec_is_accepted_when_its_records_match_the_count(name):
    codec, compress = COMPRESS[name]
    assert len(split_produced(compressed_batch(codec, compress(RECORDS), 50))) == 1
    for wrong in (49, 51, 2_147_483_647):
        with pytest.raises(BatchError) as caught:
            split_produced(compressed_batch(codec, compress(RECORDS), wrong))
        assert caught.value.error_code == ErrorCode.invalid_record


@pytest.mark.parametrize("name", list(COMPRESS))
def test_data_that_does_not_decompress_is_a_corrupt_message(name):
    codec, compress = COMPRESS[name]
    garbled = bytearray(compress(RECORDS))
    garbled[len(garbled) // 2 :] = b"\xff" * (len(garbled) - len(garbled) // 2)
    with pytest.raises(BatchError) as caught:
        split_produced(compressed_batch(codec, bytes(garbled[:-3]), 50))
    assert caught.value.error_code in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
    with pytest.raises(BatchError) as caught:
        split_produced(compressed_batch(codec, b"\x00\x01junk", 50))
    assert caught.value.error_code == ErrorCode.corrupt_message


@pytest.mark.parametrize("name", list(COMPRESS))
def test_a_decompression_bomb_is_refused_without_inflating_it_whole(name, monkeypatch):
    # The cap scaled down so the test stays small; the bound is the same code path.
    monkeypatch.setattr(recordbatch, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    codec, compress = COMPRESS[name]
    payload = compress(b"\x00" * (4 << 20))
    with pytest.raises(BatchError) as caught:
        split_produced(compressed_batch(codec, payload, 1))
    assert caught.value.error_code == ErrorCode.invalid_record


def test_a_well_formed_count_of_malformed_records_is_invalid():
    bad = record(0, 0, length=-1) + record(0, 1)
    with pytest.raises(BatchError) as caught:
        split_produced(compressed_batch(GZIP, gzip.compress(bad), 2))
    assert caught.value.error_code == ErrorCode.invalid_record


def test_an_unknown_codec_is_a_corrupt_message():
    with pytest.raises(BatchError) as caught:
        split_produced(compressed_batch(6, RECORDS, 50))
    assert caught.value.error_code == ErrorCode.corrupt_message
