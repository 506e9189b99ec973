"""The runtime's direct batch writer gives encode_records' bytes, for any records a coordinator writes
(fresh batches numbered 0..n-1, compacted ones with gaps; null values are tombstones)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.recordbatch import decode_records, encode_records, parse_header
from cluster.runtime.batch_writer import write_batch

data = st.one_of(st.binary(max_size=40), st.binary(min_size=60, max_size=70), st.binary(min_size=8185, max_size=8200))


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


@settings(max_examples=300, deadline=None)
@given(batches(), st.integers(0, 2**42))
def test_write_batch_gives_encode_records_bytes(entries, timestamp_ms):
    assert write_batch(entries, timestamp_ms) == encode_records(entries, timestamp_ms)


def test_a_fresh_batch_reads_back_with_its_header():
    entries = [(n, f"key-{n}".encode(), None if n == 2 else b"v" * n) for n in range(4)]
    batch = write_batch(entries, 1_700_000_000_123)
    header = parse_header(bytearray(batch))
    assert header.size == len(batch) and header.last_offset_delta == 3
    assert header.max_timestamp == 1_700_000_000_123
    assert decode_records(batch) == entries


def test_no_records_no_batch():
    with pytest.raises(ValueError):
        write_batch([], 0)
