"""Requests and responses of the share-state APIs, one share partition each.

Kafka's InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState and ReadShareGroupStateSummary carry many (topic, partition)s per group;
Kafka's ShareCoordinatorService splits them into one shard operation per share partition, and so
does our cluster layer: the shard sees one (group_id, topic_id, partition) per request.

Every response carries `error_code` (kio's ErrorCode) and, for an error, Kafka's message.
"""

from __future__ import annotations

from uuid import UUID

from kio.schema.errors import ErrorCode

from kernel.message import message
from sharestate.records import StateBatch

# Kafka's PartitionFactory defaults: what a share partition that was never written looks like.
UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0

# Kafka's messages (ShareCoordinatorShard's exceptions and Errors' defaults).
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED_SHARE_PARTITION = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED_SHARE_PARTITION = "Read operation on uninitialized share partition not allowed."
FENCED_LEADER_EPOCH = "The leader epoch in the request is older than the epoch on the broker."
FENCED_STATE_EPOCH = "The coordinator rejected the request because the state epoch did not match."
INVALID_STATE_BATCH = "A state batch's first offset must be >= 0 and <= its last offset."


@message
class InitializeShareGroupStateRequest:
    group_id: str
    topic_id: UUID
    partition: int
    state_epoch: int
    start_offset: int = UNINITIALIZED_START_OFFSET


@message
class InitializeShareGroupStateResponse:
    error_code: ErrorCode
    error_message: str | None = None


@message
class ReadShareGroupStateRequest:
    group_id: str
    topic_id: UUID
    partition: int
    leader_epoch: int  # -1: no fencing and no leader-epoch update


@message
class ReadShareGroupStateResponse:
    error_code: ErrorCode
    error_message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    state_batches: tuple[StateBatch, ...] = ()


@message
class WriteShareGroupStateRequest:
    group_id: str
    topic_id: UUID
    partition: int
    state_epoch: int  # -1: not checked
    leader_epoch: int  # -1: not checked
    start_offset: int  # -1: unchanged
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...] = ()


@message
class WriteShareGroupStateResponse:
    error_code: ErrorCode
    error_message: str | None = None


@message
class DeleteShareGroupStateRequest:
    group_id: str
    topic_id: UUID
    partition: int


@message
class DeleteShareGroupStateResponse:
    error_code: ErrorCode
    error_message: str | None = None


@message
class ReadShareGroupStateSummaryRequest:
    group_id: str
    topic_id: UUID
    partition: int
    leader_epoch: int = -1  # carried as Kafka does; a summary neither fences nor records it


@message
class ReadShareGroupStateSummaryResponse:
    error_code: ErrorCode
    error_message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = DEFAULT_LEADER_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
