"""Record types of share groups in `__consumer_offsets` (KIP-932; Kafka's ShareGroup*Key/Value schemas).

Everything about a share group is durable, so replaying these records alone rebuilds it:
- ShareGroupMetadata: the group epoch and the hash of the subscribed topics' metadata.
- ShareGroupMemberMetadata: a member's rack, client id and host, and subscribed topic names.
- ShareGroupTargetAssignmentMetadata: the epoch of the target assignment.
- ShareGroupTargetAssignmentMember: a member's target partitions.
- ShareGroupCurrentMemberAssignment: a member's epoch, previous epoch, state and assigned partitions.
- ShareGroupStatePartitionMetadata: which share partitions of the group have their share state
  initializing, initialized or being deleted on the share coordinators. The create timestamp of an
  initializing topic is Kafka's `CreateTimestamp` (newer schema), so the initialization retry
  interval survives a failover and replay is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from coordinator.topic_partitions import partitions_view
from kernel.codec import Record, RecordCodec



@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareTopicPartitions:
    topic_id: UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[ShareTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState value; share members are always STABLE (0)
    assigned_partitions: tuple[ShareTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareTopicPartitionsInfo:
    topic_id: UUID
    topic_name: str
    partitions: tuple[int, ...]
    create_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class ShareTopicInfo:
    topic_id: UUID
    topic_name: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[ShareTopicPartitionsInfo, ...] = ()
    initialized_topics: tuple[ShareTopicPartitionsInfo, ...] = ()
    deleting_topics: tuple[ShareTopicInfo, ...] = ()



def register(codec: RecordCodec) -> None:
    codec.register(ShareGroupMetadataKey, ShareGroupMetadataValue, name="ShareGroupMetadata")
    codec.register(ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue, name="ShareGroupMemberMetadata")
    codec.register(
        ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue, name="ShareGroupTargetAssignmentMetadata"
    )
    codec.register(
        ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue, name="ShareGroupTargetAssignmentMember"
    )
    codec.register(
        ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue, name="ShareGroupCurrentMemberAssignment"
    )
    codec.register(
        ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue, name="ShareGroupStatePartitionMetadata"
    )


SHARE_GROUP_KEYS = (
    ShareGroupMetadataKey,
    ShareGroupMemberMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupStatePartitionMetadataKey,
)

ShareAssignment = Mapping[UUID, Iterable[int]]  # topic id -> partitions


def _topic_partitions(partitions: ShareAssignment) -> tuple[ShareTopicPartitions, ...]:
    """Sorted by topic id and partition, so equal assignments make equal records."""
    return tuple(ShareTopicPartitions(topic_id, ps) for topic_id, ps in partitions_view(partitions) if ps)


def _topic_partitions_info(topics: Mapping[UUID, Any]) -> tuple[ShareTopicPartitionsInfo, ...]:
    return tuple(
        ShareTopicPartitionsInfo(topic_id, v.name, tuple(sorted(v.partitions)), v.timestamp)
        for topic_id, v in sorted(topics.items())
    )


def share_group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    """Kafka's newShareGroupEpochRecord."""
    return Record(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(epoch, metadata_hash))


def share_group_epoch_tombstone(group_id: str) -> Record:
    return Record(ShareGroupMetadataKey(group_id), None)


def share_member_subscription_record(group_id: str, member: Any) -> Record:
    """Kafka's newShareGroupMemberSubscriptionRecord (topic names sorted, as Kafka sorts them)."""
    return Record(
        ShareGroupMemberMetadataKey(group_id, member.member_id),
        ShareGroupMemberMetadataValue(
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        ),
    )


def share_member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ShareGroupMemberMetadataKey(group_id, member_id), None)


def share_target_assignment_record(group_id: str, member_id: str, partitions: ShareAssignment) -> Record:
    return Record(
        ShareGroupTargetAssignmentMemberKey(group_id, member_id),
        ShareGroupTargetAssignmentMemberValue(_topic_partitions(partitions)),
    )


def share_target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ShareGroupTargetAssignmentMemberKey(group_id, member_id), None)


def share_target_assignment_epoch_record(group_id: str, assignment_epoch: int) -> Record:
    return Record(ShareGroupTargetAssignmentMetadataKey(group_id), ShareGroupTargetAssignmentMetadataValue(assignment_epoch))


def share_target_assignment_epoch_tombstone(group_id: str) -> Record:
    return Record(ShareGroupTargetAssignmentMetadataKey(group_id), None)


def share_current_assignment_record(group_id: str, member: Any) -> Record:
    return Record(
        ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ShareGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned_partitions=_topic_partitions(member.assigned_partitions),
        ),
    )


def share_current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None)


def share_state_partition_metadata_record(
    group_id: str,
    initializing: Mapping[UUID, Any],
    initialized: Mapping[UUID, Any],
    deleting: Mapping[UUID, str],
) -> Record:
    """Kafka's newShareGroupStatePartitionMetadataRecord: topic id -> (name, partitions, timestamp)."""
    return Record(
        ShareGroupStatePartitionMetadataKey(group_id),
        ShareGroupStatePartitionMetadataValue(
            initializing_topics=_topic_partitions_info(initializing),
            initialized_topics=_topic_partitions_info(initialized),
            deleting_topics=tuple(ShareTopicInfo(topic_id, name) for topic_id, name in sorted(deleting.items())),
        ),
    )


def share_state_partition_metadata_tombstone(group_id: str) -> Record:
    return Record(ShareGroupStatePartitionMetadataKey(group_id), None)
