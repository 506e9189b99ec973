"""Record types of consumer groups in `__consumer_offsets` (KIP-848; Kafka's ConsumerGroup*Key/Value
schemas, with the 4.x fields).

A consumer group lives in memory and on the log only as these records, so replaying them alone
rebuilds it after a failover:
- ConsumerGroupMetadata: the group epoch, and the hash of the subscribed topics' metadata (KIP-1101,
  Kafka 4.1) that tells a new coordinator whether the topics changed while it was not leader.
- ConsumerGroupMemberMetadata: what a member asked for (instance id, rack, client id and host,
  subscribed topic names or regex, rebalance timeout, server assignor): the input of the assignor.
  The classic protocol's metadata of a member that joined with JoinGroup (its session timeout and
  protocols) is set for such members only.
- ConsumerGroupTargetAssignmentMetadata: the epoch of the target assignment, so that a new
  coordinator knows whether the target is behind the group epoch and must be recomputed.
- ConsumerGroupTargetAssignmentMember: a member's target partitions.
- ConsumerGroupCurrentMemberAssignment: where a member is in its reconciliation (epoch, previous
  epoch, state, the partitions it owns and those it must still revoke), so that fencing and the
  next heartbeat answer the same after a failover.
- ConsumerGroupRegularExpression: the topics a subscription regex resolved to, with the metadata
  version and time of the resolution, so the regex is not resolved again on every load.

Not here: ConsumerGroupPartitionMetadata, the subscribed topics' metadata that KIP-1101 replaced
with the hash above. Kafka 4.1 and later never write a value for it and read it only to tombstone
what an older coordinator wrote; raygroups never wrote it, so no log of ours holds one.

Builders are Kafka's GroupCoordinatorRecordHelpers for consumer groups. Where Kafka writes a set or
a hash map in iteration order, these sort (topic ids, partitions, topic names), so that equal state
always makes equal records and equal bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from uuid import UUID

from coordinator.consumer.member import ClassicMemberMetadata, ClassicProtocol, ConsumerGroupMember  # noqa: F401  (ClassicProtocol: its nested type, for the codec)
from coordinator.topic_partitions import partitions_view
from kernel.codec import Record, RecordCodec


@dataclass(frozen=True, slots=True)
class ConsumerTopicPartitions:
    """Kafka's TopicPartition(s) struct of the assignment values: one topic's partitions."""

    topic_id: UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0  # Kafka 4.1's tagged field (KIP-1101); 0 in a record written before it


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    # Kafka lists RebalanceTimeoutMs before ServerAssignor; it comes after here because a dataclass
    # field with a default cannot precede one without, and the decoder reads a map by name.
    rebalance_timeout_ms: int = -1
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[ConsumerTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState byte; replay reads an unknown one as UNKNOWN (MemberState.from_value)
    assigned_partitions: tuple[ConsumerTopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[ConsumerTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    # Kafka's `Version`: of the metadata image the regex was resolved against. Renamed because every
    # value map already holds the record's own version under "version" (kernel/codec.py).
    metadata_version: int
    timestamp: int  # when it was resolved, ms


def register(codec: RecordCodec) -> None:
    codec.register(ConsumerGroupMetadataKey, ConsumerGroupMetadataValue, name="ConsumerGroupMetadata")
    codec.register(
        ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, name="ConsumerGroupMemberMetadata"
    )
    codec.register(
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupTargetAssignmentMetadataValue,
        name="ConsumerGroupTargetAssignmentMetadata",
    )
    codec.register(
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMemberValue,
        name="ConsumerGroupTargetAssignmentMember",
    )
    codec.register(
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupCurrentMemberAssignmentValue,
        name="ConsumerGroupCurrentMemberAssignment",
    )
    codec.register(
        ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue, name="ConsumerGroupRegularExpression"
    )


CONSUMER_GROUP_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)

ConsumerAssignment = Mapping[UUID, Iterable[int]]  # topic id -> partitions


def _topic_partitions(partitions: ConsumerAssignment) -> tuple[ConsumerTopicPartitions, ...]:
    """Sorted by topic id and partition. A topic without partitions is left out: the member's maps
    never hold one, and keeping it would make `{t: ()}` and `{}` different records."""
    return tuple(ConsumerTopicPartitions(topic_id, ps) for topic_id, ps in partitions_view(partitions) if ps)


def consumer_group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    """Kafka's newConsumerGroupEpochRecord (4.1: with the subscribed topics' metadata hash)."""
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch, metadata_hash))


def consumer_group_epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id), None)


def consumer_member_subscription_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """Kafka's newConsumerGroupMemberSubscriptionRecord: topic names sorted as Kafka sorts them, the
    regex as the member holds it ("" for none, Kafka's builder default)."""
    return Record(
        ConsumerGroupMemberMetadataKey(group_id, member.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
            subscribed_topic_regex=member.subscribed_topic_regex,
            server_assignor=member.server_assignor_name,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            classic_member_metadata=member.classic_member_metadata,
        ),
    )


def consumer_member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None)


def consumer_target_assignment_record(group_id: str, member_id: str, partitions: ConsumerAssignment) -> Record:
    """Kafka's newConsumerGroupTargetAssignmentRecord."""
    return Record(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(_topic_partitions(partitions)),
    )


def consumer_target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)


def consumer_target_assignment_epoch_record(group_id: str, assignment_epoch: int) -> Record:
    """Kafka's newConsumerGroupTargetAssignmentEpochRecord."""
    return Record(
        ConsumerGroupTargetAssignmentMetadataKey(group_id),
        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch),
    )


def consumer_target_assignment_epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), None)


def consumer_current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """Kafka's newConsumerGroupCurrentAssignmentRecord."""
    return Record(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned_partitions=_topic_partitions(member.assigned_partitions),
            partitions_pending_revocation=_topic_partitions(member.partitions_pending_revocation),
        ),
    )


def consumer_current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)


def consumer_regular_expression_record(
    group_id: str, regex: str, topics: Iterable[str], metadata_version: int, timestamp: int
) -> Record:
    """Kafka's newConsumerGroupRegularExpressionRecord, from the fields of its
    ResolvedRegularExpression (topics sorted, as Kafka sorts them)."""
    return Record(
        ConsumerGroupRegularExpressionKey(group_id, regex),
        ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), metadata_version, timestamp),
    )


def consumer_regular_expression_tombstone(group_id: str, regex: str) -> Record:
    """Kafka's newConsumerGroupRegularExpressionTombstone."""
    return Record(ConsumerGroupRegularExpressionKey(group_id, regex), None)
