"""The controller's metadata log keeps replicated partitions' registrations (issue 25): recorded
by register_partitions and change_partitions, replayed from their encoded form as they were,
gone with their topic."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from kio.schema.errors import ErrorCode

from cluster.metadata import CODEC, ClusterMetadata, Replication, TopicSpec
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


def test_a_replicated_cluster_creates_topics_with_their_replicas_in_the_same_batch():
    meta = ClusterMetadata()
    three = Replication((0, 1, 2), default_factor=3)
    result = meta.create_topics([TopicSpec("a", 3), TopicSpec("b", 3, replication_factor=2)], replication=three)
    outcomes = applied(meta, result)
    assert [(o.error_code, o.replication_factor) for o in outcomes] == [(ErrorCode.none, 3), (ErrorCode.none, 2)]
    regs = meta.registrations
    assert sorted(regs) == [(t, p) for t in "ab" for p in range(3)]
    assert all(len(regs[("a", p)].replicas) == 3 and len(regs[("b", p)].replicas) == 2 for p in range(3))
    # Both topics of the request spread as one: six leaders on three replicas, two each.
    assert sorted(Counter(r.leader for r in regs.values()).values()) == [2, 2, 2]
    assert all(r.isr == r.replicas and r.leader_epoch == 0 for r in regs.values())
    assert reload(result.records).registrations == regs


def test_the_default_factor_is_capped_at_the_replicas_there_are_and_an_asked_one_is_not():
    meta = ClusterMetadata()
    two = Replication((4, 7), default_factor=3)
    outcomes = applied(meta, meta.create_topics(
        [TopicSpec("auto", 2), TopicSpec("three", 2, replication_factor=3)], replication=two))
    assert (outcomes[0].error_code, outcomes[0].replication_factor) == (ErrorCode.none, 2)
    assert outcomes[1].error_code == ErrorCode.invalid_replication_factor
    assert "larger than the 2 node(s)" in outcomes[1].message
    assert "three" not in meta.topics and {r.replicas for r in meta.registrations.values()} <= {(4, 7), (7, 4)}


def test_one_data_directory_keeps_one_copy_and_no_registration():
    meta = ClusterMetadata()
    outcomes = applied(meta, meta.create_topics([TopicSpec("one", 2), TopicSpec("two", 2, replication_factor=2)]))
    assert (outcomes[0].error_code, outcomes[0].replication_factor) == (ErrorCode.none, 1)
    assert outcomes[1].error_code == ErrorCode.invalid_replication_factor
    assert "one data directory" in outcomes[1].message
    assert meta.registrations == {}


def test_new_partitions_of_a_replicated_topic_get_as_many_replicas_as_its_first():
    meta = ClusterMetadata()
    three = Replication((0, 1, 2), default_factor=3)
    applied(meta, meta.create_topics([TopicSpec("t", 2, replication_factor=2)], replication=three))
    outcome = applied(meta, meta.create_partitions("t", 5, replication=three))
    assert (outcome.error_code, outcome.replication_factor) == (ErrorCode.none, 2)
    assert all(len(meta.registrations[("t", p)].replicas) == 2 for p in range(5))
    # Two replicas each on three nodes: ten replicas, within one of even.
    load = Counter(r for reg in meta.registrations.values() for r in reg.replicas)
    assert max(load.values()) - min(load.values()) <= 1
    # With one replica left alive the topic cannot grow at its factor; nothing is written.
    refused = meta.create_partitions("t", 6, replication=Replication((0,), default_factor=3))
    assert refused.response.error_code == ErrorCode.invalid_replication_factor and not refused.records
    assert meta.create_partitions("t", 6).response.error_code == ErrorCode.invalid_replication_factor
