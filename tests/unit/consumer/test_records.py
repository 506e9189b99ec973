"""Consumer group records (coordinator/consumer/records.py): each round-trips through the codec, the
builders write what Kafka's GroupCoordinatorRecordHelpers writes (its GroupCoordinatorRecordHelpersTest
cases, field by field), the keys of different record types never share bytes (compaction would drop
one for the other), and a record written before a field existed reads with that field's default."""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from dataclasses import replace

import msgpack
import pytest

from coordinator.classic import records as classic_records
from coordinator.consumer import records as consumer_records
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.records import (
    CONSUMER_GROUP_KEYS,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerTopicPartitions,
    consumer_current_assignment_record,
    consumer_current_assignment_tombstone,
    consumer_group_epoch_record,
    consumer_group_epoch_tombstone,
    consumer_member_subscription_record,
    consumer_member_subscription_tombstone,
    consumer_regular_expression_record,
    consumer_regular_expression_tombstone,
    consumer_target_assignment_epoch_record,
    consumer_target_assignment_epoch_tombstone,
    consumer_target_assignment_record,
    consumer_target_assignment_tombstone,
)
from coordinator.member_state import MemberState
from coordinator.share import records as share_records
from kernel.codec import Record, RecordCodec
from tests.unit import codec_reference

# Kafka's tests draw random topic ids; fixed ones, with the larger first, also check the sorting.
TOPIC_1 = uuid.UUID(int=0xB0)
TOPIC_2 = uuid.UUID(int=0xA0)


def consumer_codec() -> RecordCodec:
    codec = RecordCodec("test")
    consumer_records.register(codec)
    return codec


def group_codec() -> RecordCodec:
    """The group coordinator's codec as it will be once consumer groups replay: all three kinds."""
    codec = RecordCodec("group-coordinator")
    classic_records.register(codec)
    share_records.register(codec)
    consumer_records.register(codec)
    return codec


def sample_member() -> ConsumerGroupMember:
    """The member of Kafka's testNewConsumerGroupMemberSubscriptionRecord and
    testNewConsumerGroupCurrentAssignmentRecord, partitions given out of order."""
    return ConsumerGroupMember(
        member_id="member-id",
        member_epoch=22,
        previous_member_epoch=21,
        state=MemberState.UNREVOKED_PARTITIONS,
        instance_id="instance-id",
        rack_id="rack-id",
        rebalance_timeout_ms=5000,
        client_id="client-id",
        client_host="client-host",
        subscribed_topic_names=["foo", "zar", "bar"],
        subscribed_topic_regex="regex",
        server_assignor_name="range",
        assigned_partitions={TOPIC_1: [13, 11, 12], TOPIC_2: [23, 21, 22]},
        partitions_pending_revocation={TOPIC_1: [16, 14, 15], TOPIC_2: [26, 24, 25]},
    )


def every_record() -> list[Record]:
    """One record of each type with every field set (nested, null, empty), and each tombstone."""
    member = sample_member()
    classic = ConsumerGroupMemberMetadataValue(
        instance_id=None,
        rack_id=None,
        client_id="c",
        client_host="/10.0.0.1",
        subscribed_topic_names=(),
        subscribed_topic_regex=None,
        server_assignor=None,
        rebalance_timeout_ms=45_000,
        classic_member_metadata=ClassicMemberMetadata(
            10_000, (ClassicProtocol("range", b"\x00\x01"), ClassicProtocol("roundrobin", b""))
        ),
    )
    return [
        consumer_group_epoch_record("g", 10, -(2**63)),
        consumer_member_subscription_record("g", member),
        Record(ConsumerGroupMemberMetadataKey("g", "classic-member"), classic),
        consumer_target_assignment_record("g", "member-id", member.assigned_partitions),
        consumer_target_assignment_record("g", "empty", {}),
        consumer_target_assignment_epoch_record("g", 10),
        consumer_current_assignment_record("g", member),
        consumer_current_assignment_record("g", ConsumerGroupMember("new")),
        consumer_regular_expression_record("g", "foo.*", {"foo-b", "foo-a"}, 7, 1_700_000_000_000),
        consumer_regular_expression_record("g", "none.*", (), -1, -1),
        consumer_group_epoch_tombstone("g"),
        consumer_member_subscription_tombstone("g", "member-id"),
        consumer_target_assignment_tombstone("g", "member-id"),
        consumer_target_assignment_epoch_tombstone("g"),
        consumer_current_assignment_tombstone("g", "member-id"),
        consumer_regular_expression_tombstone("g", "foo.*"),
    ]


# -- round trips -----------------------------------------------------------------------------------


def record_id(record: Record) -> str:
    return type(record.key).__name__ + ("" if record.value is not None else "-tombstone")


@pytest.mark.parametrize("record", every_record(), ids=record_id)
def test_every_record_round_trips(record):
    codec = consumer_codec()
    key, value = codec.encode(record)
    assert (value is None) == (record.value is None)
    assert codec.decode(key, value) == record


def test_a_batch_of_every_record_round_trips_through_decode_all():
    codec = group_codec()
    records = every_record()
    assert codec.decode_all(codec.encode_all(records)) == records


def test_the_typed_codec_writes_the_bytes_of_the_reflective_one():
    """What tests/unit/test_codec_typed.py checks for every registered type, ahead of these types
    joining the group coordinator's codec."""
    codec = consumer_codec()
    reference = codec_reference.RecordCodec("test")
    consumer_records.register(reference)
    for record in every_record():
        assert codec.encode(record) == reference.encode(codec_reference.Record(record.key, record.value))


def test_no_field_takes_a_name_the_codec_writes_itself():
    """A key map starts with "type" and "version", a value map with "version": a field of that name
    would write the entry twice, and the two codecs would read back different ones."""
    codec = consumer_codec()
    for rtype in codec._by_name.values():
        assert not {"type", "version"} & {f.name for f in dataclasses.fields(rtype.key_cls)}
        assert "version" not in {f.name for f in dataclasses.fields(rtype.value_cls)}


def test_every_key_type_is_registered_and_none_is_transient():
    codec = consumer_codec()
    written = {type(r.key) for r in every_record()}
    assert written == set(CONSUMER_GROUP_KEYS)
    assert not any(codec.is_transient(Record(r.key, None)) for r in every_record())


def test_registers_next_to_the_classic_and_share_record_types_under_kafkas_names():
    codec = group_codec()  # would raise on a name or a key class registered twice
    for record in every_record():
        key, _ = codec.encode(record)
        assert msgpack.unpackb(key)["type"] == type(record.key).__name__.removesuffix("Key")
    with pytest.raises(ValueError):
        consumer_records.register(codec)


# -- Kafka's GroupCoordinatorRecordHelpersTest ------------------------------------------------------


def test_group_epoch_record():
    record = consumer_group_epoch_record("group-id", 10, 0x1234_5678_9ABC)
    assert record.key == ConsumerGroupMetadataKey(group_id="group-id")
    assert record.value.epoch == 10
    assert record.value.metadata_hash == 0x1234_5678_9ABC
    assert consumer_group_epoch_tombstone("group-id") == Record(ConsumerGroupMetadataKey("group-id"), None)


def test_member_subscription_record():
    record = consumer_member_subscription_record("group-id", sample_member())
    assert record.key == ConsumerGroupMemberMetadataKey(group_id="group-id", member_id="member-id")
    value = record.value
    assert value.instance_id == "instance-id"
    assert value.rack_id == "rack-id"
    assert value.rebalance_timeout_ms == 5000
    assert value.client_id == "client-id"
    assert value.client_host == "client-host"
    assert value.subscribed_topic_names == ("bar", "foo", "zar")  # sorted, as Kafka sorts them
    assert value.subscribed_topic_regex == "regex"
    assert value.server_assignor == "range"
    # Kafka's test sets classic protocols on its member; ours has none to set (not ported yet).
    assert value.classic_member_metadata is None
    assert consumer_member_subscription_tombstone("group-id", "member-id") == Record(record.key, None)


def test_member_subscription_record_of_a_new_member_keeps_kafkas_builder_defaults():
    value = consumer_member_subscription_record("g", ConsumerGroupMember("m")).value
    assert value == ConsumerGroupMemberMetadataValue(
        instance_id=None,
        rack_id=None,
        client_id="",
        client_host="",
        subscribed_topic_names=(),
        subscribed_topic_regex="",  # Kafka's ConsumerGroupMember.Builder default, written as is
        server_assignor=None,  # Optional.empty() -> null
        rebalance_timeout_ms=-1,
    )


def test_target_assignment_record():
    record = consumer_target_assignment_record(
        "group-id", "member-id", {TOPIC_1: {13, 11, 12}, TOPIC_2: {23, 21, 22}}
    )
    assert record.key == ConsumerGroupTargetAssignmentMemberKey(group_id="group-id", member_id="member-id")
    assert record.value == ConsumerGroupTargetAssignmentMemberValue(
        topic_partitions=(
            ConsumerTopicPartitions(TOPIC_2, (21, 22, 23)),
            ConsumerTopicPartitions(TOPIC_1, (11, 12, 13)),
        )
    )
    assert consumer_target_assignment_tombstone("group-id", "member-id") == Record(record.key, None)


def test_target_assignment_epoch_record():
    record = consumer_target_assignment_epoch_record("group-id", 10)
    assert record.key == ConsumerGroupTargetAssignmentMetadataKey(group_id="group-id")
    assert record.value == ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=10)
    assert consumer_target_assignment_epoch_tombstone("group-id") == Record(record.key, None)


def test_current_assignment_record():
    record = consumer_current_assignment_record("group-id", sample_member())
    assert record.key == ConsumerGroupCurrentMemberAssignmentKey(group_id="group-id", member_id="member-id")
    value = record.value
    assert value.state == MemberState.UNREVOKED_PARTITIONS.value == 1
    assert value.member_epoch == 22
    assert value.previous_member_epoch == 21
    assert value.assigned_partitions == (
        ConsumerTopicPartitions(TOPIC_2, (21, 22, 23)),
        ConsumerTopicPartitions(TOPIC_1, (11, 12, 13)),
    )
    assert value.partitions_pending_revocation == (
        ConsumerTopicPartitions(TOPIC_2, (24, 25, 26)),
        ConsumerTopicPartitions(TOPIC_1, (14, 15, 16)),
    )
    assert consumer_current_assignment_tombstone("group-id", "member-id") == Record(record.key, None)


def test_current_assignment_record_of_a_new_member():
    assert consumer_current_assignment_record("g", ConsumerGroupMember("m")).value == (
        ConsumerGroupCurrentMemberAssignmentValue(0, -1, 0, (), ())
    )


def test_regular_expression_record():
    record = consumer_regular_expression_record("group-id", "ab*", {"abcd", "abc"}, 10, 12345)
    assert record.key == ConsumerGroupRegularExpressionKey(group_id="group-id", regular_expression="ab*")
    assert record.value == ConsumerGroupRegularExpressionValue(
        topics=("abc", "abcd"), metadata_version=10, timestamp=12345
    )
    assert consumer_regular_expression_tombstone("group-id", "ab*") == Record(record.key, None)


def test_equal_state_makes_equal_bytes_whatever_the_order_it_was_built_in():
    codec = consumer_codec()
    one = sample_member()
    other = replace(
        one,
        subscribed_topic_names=["zar", "bar", "foo"],
        assigned_partitions={TOPIC_2: [22, 23, 21], TOPIC_1: [12, 13, 11]},
        partitions_pending_revocation={TOPIC_2: [25, 26, 24], TOPIC_1: [15, 14, 16]},
    )
    for build in (consumer_member_subscription_record, consumer_current_assignment_record):
        assert codec.encode(build("g", one)) == codec.encode(build("g", other))
    assert codec.encode(consumer_target_assignment_record("g", "m", {TOPIC_1: [2, 1], TOPIC_2: [0]})) == codec.encode(
        consumer_target_assignment_record("g", "m", {TOPIC_2: (0,), TOPIC_1: {1, 2}, uuid.UUID(int=9): ()})
    )


# -- compaction keys -------------------------------------------------------------------------------


def test_keys_of_different_types_never_collide():
    """Same group, same member id (and a regex spelled as that member id): every record type keeps
    its own key bytes, across the consumer, share and classic record types."""
    codec = group_codec()
    g, m = "g", "m"
    keys = [
        ConsumerGroupMetadataKey(g),
        ConsumerGroupMemberMetadataKey(g, m),
        ConsumerGroupTargetAssignmentMetadataKey(g),
        ConsumerGroupTargetAssignmentMemberKey(g, m),
        ConsumerGroupCurrentMemberAssignmentKey(g, m),
        ConsumerGroupRegularExpressionKey(g, m),
        share_records.ShareGroupMetadataKey(g),
        share_records.ShareGroupMemberMetadataKey(g, m),
        share_records.ShareGroupTargetAssignmentMetadataKey(g),
        share_records.ShareGroupTargetAssignmentMemberKey(g, m),
        share_records.ShareGroupCurrentMemberAssignmentKey(g, m),
        share_records.ShareGroupStatePartitionMetadataKey(g),
        classic_records.GroupMetadataKey(g),
    ]
    encoded = [codec.encode(Record(k, None))[0] for k in keys]
    assert len(set(encoded)) == len(keys)
    for key, raw in zip(keys, encoded):
        assert codec.decode(raw, None).key == key


def test_keys_of_one_type_differ_by_group_member_and_regex():
    codec = consumer_codec()
    keys = [
        ConsumerGroupRegularExpressionKey(g, r) for g, r in itertools.product(("g", "g2"), ("a.*", "b.*"))
    ] + [ConsumerGroupMemberMetadataKey(g, m) for g, m in itertools.product(("g", "g2"), ("m1", "m2"))]
    assert len({codec.encode(Record(k, None))[0] for k in keys}) == len(keys)


# -- compatibility: a record written before a field existed ------------------------------------------


def older(codec: RecordCodec, record: Record, *dropped: str) -> tuple[bytes, bytes]:
    """The record's bytes as a coordinator that did not have the `dropped` value fields wrote them."""
    key, value = codec.encode(record)
    fields = msgpack.unpackb(value)
    for name in dropped:
        del fields[name]
    return key, msgpack.packb(fields)


def test_a_group_epoch_written_before_kip_1101_reads_with_a_zero_metadata_hash():
    codec = consumer_codec()
    record = consumer_group_epoch_record("g", 5, 99)
    assert codec.decode(*older(codec, record, "metadata_hash")).value == ConsumerGroupMetadataValue(5, 0)


def test_a_member_written_without_its_defaulted_fields_reads_with_kafkas_defaults():
    codec = consumer_codec()
    record = consumer_member_subscription_record("g", sample_member())
    decoded = codec.decode(*older(codec, record, "rebalance_timeout_ms", "classic_member_metadata"))
    assert decoded.value.rebalance_timeout_ms == -1
    assert decoded.value.classic_member_metadata is None
    assert decoded.value.subscribed_topic_names == ("bar", "foo", "zar")


def test_a_current_assignment_written_without_partition_lists_reads_them_empty():
    codec = consumer_codec()
    record = consumer_current_assignment_record("g", sample_member())
    decoded = codec.decode(*older(codec, record, "assigned_partitions", "partitions_pending_revocation"))
    assert decoded.value == ConsumerGroupCurrentMemberAssignmentValue(22, 21, 1)


def test_a_field_from_a_newer_coordinator_is_ignored():
    codec = consumer_codec()
    key, value = codec.encode(consumer_target_assignment_epoch_record("g", 3))
    newer = msgpack.packb({**msgpack.unpackb(value), "future_field": [1, 2]})
    assert codec.decode(key, newer) == consumer_target_assignment_epoch_record("g", 3)
