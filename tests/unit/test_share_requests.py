"""What gateways and partition leaders exchange for share groups pickles to equal values
(cluster/share/requests.py: plain tuples across Ray)."""

from __future__ import annotations

import pickle
import uuid

import ray.cloudpickle as cloudpickle
from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcknowledgementBatch, AcquiredRecords

from cluster.share.requests import ShareFetchCall, ShareItem, ShareOutcome


def test_calls_and_outcomes_cross_pickle_unchanged():
    items = (
        ShareItem("t", 0, 3, uuid.uuid4(), (AcknowledgementBatch(0, 9, (1,)), AcknowledgementBatch(10, 11, (2, 3)))),
        ShareItem("t", 1, 3, uuid.uuid4(), (), fetch=False),
    )
    call = ShareFetchCall("g", "m", items, max_wait_ms=500, min_bytes=2, max_bytes=1000, max_records=7, wake_key="7:1", gateway=7)
    outcome = ShareOutcome(ErrorCode.none, None, ErrorCode.invalid_record_state, "no", b"batch",
                           (AcquiredRecords(0, 4, 1), AcquiredRecords(6, 6, 2)))
    failed = ShareOutcome()
    failed.fail(ErrorCode.not_leader_or_follower, "moved", True)
    for value in (call, outcome, failed, items[1]):
        for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
            again = loads(dumps(value))
            assert again == value and type(again) is type(value)
    assert isinstance(pickle.loads(pickle.dumps(outcome)).acknowledge_error_code, ErrorCode)
