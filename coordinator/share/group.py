"""A share group and its members, as the group coordinator holds them (seed 001 §5-2-1-3; Kafka 4.x
`modern/share/ShareGroup`, `ShareGroupMember`, `ModernGroup`, `GroupMetadataManager.replay`).

Everything here is durable: the group epoch and metadata hash (ShareGroupMetadata), each member's
subscription (ShareGroupMemberMetadata) and current assignment (ShareGroupCurrentMemberAssignment),
the target assignment (ShareGroupTargetAssignmentMember/-Metadata) and which share partitions have
their share state initializing, initialized or being deleted (ShareGroupStatePartitionMetadata).
`replay` applies those records and is the only code that changes a share group; an operation reads
the group and writes records. Members are immutable: a change makes a new member.

The member is member.py, the share-state partition metadata partition_metadata.py; both are
re-exported here, where the group and its replay use them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID

from collections.abc import Hashable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import ListedGroup
from coordinator.share.messages import SHARE_PROTOCOL_TYPE, ShareStateDelete
from coordinator.share.member import (  # noqa: F401  (re-exported)
    MemberState,
    ShareGroupMember,
    TopicPartitions,
    freeze_partitions,
    member_view,
    partitions_view,
)
from coordinator.share.metadata import TopicsImage
from coordinator.share.partition_metadata import (  # noqa: F401  (re-exported: the group's part of its records)
    EMPTY_SHARE_STATE,
    InitMapValue,
    ShareStatePartitionMetadata,
    combine_init_maps,
    deletes_for,
    known_partitions,
    partitions_to_delete,
)
from kernel.codec import Record
from kernel.lifecycle import IllegalTransition, validate_transition
from coordinator.classic.records import offset_tombstone
from coordinator.share.records import (
    share_current_assignment_tombstone,
    share_group_epoch_tombstone,
    share_member_subscription_tombstone,
    share_state_partition_metadata_tombstone,
    share_target_assignment_epoch_tombstone,
    share_target_assignment_tombstone,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareTopicPartitions,
    ShareTopicPartitionsInfo,
)

if TYPE_CHECKING:  # pragma: no cover
    from coordinator.group import Scheduler

LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState(enum.Enum):
    """Kafka's ShareGroupState; the state follows the members (ShareGroup.maybeUpdateGroupState).

        Empty  -> Stable  (a member joins)
        Stable -> Empty   (the last member leaves or its session expires)
        any    -> Dead    (the group is deleted: its ShareGroupMetadata tombstone)
    """

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def validate_transition(self, target: "ShareGroupState") -> None:
        """Raise, changing nothing, unless self -> target is legal (staying put is)."""
        validate_transition(_VALID_PREVIOUS, self, target, "share group", stay=True)


_S = ShareGroupState
_VALID_PREVIOUS: dict[ShareGroupState, frozenset[ShareGroupState]] = {
    _S.EMPTY: frozenset({_S.STABLE}),
    _S.STABLE: frozenset({_S.EMPTY}),
    _S.DEAD: frozenset({_S.EMPTY, _S.STABLE}),
}


def session_key(group_id: str, member_id: str) -> Hashable:
    return ("share-session", group_id, member_id)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    state: ShareGroupState = ShareGroupState.EMPTY
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, TopicPartitions] = field(default_factory=dict)
    share_state: ShareStatePartitionMetadata | None = None

    group_type = "share"

    @property
    def protocol_type(self) -> str:
        return "share"

    # -- the Group protocol (coordinator/group.py) ---------------------------------------------------

    def memory_record(self, group_id: str, group: Any) -> None:
        return None  # a share group changes only by its durable records

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, SHARE_PROTOCOL_TYPE, self.state.value, self.group_type)

    def validate_delete(self) -> ErrorCode | None:
        return None if self.state is ShareGroupState.EMPTY else ErrorCode.non_empty_group

    def delete_records(self, offsets: Iterable[tuple[str, int]]) -> list[Record]:
        """Kafka's order (ShareGroup.createGroupTombstoneRecords), after the group's offsets."""
        gid = self.group_id
        records = [offset_tombstone(gid, topic, partition) for topic, partition in sorted(offsets)]
        records += [share_current_assignment_tombstone(gid, mid) for mid in self.members]
        records += [share_target_assignment_tombstone(gid, mid) for mid in self.target_assignment]
        records.append(share_target_assignment_epoch_tombstone(gid))
        records += [share_member_subscription_tombstone(gid, mid) for mid in self.members]
        records.append(share_state_partition_metadata_tombstone(gid))
        records.append(share_group_epoch_tombstone(gid))
        return records

    def share_state_deletes(self, image: TopicsImage) -> tuple[ShareStateDelete, ...]:
        """The share state the group's delete leaves behind: partitions still initialized or
        initializing. After DeleteGroups' first step (deletion.py) there are none: their state was
        deleted before the group, and deleting it again could wipe a new group's of the same id."""
        if self.share_state is None:
            return ()
        return deletes_for(self.group_id, {tid: v.partitions for tid, v in known_partitions(self.share_state).items()})

    def validate_offset_commit(self, req: Any) -> ErrorCode | None:
        return ErrorCode.group_id_not_found

    def validate_offset_delete(self) -> ErrorCode | None:
        return ErrorCode.group_id_not_found  # Kafka: a share group is "not a consumer group"

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        # Kafka's ShareGroup.validateOffsetFetch: a share group has no committed offsets to fetch;
        # OffsetFetch answers it as a group without offsets (coordinator/classic/offsets.py).
        return ErrorCode.group_id_not_found

    def offset_expiration_condition(self) -> None:
        return None  # a share group commits no offsets (Kafka does not ask a share group)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def is_deletable_without_offsets(self) -> bool:
        return False

    def arm_sessions(self, ctx: "Scheduler") -> None:
        timeout = ctx.share_session_timeout_ms(self.group_id)
        for member_id in self.members:
            ctx.schedule(session_key(self.group_id, member_id), timeout, "expire_share_session", self.group_id, member_id)

    def copy(self) -> "ShareGroup":
        """A copy replay may change without touching this one (members and values are immutable)."""
        clone = replace(self)
        clone.members = dict(self.members)
        clone.target_assignment = dict(self.target_assignment)
        return clone

    def is_empty(self) -> bool:
        return self.state is ShareGroupState.EMPTY

    def subscribed_topic_names(self, without: str | None = None) -> frozenset[str]:
        """The union of the members' subscriptions (Kafka's subscribedTopicNames keys)."""
        names: set[str] = set()
        for member_id, member in self.members.items():
            if member_id != without:
                names |= member.subscribed_topic_names
        return frozenset(names)

    # -- replay helpers (only `replay` below calls them) ----------------------------------------------

    def _update_state(self) -> None:
        target = ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY
        self.state.validate_transition(target)
        self.state = target

    def _put_member(self, member: ShareGroupMember) -> None:
        self.members[member.member_id] = member
        self._update_state()

    def _remove_member(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self._update_state()

    def durable_view(self) -> tuple[Any, ...]:
        """Everything the log holds about the group, for comparing a live group with a replayed one."""
        share_state = self.share_state
        return (
            "share",
            self.state.value,
            self.group_epoch,
            self.metadata_hash,
            self.assignment_epoch,
            tuple(sorted((mid, member_view(m)) for mid, m in self.members.items())),
            tuple(sorted((mid, partitions_view(p)) for mid, p in self.target_assignment.items())),
            None if share_state is None else (
                _init_view(share_state.initializing),
                _init_view(share_state.initialized),
                tuple(sorted(share_state.deleting.items())),
            ),
        )


def _init_view(topics: Mapping[UUID, InitMapValue]) -> tuple[Any, ...]:
    return tuple((tid, v.name, tuple(sorted(v.partitions)), v.timestamp) for tid, v in sorted(topics.items()))


# -- replay (Kafka's GroupMetadataManager.replay for the ShareGroup* records) ---------------------------


class GroupTypeConflict(RuntimeError):
    """A share record names a group id that another group type holds: the log is inconsistent."""


def _partitions_from(topics: Iterable[ShareTopicPartitions]) -> dict[UUID, frozenset[int]]:
    return freeze_partitions({tp.topic_id: tp.partitions for tp in topics})


def _init_map(topics: Iterable[ShareTopicPartitionsInfo]) -> dict[UUID, InitMapValue]:
    return {t.topic_id: InitMapValue(t.topic_name, frozenset(t.partitions), t.create_timestamp) for t in topics}


def _persisted_group(groups: dict[str, Any], group_id: str, create: bool) -> ShareGroup | None:
    """Kafka's getOrMaybeCreatePersistedShareGroup: None for a tombstone of an unknown group."""
    group = groups.get(group_id)
    if group is None:
        if not create:
            return None
        group = ShareGroup(group_id)
        groups[group_id] = group
        return group
    if not isinstance(group, ShareGroup):
        raise GroupTypeConflict(f"group {group_id} is not a share group")
    return group


def replay(groups: dict[str, Any], record: Record) -> None:
    """Apply one ShareGroup* record to the shard's groups (keyed by group id, all types together)."""
    key, value = record.key, record.value
    group = _persisted_group(groups, key.group_id, value is not None)
    if group is None:
        return  # a tombstone for a group that is gone already
    if isinstance(key, ShareGroupMetadataKey):
        if value is not None:
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
            return
        if group.members or group.target_assignment or group.assignment_epoch != -1:
            raise ValueError(f"share group {key.group_id} deleted before its members and target assignment")
        group.state.validate_transition(ShareGroupState.DEAD)
        group.state = ShareGroupState.DEAD
        del groups[key.group_id]
    elif isinstance(key, ShareGroupMemberMetadataKey):
        member = group.members.get(key.member_id)
        if value is not None:
            member = member or ShareGroupMember(key.member_id)
            group._put_member(
                replace(
                    member,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=frozenset(value.subscribed_topic_names),
                )
            )
        elif member is not None:
            if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH or key.member_id in group.target_assignment:
                raise ValueError(f"member {key.member_id} deleted before its assignments")
            group._remove_member(key.member_id)
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        if value is not None:
            group.target_assignment[key.member_id] = _partitions_from(value.topic_partitions)
        else:
            group.target_assignment.pop(key.member_id, None)
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
        else:
            if group.target_assignment:
                raise ValueError(f"target assignment of {key.group_id} deleted while members still have one")
            group.assignment_epoch = -1
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        member = group.members.get(key.member_id)
        if value is not None:
            member = member or ShareGroupMember(key.member_id)
            group._put_member(
                replace(
                    member,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=MemberState(value.state),
                    assigned_partitions=_partitions_from(value.assigned_partitions),
                )
            )
        elif member is not None:
            group._put_member(
                replace(
                    member,
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned_partitions={},
                )
            )
    elif isinstance(key, ShareGroupStatePartitionMetadataKey):
        if value is None:
            group.share_state = None
        else:
            group.share_state = ShareStatePartitionMetadata(
                initializing=_init_map(value.initializing_topics),
                initialized=_init_map(value.initialized_topics),
                deleting={t.topic_id: t.topic_name for t in value.deleting_topics},
            )
    else:
        raise TypeError(f"not a share group record: {type(key).__name__}")
