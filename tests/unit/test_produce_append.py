"""The produce path's shortcuts change no byte: headers validated once are reused by the append,
and the outcomes that cross Ray pickle to equal values."""

from __future__ import annotations

import pickle

import pytest
from kio.schema.errors import ErrorCode
from ray import cloudpickle

from cluster.log import PartitionLog
from cluster.partition import FetchOutcome, ProduceOutcome
from cluster.recordbatch import check_produced, encode_records, parse_header, split_produced
from tests.unit.log_helpers import SMALL, snapshot


def _produced(n: int) -> bytes:
    return b"".join(encode_records([(j, b"k%d" % j, b"v" * i) for j in range(3)], 1_000 + i) for i in range(n))


def test_check_produced_gives_each_batch_with_its_own_header():
    records = _produced(4)
    checked = check_produced(records)
    assert [bytes(b) for b, _ in checked] == [bytes(b) for b in split_produced(records)]
    assert [h for _, h in checked] == [parse_header(b) for b, _ in checked]


def test_an_append_given_the_headers_writes_what_one_without_them_writes(tmp_path):
    # SMALL rolls segments every few batches, so both paths also roll at the same batches.
    logs = {}
    for name, with_headers in (("parsed", False), ("given", True)):
        log = PartitionLog.open(tmp_path / name, SMALL)
        for round_ in range(5):
            checked = check_produced(_produced(round_ + 1))
            batches = [b for b, _ in checked]
            headers = [h for _, h in checked] if with_headers else None
            log.append(batches, 7, headers)
        logs[name] = ([parse_header(b) for b in log.batches()], log.end_offset, log.segment_count)
        log.close()
    assert logs["given"] == logs["parsed"]
    assert snapshot(tmp_path / "given") == snapshot(tmp_path / "parsed")


def test_an_append_needs_one_header_per_batch(tmp_path):
    log = PartitionLog.open(tmp_path / "p")
    checked = check_produced(_produced(2))
    with pytest.raises(ValueError):
        log.append([b for b, _ in checked], 0, [checked[0][1]])
    assert log.end_offset == 0


@pytest.mark.parametrize("outcome", [
    ProduceOutcome(ErrorCode.none, 41, 3),
    ProduceOutcome(ErrorCode.kafka_storage_error, message="write failed: disk full"),
    FetchOutcome(ErrorCode.none, 10, 2, b"batch bytes"),
    FetchOutcome(ErrorCode.offset_out_of_range, 10, 2),
])
def test_outcomes_pickle_to_equal_values(outcome):
    for dumps in (pickle.dumps, cloudpickle.dumps):
        copy = pickle.loads(dumps(outcome))
        assert copy == outcome
        assert type(copy.error_code) is ErrorCode
