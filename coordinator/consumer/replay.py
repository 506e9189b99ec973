"""The replay of consumer-group records into the shard's groups (Kafka's GroupMetadataManager.replay
for the ConsumerGroup* records): the only code that changes a consumer group.

Each record names one group, and calls the group's update methods (group.py). A record with a value
creates the group if there is none, and replaces a classic group of the same id (Kafka's
getOrMaybeCreatePersistedConsumerGroup: an upgrade writes the classic group's tombstone first, and
a group of offsets alone is a classic group here). Tombstones come in the order the operations
write them (current assignment, target, subscription; the group epoch last); one out of that order
means the log contradicts itself, and replay raises without changing the group.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from coordinator.classic.group import ClassicGroup
from coordinator.consumer.group import ConsumerGroup, ResolvedRegularExpression
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.messages import LEAVE_GROUP_MEMBER_EPOCH
from coordinator.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerTopicPartitions,
)
from coordinator.member_state import MemberState
from kernel.codec import Record


def _partitions(topics: tuple[ConsumerTopicPartitions, ...]) -> dict[Any, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in topics}


def _group(groups: dict[str, Any], group_id: str, create: bool) -> ConsumerGroup | None:
    group = groups.get(group_id)
    if isinstance(group, ConsumerGroup):
        return group
    if not create:
        if group is None:
            return None  # a tombstone for a group that is gone already
        raise ValueError(f"consumer group tombstone for {group_id}, which is a {group.group_type} group")
    if group is not None and not isinstance(group, ClassicGroup):
        raise ValueError(f"consumer group record for {group_id}, which is a {group.group_type} group")
    group = groups[group_id] = ConsumerGroup(group_id)
    return group


def replay(groups: dict[str, Any], record: Record) -> None:
    key, value = record.key, record.value
    group = _group(groups, key.group_id, value is not None)
    if group is None:
        return
    if isinstance(key, ConsumerGroupMetadataKey):
        if value is not None:
            group.set_group_epoch(value.epoch)
            group.set_metadata_hash(value.metadata_hash)
            return
        if group.members:
            raise ValueError(f"consumer group {key.group_id} deleted before its members")
        group.mark_dead()
        del groups[key.group_id]
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        member = group.member(key.member_id)
        if value is not None:
            base = member or ConsumerGroupMember(key.member_id)
            group.update_member(
                replace(
                    base,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=frozenset(value.subscribed_topic_names),
                    subscribed_topic_regex=value.subscribed_topic_regex or "",
                    server_assignor_name=value.server_assignor,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    classic_member_metadata=value.classic_member_metadata,
                )
            )
        elif member is not None:
            if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                raise ValueError(f"member {key.member_id} deleted before its current assignment")
            if key.member_id in group.target_assignment:
                raise ValueError(f"member {key.member_id} deleted before its target assignment")
            group.remove_member(key.member_id)
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        if value is not None:
            group.update_target_assignment(key.member_id, _partitions(value.topic_partitions))
        else:
            group.remove_target_assignment(key.member_id)
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        if value is not None:
            group.set_target_assignment_epoch(value.assignment_epoch)
        else:
            if group.target_assignment:
                raise ValueError(f"target assignment epoch of {key.group_id} deleted while members still have one")
            group.set_target_assignment_epoch(-1)
    elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        member = group.member(key.member_id)
        if value is not None:
            base = member or ConsumerGroupMember(key.member_id)
            group.update_member(
                replace(
                    base,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=MemberState.from_value(value.state),
                    assigned_partitions=_partitions(value.assigned_partitions),
                    partitions_pending_revocation=_partitions(value.partitions_pending_revocation),
                )
            )
        elif member is not None:
            group.update_member(
                replace(
                    member,
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned_partitions={},
                    partitions_pending_revocation={},
                )
            )
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        if value is not None:
            group.update_resolved_regular_expression(
                key.regular_expression,
                ResolvedRegularExpression(frozenset(value.topics), value.metadata_version, value.timestamp),
            )
        else:
            group.remove_resolved_regular_expression(key.regular_expression)
    else:
        raise TypeError(f"not a consumer group record: {type(key).__name__}")
