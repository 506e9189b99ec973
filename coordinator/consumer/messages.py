"""Requests and responses of the consumer-group APIs (KIP-848) on the group coordinator, independent
of the wire version: the gateway turns ConsumerGroupHeartbeat and ConsumerGroupDescribe into these
and back (cluster/gateway/handlers/consumer_groups.py)."""

from __future__ import annotations

from uuid import UUID

from kio.schema.errors import ErrorCode

from kernel.message import message

# ConsumerGroupHeartbeatRequest's epochs: 0 joins, -1 leaves, -2 is a static member leaving for now
# (it keeps its assignment for the session timeout, to come back with the same instance id).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Assignment = tuple[tuple[UUID, tuple[int, ...]], ...]  # (topic id, partitions), sorted


@message
class ConsumerGroupHeartbeatRequest:
    """ConsumerGroupHeartbeat v0-v1. None is Kafka's null: the field did not change since the last
    heartbeat (`rebalance_timeout_ms` -1 likewise). `topic_partitions` are the partitions the member
    owns, None when it did not say."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1  # v0 lets the coordinator choose the member id; v1 requires the client's


@message
class ConsumerGroupHeartbeatResponse:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the last answer


@message
class DescribedConsumerMember:
    """ConsumerGroupDescribe's Member: its assignment and its target, each as (topic id, topic name,
    partitions)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[tuple[UUID, str, tuple[int, ...]], ...]
    target_assignment: tuple[tuple[UUID, str, tuple[int, ...]], ...]
    member_type: int = 1  # v1: 0 classic, 1 consumer, -1 unknown


@message
class DescribedConsumerGroup:
    """ConsumerGroupDescribe v0-v1's DescribedGroup."""

    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
    authorized_operations: int = -2147483648  # not requested / not computed here
