"""The controller's metadata log keeps replicated partitions' registrations (issue 25): recorded
by register_partitions and change_partitions, replayed from their encoded form as they were,
gone with their topic."""

from __future__ import annotations

import uuid

import pytest

from cluster.metadata import CODEC, ClusterMetadata, TopicSpec
from cluster.replication.registration import PartitionRegistration, reassign, reconcile


def applied(meta: ClusterMetadata, result) -> object:
    for record in result.records:
        meta.replay(record)
    return result.response


def with_topic(partitions: int = 2) -> tuple[ClusterMetadata, list]:
    meta = ClusterMetadata()
    written = []
    result = meta.create_topics([TopicSpec("orders", partitions)])
    written += result.records
    applied(meta, result)
    return meta, written


def reload(records) -> ClusterMetadata:
    """A new controller replaying the log: every record through its encoded form."""
    meta = ClusterMetadata()
    for record in records:
        key, value = CODEC.encode(record)
        meta.replay(CODEC.decode(key, value))
    return meta


def test_registered_partitions_start_in_sync_with_the_first_replica_leading():
    meta, written = with_topic()
    result = meta.register_partitions({("orders", 0): (2, 1, 3), ("orders", 1): (3, 2, 1)})
    made = applied(meta, result)
    assert made[("orders", 0)] == PartitionRegistration((2, 1, 3), (2, 1, 3), 2, 0, 0)
    assert meta.registrations == made
    assert reload(written + result.records).registrations == made


def test_changes_are_recorded_and_replay_to_the_same_registrations():
    meta, written = with_topic()
    written += (r := meta.register_partitions({("orders", 0): (1, 2, 3)})).records
    applied(meta, r)
    elected = reconcile(meta.registrations[("orders", 0)], {2, 3})
    written += (r := meta.change_partitions({("orders", 0): elected})).records
    applied(meta, r)
    moving, _ = reassign(elected, (2, 3, 4), {2: 0, 3: 0, 4: 0})
    written += (r := meta.change_partitions({("orders", 0): moving})).records
    applied(meta, r)
    assert meta.registrations[("orders", 0)] == moving and moving.reassigning
    assert reload(written).registrations == meta.registrations


def test_a_change_that_does_not_follow_the_recorded_one_is_a_bug():
    meta, _ = with_topic()
    applied(meta, meta.register_partitions({("orders", 0): (1, 2, 3)}))
    current = meta.registrations[("orders", 0)]
    with pytest.raises(ValueError, match="does not follow"):
        meta.change_partitions({("orders", 0): PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 0)})
    assert meta.change_partitions({("orders", 0): current}).records == []  # the same: nothing to write
    with pytest.raises(ValueError, match="not a registered"):
        meta.change_partitions({("orders", 1): current})


def test_registering_twice_keeps_the_first_and_unknown_partitions_are_refused():
    meta, _ = with_topic()
    applied(meta, meta.register_partitions({("orders", 0): (1, 2, 3)}))
    again = meta.register_partitions({("orders", 0): (3, 2, 1)})
    assert again.records == [] and again.response == {("orders", 0): meta.registrations[("orders", 0)]}
    with pytest.raises(ValueError):
        meta.register_partitions({("orders", 5): (1, 2, 3)})


def test_deleting_the_topic_removes_its_registrations():
    meta, written = with_topic()
    written += (r := meta.register_partitions({("orders", 0): (1, 2, 3)})).records
    applied(meta, r)
    written += (r := meta.delete_topics(["orders"])).records
    applied(meta, r)
    assert meta.registrations == {}
    assert reload(written).registrations == {}


@pytest.mark.parametrize("bad", [
    PartitionRegistration((9,), (1, 2, 3), 1, 1, 1),  # the ISR outside the replicas
    PartitionRegistration((1, 2, 3), (2, 3), 1, 1, 1),  # a leader outside the ISR
    PartitionRegistration((1, 1, 3), (1, 3), 1, 1, 1),  # a replica twice
    PartitionRegistration((1, 2, 3), (1, 2), 1, 1, 1, (4,), ()),  # adding one that is no replica
])
def test_an_impossible_registration_is_refused(bad):
    meta, _ = with_topic()
    applied(meta, meta.register_partitions({("orders", 0): (1, 2, 3)}))
    with pytest.raises(ValueError):
        meta.change_partitions({("orders", 0): bad})


def test_data_directories_get_replica_ids_once_and_never_again():
    meta = ClusterMetadata()
    written = []
    a, b = uuid.uuid4(), uuid.uuid4()
    for directory, expected in ((a, 0), (b, 1), (a, 0)):
        result = meta.register_directory(directory)
        written += result.records
        assert applied(meta, result) == expected
    assert len(written) == 2  # a directory seen before writes nothing
    meta2 = reload(written)
    assert meta2.replica_ids == {a: 0, b: 1}
    assert applied(meta2, meta2.register_directory(uuid.uuid4())) == 2
