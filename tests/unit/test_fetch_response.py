"""The Fetch answer built from per-version templates is byte for byte what the generic dict
builder makes, at every version, for data, errors and unknown topics."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import encode_response
from cluster.gateway.handlers import fetch
from cluster.partition import FetchOutcome
from cluster.recordbatch import encode_records

BATCH = encode_records([(0, b"k", b"v")], 1_700_000_000_000)


def _generic(version, order, outcomes):
    responses: dict = {}
    for topic_key, partition in order:
        o = outcomes[(topic_key, partition)]
        responses.setdefault(topic_key, []).append({
            "partition_index": partition, "error_code": o.error_code, "high_watermark": o.high_watermark,
            "last_stable_offset": o.high_watermark, "log_start_offset": o.log_start_offset,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": o.records,
        })
    return build_response(ApiKey.FETCH, version, {
        "error_code": ErrorCode.none, "session_id": 0,
        "responses": [{"topic": k, "topic_id": k, "partitions": parts} for k, parts in responses.items()],
    })


@pytest.mark.parametrize("version", range(4, 17))
def test_the_answer_is_what_the_generic_builder_makes(version):
    a, b = (uuid.uuid4(), uuid.uuid4()) if version >= 13 else ("a", "b")
    outcomes = {
        (a, 0): FetchOutcome(ErrorCode.none, 10, 2, BATCH),
        (a, 1): FetchOutcome(ErrorCode.not_leader_or_follower),
        (b, 0): FetchOutcome(ErrorCode.unknown_topic_id if version >= 13 else ErrorCode.unknown_topic_or_partition),
        (a, 2): FetchOutcome(ErrorCode.offset_out_of_range, 10, 2),
    }
    order = list(outcomes)
    req = type("R", (), {"api_key": ApiKey.FETCH, "api_version": version, "correlation_id": 3})()
    built = fetch._response(version, order, outcomes)
    expected = _generic(version, order, outcomes)
    assert built == expected
    assert encode_response(req, built) == encode_response(req, expected)
