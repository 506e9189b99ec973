"""Coordinator record batches written directly (cluster/record_batch_writer.py), for the runtime's
appends and compaction's rewrites (encode_records): for any records a coordinator or compaction
writes (fresh batches numbered 0..n-1, kept ones with gaps, null keys and values) the bytes are
those of the kio-based encoder kept here as the reference, and the batches read back."""

from __future__ import annotations

import datetime
import io

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from cluster.record_batch_writer import write_batch
from cluster.recordbatch import CRC_START, decode_records, encode_records, parse_header

# Lengths on each side of the varints' byte boundaries (64 and 8,192 zigzagged). The long ones are
# a drawn length filled with a pattern: drawn bytes, up to 30 of them a batch, went past
# Hypothesis's entropy limit now and then (its data_too_large health check failed CI once).
data = st.one_of(
    st.binary(max_size=40),
    st.binary(min_size=60, max_size=70),
    st.integers(8185, 8200).map(lambda n: (bytes(range(256)) * 33)[:n]),
)


@st.composite
def batches(draw):
    keys = draw(st.lists(data, min_size=1, max_size=30))
    values = draw(st.lists(st.one_of(st.none(), data), min_size=len(keys), max_size=len(keys)))
    first = draw(st.integers(0, 2**40))
    gaps = draw(st.lists(st.integers(1, 3000), min_size=len(keys), max_size=len(keys)))
    offsets, offset = [], first
    for gap in gaps:
        offsets.append(offset)
        offset += gap
    return list(zip(offsets, keys, values))



def reference_encode_records(entries, timestamp_ms: int) -> bytes:
    """encode_records as it was at c60e85c: kio's writer, then the exact timestamps and a new CRC."""
    ts = TZAwareMicros.parse(datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC))
    records = tuple(
        Record(attributes=i8(0), timestamp=ts, offset=i64(offset), key=key, value=value, headers=())
        for offset, key, value in entries
    )
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
                                        records=records, attributes=i16(0)))
    batch = bytearray(buf.getvalue())
    batch[27:43] = timestamp_ms.to_bytes(8, "big") * 2
    batch[17:21] = crc32c.crc32c(bytes(batch[CRC_START:])).to_bytes(4, "big")
    return bytes(batch)


@settings(max_examples=300, deadline=None)
@given(batches(), st.integers(0, 2**42))
def test_write_batch_gives_the_kio_encoders_bytes(entries, timestamp_ms):
    assert write_batch(entries, timestamp_ms) == reference_encode_records(entries, timestamp_ms)
    assert encode_records(entries, timestamp_ms) == write_batch(entries, timestamp_ms)  # compaction's path


def test_a_fresh_batch_reads_back_with_its_header():
    entries = [(n, f"key-{n}".encode(), None if n == 2 else b"v" * n) for n in range(4)]
    batch = write_batch(entries, 1_700_000_000_123)
    header = parse_header(bytearray(batch))
    assert header.size == len(batch) and header.last_offset_delta == 3
    assert header.max_timestamp == 1_700_000_000_123
    assert decode_records(batch) == entries


def test_a_kept_batch_with_gaps_and_null_keys_reads_back_as_kio_wrote_it():
    entries = [(5, b"a", b"1"), (9, b"b", None), (4000, None, b"x" * 300), (4001, None, None)]
    batch = encode_records(entries, 1_700_000_000_123)
    assert batch == reference_encode_records(entries, 1_700_000_000_123)
    header = parse_header(bytearray(batch))
    assert header.base_offset == 5 and header.last_offset_delta == 3996 and header.size == len(batch)
    assert decode_records(batch) == entries


def test_no_records_is_refused_as_before():
    with pytest.raises(ValueError):
        encode_records([], 1)
