"""The experiment's decoding of coordinator records into rows (loadtest/experiment/records.py), for
record classes written as dataclasses and as msgspec Structs alike."""

import json

from coordinator.classic.records import group_tombstone, offset_commit_record
from loadtest.experiment.records import _offsets_row


def test_an_offset_commit_row_carries_its_key_and_value_as_json():
    row = _offsets_row(3, 17, 1_000, offset_commit_record("g", "orders", 2, 42, 5, "m", 999))
    assert row["record_type"] == "OffsetCommit" and row["committed_offset"] == 42
    assert json.loads(row["key"]) == {"group_id": "g", "topic": "orders", "partition": 2}
    assert json.loads(row["value"])["offset"] == 42 and json.loads(row["value"])["metadata"] == "m"


def test_a_tombstone_row_has_no_value():
    row = _offsets_row(0, 1, 1_000, group_tombstone("g"))
    assert row["value"] is None and json.loads(row["key"]) == {"group_id": "g"}
