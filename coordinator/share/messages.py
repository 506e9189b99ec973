"""Requests and responses of the share-group APIs on the group coordinator, independent of the wire version.

The gateway turns ShareGroupHeartbeat and ShareGroupDescribe into these and back; the cluster acts on
the share-state items (ShareStateInit, ShareStateDelete) by calling the share coordinators
(InitializeShareGroupState, DeleteShareGroupState) and reports initializations back with
ShareStateInitResult (Kafka's GroupCoordinatorService.persisterInitialize).
"""

from __future__ import annotations

from uuid import UUID

from kio.schema.errors import ErrorCode

from kernel.message import message

# ShareGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH; epoch 0 joins.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1

SHARE_PROTOCOL_TYPE = "share"  # ShareGroup.PROTOCOL_TYPE
SIMPLE_ASSIGNOR_NAME = "simple"  # SimpleAssignor.name()

Assignment = tuple[tuple[UUID, tuple[int, ...]], ...]  # (topic id, partitions), sorted


@message
class TopicImage:
    """What the cluster's metadata says of one topic (Kafka's CoordinatorMetadataImage.TopicMetadata)."""

    name: str
    topic_id: UUID
    partitions: int  # the partition count


@message
class ShareGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged since the last full request
    client_id: str = ""
    client_host: str = ""


@message
class ShareGroupHeartbeatResponse:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged (only sent on join, full request or change)


@message
class ShareStateInit:
    """One share partition whose share state the cluster must initialize (InitializeShareGroupState)."""

    group_id: str
    topic_id: UUID
    partition: int
    state_epoch: int
    start_offset: int = -1  # -1: the share partition applies share.auto.offset.reset


@message
class ShareStateDelete:
    """One share partition whose share state the cluster must delete (DeleteShareGroupState)."""

    group_id: str
    topic_id: UUID
    partition: int


@message
class ShareStateDeletion:
    """DeleteGroups' first step for one group: the share state to delete before the group goes, or
    why the group must stay (GROUP_NOT_EMPTY); NONE with nothing to delete for any other group."""

    group_id: str
    error_code: ErrorCode
    deletes: tuple[ShareStateDelete, ...] = ()


@message
class ShareStateInitResult:
    """The share coordinator's answer to one ShareStateInit."""

    topic_id: UUID
    partition: int
    error_code: ErrorCode


@message
class ShareHeartbeatOutcome:
    """What share_group_heartbeat answers: the response, and the share state to initialize (after the
    records are durable, as Kafka's persisterInitialize runs after the heartbeat's write)."""

    response: ShareGroupHeartbeatResponse
    initialize: tuple[ShareStateInit, ...] = ()


@message
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[tuple[UUID, str, tuple[int, ...]], ...]  # (topic id, topic name, partitions)


@message
class DescribedShareGroup:
    """ShareGroupDescribe v1's DescribedGroup."""

    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareMember, ...] = ()
    authorized_operations: int = -2147483648  # not requested / not computed here


@message
class ShareGroupTopics:
    """The share partitions a share group has state for (DescribeShareGroupOffsets with no topics
    named lists these): its initialized topics, (topic id, name, partitions)."""

    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    topics: tuple[tuple[UUID, str, tuple[int, ...]], ...] = ()
