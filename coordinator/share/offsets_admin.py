"""AlterShareGroupOffsets and DeleteShareGroupOffsets on the group coordinator (Kafka 4.x
GroupCoordinatorShard.alterShareGroupOffsets, initiateDeleteShareGroupOffsets,
completeDeleteShareGroupOffsets; GroupMetadataManager.completeAlterShareGroupOffsets,
sharePartitionsEligibleForOffsetDeletion, completeDeleteShareGroupOffsets).

Both need an Empty share group (NON_EMPTY_GROUP otherwise; no share group of that id is
GROUP_ID_NOT_FOUND), so no member holds records of the partitions whose state changes.

Alter: the partitions of known topics are recorded as initializing (a ShareGroupStatePartitionMetadata
record), and answered for the cluster to initialize their share state with the new start offset and
the group epoch as state epoch, which is at least the epoch of any earlier initialization (every
member that left bumped it); the cluster reports the answers back (share_state_initialized), which
makes them initialized. A partition beyond the topic's count, or of an unknown topic, answers
UNKNOWN_TOPIC_OR_PARTITION.

Delete, in two steps around the persister, like DeleteGroups (deletion.py): `initiate` moves the
initialized topics named to `deleting` and answers their share state to delete (a topic left
deleting by an earlier attempt is deleted again, whole); `complete` drops the topics whose state
went from `deleting`. A topic with no share state answers UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from kio.schema.errors import ErrorCode

from coordinator.context import OperationContext
from coordinator.share.group import ShareGroup
from coordinator.share.messages import ShareStateDelete, ShareStateInit, ShareStateInitResult
from coordinator.share.partition_metadata import EMPTY_SHARE_STATE, InitMapValue, combine_init_maps
from coordinator.share.records import share_state_partition_metadata_record

NO_OFFSET_INFORMATION = "There is no offset information to delete."
UNKNOWN_TOPIC_OR_PARTITION = "This server does not host this topic-partition."


@dataclass(frozen=True, slots=True)
class AlterShareOffsetsRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[tuple[int, int], ...]], ...]  # (topic, ((partition, start offset), ...))


@dataclass(frozen=True, slots=True)
class AlteredPartition:
    partition: int
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class AlteredTopic:
    name: str
    topic_id: UUID | None
    partitions: tuple[AlteredPartition, ...]


@dataclass(frozen=True, slots=True)
class AlterShareOffsetsOutcome:
    """The response before the share state is initialized, and what to initialize."""

    error_code: ErrorCode
    error_message: str | None = None
    topics: tuple[AlteredTopic, ...] = ()
    initialize: tuple[ShareStateInit, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteShareOffsetsRequest:
    group_id: str
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeletedShareTopic:
    name: str | None
    topic_id: UUID | None
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteShareOffsetsOutcome:
    """initiate's answer: the topics that fail already, and the share state to delete per topic."""

    error_code: ErrorCode
    error_message: str | None = None
    failed: tuple[DeletedShareTopic, ...] = ()
    deletes: tuple[tuple[UUID, str, tuple[ShareStateDelete, ...]], ...] = ()  # (topic id, name, deletes)


@dataclass(frozen=True, slots=True)
class CompleteShareOffsetsDelete:
    group_id: str
    topics: tuple[tuple[UUID, str], ...]  # the topics whose share state is gone: (topic id, name)


def _empty_share_group(ctx: OperationContext, group_id: str) -> tuple[ShareGroup | None, ErrorCode | None, str | None]:
    group = ctx.group(group_id)
    if not isinstance(group, ShareGroup):
        return None, ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    if not group.is_empty():
        return None, ErrorCode.non_empty_group, f"Group {group_id} is not empty."
    return group, None, None


def alter_share_group_offsets(ctx: OperationContext, req: AlterShareOffsetsRequest) -> AlterShareOffsetsOutcome:
    group, error, message = _empty_share_group(ctx, req.group_id)
    if group is None:
        return AlterShareOffsetsOutcome(error or ErrorCode.unknown_server_error, message)
    image = ctx.state.topics_image
    answered: list[AlteredTopic] = []
    initializing: dict[UUID, InitMapValue] = {}
    inits: list[ShareStateInit] = []
    for name, partitions in req.topics:
        topic = image.by_name.get(name)
        if topic is None:
            unknown = tuple(
                AlteredPartition(p, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION) for p, _ in partitions
            )
            answered.append(AlteredTopic(name, None, unknown))
            continue
        out = []
        for p, start_offset in partitions:
            if 0 <= p < topic.partitions:
                out.append(AlteredPartition(p, ErrorCode.none))
                inits.append(ShareStateInit(req.group_id, topic.topic_id, p, group.group_epoch, start_offset))
            else:
                out.append(AlteredPartition(p, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION))
        known = frozenset(p for p, _ in partitions if 0 <= p < topic.partitions)
        if known:
            initializing[topic.topic_id] = InitMapValue(name, known, ctx.now)
        answered.append(AlteredTopic(name, topic.topic_id, tuple(out)))
    if initializing:
        _add_initializing(ctx, group, initializing)
    return AlterShareOffsetsOutcome(ErrorCode.none, None, tuple(answered), tuple(inits))


def _add_initializing(ctx: OperationContext, group: ShareGroup, topics: dict[UUID, InitMapValue]) -> None:
    """Kafka's addInitializingTopicsRecords: a topic initializing again is no longer being deleted."""
    info = group.share_state or EMPTY_SHARE_STATE
    deleting = {tid: name for tid, name in info.deleting.items() if tid not in topics}
    ctx.write(
        share_state_partition_metadata_record(
            group.group_id, combine_init_maps(info.initializing, topics), info.initialized, deleting
        )
    )


def initiate_delete_share_group_offsets(ctx: OperationContext, req: DeleteShareOffsetsRequest) -> DeleteShareOffsetsOutcome:
    group, error, message = _empty_share_group(ctx, req.group_id)
    if group is None:
        return DeleteShareOffsetsOutcome(error or ErrorCode.unknown_server_error, message)
    info = group.share_state
    if info is None:
        return DeleteShareOffsetsOutcome(ErrorCode.none)
    image = ctx.state.topics_image
    initialized = dict(info.initialized)
    deleting = dict(info.deleting)
    failed: list[DeletedShareTopic] = []
    deletes: list[tuple[UUID, str, tuple[ShareStateDelete, ...]]] = []
    for name in dict.fromkeys(req.topics):
        topic = image.by_name.get(name)
        if topic is None:
            failed.append(DeletedShareTopic(name, None, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION))
        elif topic.topic_id in initialized:
            partitions = initialized.pop(topic.topic_id).partitions
            deleting[topic.topic_id] = name
            deletes.append((topic.topic_id, name, _deletes(req.group_id, topic.topic_id, partitions)))
        elif topic.topic_id in deleting:
            # An earlier attempt left it deleting: delete every partition, whichever had state.
            deletes.append((topic.topic_id, name, _deletes(req.group_id, topic.topic_id, range(topic.partitions))))
        else:
            failed.append(DeletedShareTopic(name, None, ErrorCode.unknown_topic_or_partition, NO_OFFSET_INFORMATION))
    # Kafka writes the record even when nothing moved.
    ctx.write(share_state_partition_metadata_record(req.group_id, info.initializing, initialized, deleting))
    return DeleteShareOffsetsOutcome(ErrorCode.none, None, tuple(failed), tuple(deletes))


def _deletes(group_id: str, topic_id: UUID, partitions: object) -> tuple[ShareStateDelete, ...]:
    return tuple(ShareStateDelete(group_id, topic_id, p) for p in sorted(partitions))  # type: ignore[call-overload]


def complete_delete_share_group_offsets(ctx: OperationContext, req: CompleteShareOffsetsDelete) -> tuple[DeletedShareTopic, ...]:
    """The topics whose share state is gone leave `deleting`; each answers NONE. The group may
    have gone meanwhile (DeleteGroups): then nothing is written, and the topics still answer NONE."""
    group = ctx.group(req.group_id)
    if isinstance(group, ShareGroup) and group.share_state is not None:
        info = group.share_state
        gone = {tid for tid, _ in req.topics}
        deleting = {tid: name for tid, name in info.deleting.items() if tid not in gone}
        ctx.write(share_state_partition_metadata_record(req.group_id, info.initializing, info.initialized, deleting))
    return tuple(DeletedShareTopic(name, tid, ErrorCode.none) for tid, name in req.topics)


@dataclass(frozen=True, slots=True)
class ShareOffsetsInitialized:
    """What the share coordinators answered to an Alter's initializations (as a heartbeat's)."""

    group_id: str
    results: tuple[ShareStateInitResult, ...]
