"""OffsetCommit's key and value are msgspec Structs (coordinator/classic/records.py): they behave as
the frozen dataclasses they replaced did, and the garbage collector never tracks them."""

from __future__ import annotations

import gc
import pickle

import pytest

from coordinator.records import OffsetCommitKey, OffsetCommitValue, offset_commit_record


def test_they_compare_hash_pickle_and_stay_frozen_like_the_dataclasses_before():
    record = offset_commit_record("g", "t", 1, 10, -1, "m", 5)
    assert record.key == OffsetCommitKey("g", "t", 1) and hash(record.key) == hash(OffsetCommitKey("g", "t", 1))
    assert record.value == OffsetCommitValue(offset=10, leader_epoch=-1, metadata="m", commit_timestamp=5)
    assert record.value.expire_timestamp == -1
    assert pickle.loads(pickle.dumps(record)) == record
    with pytest.raises(AttributeError):
        record.value.offset = 11  # type: ignore[misc]


def test_the_garbage_collector_leaves_them_alone():
    # A log holds millions of them: a tracked object each made the collector's passes half of replay.
    record = offset_commit_record("g", "t", 1, 10, -1, "m", 5)
    assert not gc.is_tracked(record.key) and not gc.is_tracked(record.value)
