"""The replay path's two batch readers (cluster/log/batch_records.py): aiokafka's compiled one where it
is installed and the pure-Python one elsewhere read the same keys and values from batches written by
today's code, and both refuse records that do not fit their batch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster import recordbatch as rb
from cluster.log import batch_records
from cluster.log.batch_records import RecordsCorrupt, compiled_key_values, compiled_reader, key_values, python_key_values
from tests.unit.test_records_golden import GROUP_BATCH, SHARE_BATCH

needs_compiled = pytest.mark.skipif(compiled_reader() is None, reason="aiokafka's compiled reader is not installed")
READERS = [python_key_values, pytest.param(compiled_key_values, marks=needs_compiled)]

PAYLOAD = st.none() | st.binary(max_size=300) | st.sampled_from([b"x" * 63, b"x" * 64, b"x" * 8191, b"x" * 8192])


def kio(batch: bytes) -> list[tuple[bytes | None, bytes | None]]:
    return [(k, v) for _, k, v in rb.decode_records(batch)]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("batch", [GROUP_BATCH, SHARE_BATCH], ids=["group", "share"])
def test_batches_written_by_todays_code_read_as_kio_reads_them(reader, batch):
    assert reader(batch) == kio(batch)


@pytest.mark.parametrize("reader", READERS)
@settings(max_examples=60, deadline=None)
@given(entries=st.lists(st.tuples(PAYLOAD, PAYLOAD), min_size=1, max_size=20))
def test_any_keys_and_values_read_back(reader, entries):
    batch = bytes(rb.encode_records([(n, k, v) for n, (k, v) in enumerate(entries)], 1_000))
    assert reader(batch) == entries == kio(batch)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("count", [1, 3], ids=["fewer", "more"])
def test_records_that_do_not_fit_their_batch_are_refused(reader, count):
    batch = bytearray(rb.encode_records([(0, b"k", b"v"), (1, b"k2", b"v2")], 1_000))
    batch[60] = count
    with pytest.raises(RecordsCorrupt):
        reader(bytes(batch))


@needs_compiled
def test_the_compiled_reader_serves_replay_where_installed():
    key_values(GROUP_BATCH)
    assert batch_records._plain is compiled_key_values


def test_key_values_takes_any_buffer_and_gives_bytes():
    for buffer in (GROUP_BATCH, bytearray(GROUP_BATCH), memoryview(GROUP_BATCH)):
        pairs = key_values(buffer)
        assert pairs == kio(GROUP_BATCH)
        assert all(type(k) is bytes for k, _ in pairs)
