"""RecordCodec.decode_all (kernel/codec.py), replay's batch decoder: the same records as decode() of
each key and value, whatever the mix of record types in a batch, and the same refusals."""

from __future__ import annotations

import msgpack
import pytest

from cluster.log.batch_records import key_values
from coordinator import records as group
from kernel.codec import CorruptRecord, UnknownRecordType
from sharestate import records as share
from tests.unit.test_records_golden import GROUP_BATCH, SHARE_BATCH


@pytest.mark.parametrize("codec,batch", [(group.CODEC, GROUP_BATCH), (share.CODEC, SHARE_BATCH)], ids=["group", "share"])
def test_a_batch_written_by_todays_code_decodes_as_decode_does(codec, batch):
    pairs = key_values(batch)
    assert codec.decode_all(pairs) == [codec.decode(k, v) for k, v in pairs]


def test_runs_of_one_type_between_others_and_tombstones_decode_record_by_record():
    records = [group.offset_commit_record("g", "t", p, p, -1, "m" * p, 5) for p in range(70)]
    records[10] = group.offset_tombstone("g", "t", 10)
    records[20] = group.group_tombstone("g")
    records[30] = group.share_group_epoch_record("s", 4, 99)
    records[31] = group.share_group_epoch_record("s", 5, 98)
    assert group.CODEC.decode_all(group.CODEC.encode_all(records)) == records


def test_a_value_of_the_wrong_shape_inside_a_run_is_a_corrupt_record():
    pairs = group.CODEC.encode_all(group.offset_commit_record("g", "t", p, p, -1, "", 5) for p in range(3))
    pairs[2] = (pairs[2][0], msgpack.packb({"version": 0, "offset": "not a number"}))
    with pytest.raises(CorruptRecord):
        group.CODEC.decode_all(pairs)


def test_a_key_of_an_unknown_type_after_a_run_is_refused():
    pairs = group.CODEC.encode_all([group.offset_commit_record("g", "t", 0, 0, -1, "", 5)])
    pairs.append((msgpack.packb({"type": "NoSuchRecord", "version": 0, "group_id": "g"}), None))
    with pytest.raises(UnknownRecordType):
        group.CODEC.decode_all(pairs)


def test_a_value_on_a_type_that_carries_none_is_refused_even_after_a_run_of_that_type():
    key = msgpack.packb({"type": "ClassicGroupState", "version": 0, "group_id": "g"})
    assert [r.value for r in group.CODEC.decode_all([(key, None), (key, None)])] == [None, None]
    with pytest.raises(UnknownRecordType):
        group.CODEC.decode_all([(key, None), (key, b"\x80")])
