"""Record types of classic groups in `__consumer_offsets`, next to nothing but their factories.

Durable (Kafka's own record types):
- GroupMetadata: a classic group's generation, protocol, leader and members with their
  subscription and assignment; written when a generation's assignment is stored (leader's
  SyncGroup), when a group is created or becomes Empty, and when a static member is replaced.
- OffsetCommit: one committed offset per (group, topic, partition); a tombstone removes it.

Transient (replayed, never written, lost on failover as in Kafka): ClassicGroupState installs the
in-memory copy of a classic group that an operation built (who waits in JoinGroup/SyncGroup, the
rebalance in progress). State therefore changes only by replay, and loading is the same path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from kernel.codec import Record, RecordCodec


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()


# OffsetCommit is most of a `__consumer_offsets` log, so its key and value are msgspec Structs rather
# than dataclasses (issue 12): decoded in half the time, and, holding only scalars, never tracked by
# the garbage collector, whose passes over every stored offset took half of replay. Same fields,
# equality, hash, pickling and bytes on the log (tests/unit/test_records_golden.py).
class OffsetCommitKey(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    topic: str
    partition: int


class OffsetCommitValue(msgspec.Struct, frozen=True, gc=False):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only OffsetCommit v1 set it; kept for old logs' sake


@dataclass(frozen=True, slots=True)
class ClassicGroupStateKey:
    group_id: str


def register(codec: RecordCodec) -> None:
    codec.register(GroupMetadataKey, GroupMetadataValue, name="GroupMetadata")
    codec.register(OffsetCommitKey, OffsetCommitValue, name="OffsetCommit")
    codec.register(ClassicGroupStateKey, None, name="ClassicGroupState", transient=True)


# -- factories --------------------------------------------------------------------------------------


def group_metadata_record(group: Any, assignment: dict[str, bytes]) -> Record:
    """Kafka's newGroupMetadataRecord: the group with each member's subscription and assignment."""
    members = tuple(
        MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name),
            assignment=assignment.get(m.member_id, b""),
        )
        for m in group.members.values()
    )
    return Record(
        GroupMetadataKey(group.group_id),
        GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=members,
        ),
    )


def empty_group_metadata_record(group: Any) -> Record:
    """Kafka's newEmptyGroupMetadataRecord: commits a newly created group to the log."""
    return Record(
        GroupMetadataKey(group.group_id),
        GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=group.state_timestamp,
        ),
    )


def group_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id), None)


def offset_commit_record(
    group_id: str,
    topic: str,
    partition: int,
    offset: int,
    leader_epoch: int,
    metadata: str,
    commit_timestamp: int,
    expire_timestamp: int = -1,
) -> Record:
    return Record(
        OffsetCommitKey(group_id, topic, partition),
        OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp),
    )


def offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), None)


def classic_group_state(group_id: str, group: Any) -> Record:
    value: Any = group
    return Record(ClassicGroupStateKey(group_id), value)


