"""Requests and responses of the classic group APIs, independent of the wire version.

The gateway turns every version of JoinGroup, SyncGroup, ... into these and back; the coordinator
sees one shape per API, as Kafka's coordinator sees one *RequestData per API.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.share.messages import ShareStateDelete
from kernel.message import message

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference

UNKNOWN_MEMBER_ID = ""


@message
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None
    # v4+: a new dynamic member must first learn its id (MEMBER_ID_REQUIRED); v9+: skip assignment.
    requires_known_member_id: bool = True
    supports_skip_assignment: bool = True


@message
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@message
class JoinGroupResponse:
    error_code: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


@message
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@message
class SyncGroupResponse:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@message
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@message
class HeartbeatResponse:
    error_code: ErrorCode


@message
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@message
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeavingMember, ...]


@message
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@message
class LeaveGroupResponse:
    error_code: ErrorCode
    members: tuple[LeftMember, ...] = ()


@message
class CommitPartition:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@message
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: tuple[tuple[str, tuple[CommitPartition, ...]], ...]
    retention_time_ms: int = -1  # v2-v4 only
    # v9+ answers GROUP_ID_NOT_FOUND for an unknown group; older versions ILLEGAL_GENERATION.
    api_version: int = 9


@message
class OffsetCommitResponse:
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]


@message
class OffsetFetchRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None  # None: every committed offset
    require_stable: bool = False
    # v9+: a consumer-protocol member fetches as itself (checked against its epoch); None and -1
    # for an admin or a client outside group management.
    member_id: str | None = None
    member_epoch: int = -1


@message
class FetchedOffset:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    error_code: ErrorCode = ErrorCode.none


@message
class OffsetFetchResponse:
    group_id: str
    error_code: ErrorCode
    topics: tuple[tuple[str, tuple[FetchedOffset, ...]], ...] = ()


@message
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@message
class DescribedGroup:
    group_id: str
    error_code: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...] = ()
    error_message: str | None = None


@message
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@message
class DeletedGroup:
    group_id: str
    error_code: ErrorCode
    # A deleted share group's share partitions, whose durable state the cluster must delete on the
    # share coordinators (Kafka's DeleteShareGroupState before the group's tombstones).
    share_state_deletes: tuple[ShareStateDelete, ...] = ()
