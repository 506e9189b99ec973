"""OffsetCommit, OffsetFetch and offset retention (Kafka 4.x OffsetMetadataManager, classic groups).

Commits are checked against the group: a member of the current generation may commit; a client
outside group management (generation -1, no member id: "simple consumers", admin tools) may commit
only into an Empty group, which it creates if needed. A commit during CompletingRebalance gets
REBALANCE_IN_PROGRESS.

Offset expiry (Kafka's GroupCoordinatorShard.cleanupGroupMetadata, OffsetMetadataManager
.cleanupExpiredOffsets, ClassicGroup.offsetExpirationCondition): offsets expire
`offsets.retention.minutes` after the group became Empty; after their own commit for a simple group
(no protocol type) and, for a Stable consumer group whose subscriptions are known, for the topics
it no longer subscribes to (KIP-496), so a later re-subscription starts from the reset policy, not
from a stale offset. An offset whose commit asked for its own retention (OffsetCommit v2-v4)
expires then instead. A group still rebalancing, or whose protocol is not "consumer" or whose
subscriptions do not parse, keeps its offsets. An Empty group left with no offsets is deleted.
Kafka also spares offsets with a pending transactional commit; raygroups has no transactions.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from coordinator.classic.rebalance import reschedule_heartbeat
from coordinator.classic.state import ClassicGroupState as S
from coordinator.group import Group, OffsetExpirationCondition
from coordinator.classic.records import OffsetCommitValue, offset_commit_record, offset_tombstone
from coordinator.context import OperationContext


def commit_offsets(ctx: OperationContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    group = ctx.group(req.group_id)
    error: ErrorCode | None
    if group is None:
        if req.generation_id < 0:
            ctx.create(ClassicGroup(req.group_id, state_timestamp=ctx.now))  # a "simple" group: offsets only
            error = None
        else:
            error = ErrorCode.group_id_not_found if req.api_version >= 9 else ErrorCode.illegal_generation
    else:
        error = group.validate_offset_commit(req)
    if error is None and req.generation_id >= 0:
        live = ctx.group(req.group_id)
        if isinstance(live, ClassicGroup) and live.is_in(S.STABLE, S.PREPARING_REBALANCE):
            # Kafka's classic commit path: a member that commits is alive, as if it had heartbeated.
            reschedule_heartbeat(ctx, live, req.member_id)
    topics = []
    for topic, partitions in req.topics:
        answers = []
        for p in partitions:
            if error is not None:
                answers.append((p.partition, error))
                continue
            metadata = p.metadata or ""
            if len(metadata) > ctx.config.offset_metadata_max_bytes:  # Kafka: String.length(), not bytes
                answers.append((p.partition, ErrorCode.offset_metadata_too_large))
                continue
            expire = ctx.now + req.retention_time_ms if req.retention_time_ms >= 0 else -1
            ctx.write(
                offset_commit_record(req.group_id, topic, p.partition, p.offset, p.leader_epoch, metadata, ctx.now, expire)
            )
            answers.append((p.partition, ErrorCode.none))
        topics.append((topic, tuple(answers)))
    return OffsetCommitResponse(tuple(topics))


def fetch_offsets(ctx: OperationContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    """Committed offsets; -1 where none (an unknown group is not an error). No transactions here, so
    `require_stable` never finds pending transactional offsets to wait for.

    Kafka's fetchOffsets / fetchAllOffsets: a group whose validateOffsetFetch says GROUP_ID_NOT_FOUND
    (a share group: "not a consumer group") is answered as one without offsets, with no error: -1 for
    each partition asked for, no topics when all were asked for."""
    group = ctx.group(req.group_id)
    error = group.validate_offset_fetch(req.member_id, req.member_epoch) if group is not None else None
    if error is not None and error != ErrorCode.group_id_not_found:
        failed = tuple(
            (topic, tuple(FetchedOffset(p, -1, -1, "", error) for p in partitions)) for topic, partitions in (req.topics or ())
        )
        return OffsetFetchResponse(req.group_id, error, failed)
    committed = {} if error is not None else ctx.state.offsets.get(req.group_id, {})
    topics: list[tuple[str, tuple[FetchedOffset, ...]]] = []
    if req.topics is None:
        by_topic: dict[str, list[FetchedOffset]] = {}
        for (topic, partition), value in sorted(committed.items()):
            by_topic.setdefault(topic, []).append(_fetched(partition, value))
        topics = [(topic, tuple(parts)) for topic, parts in by_topic.items()]
    else:
        for topic, partitions in req.topics:
            topics.append((topic, tuple(_fetched(p, committed.get((topic, p))) for p in partitions)))
    return OffsetFetchResponse(req.group_id, ErrorCode.none, tuple(topics))


def _fetched(partition: int, value: OffsetCommitValue | None) -> FetchedOffset:
    if value is None:
        return FetchedOffset(partition, -1, -1, "")
    return FetchedOffset(partition, value.offset, value.leader_epoch, value.metadata)


def expire_offsets(ctx: OperationContext) -> None:
    """Kafka's cleanupGroupMetadata: drop expired offsets; delete groups left with none that may go."""
    for group_id in sorted(set(ctx.state.offsets) | set(ctx.state.groups)):
        group = ctx.group(group_id)
        if cleanup_expired_offsets(ctx, group_id, group) and group is not None and group.is_deletable_without_offsets():
            for record in group.delete_records(()):
                ctx.write(record)
            ctx.drop(group_id)


def cleanup_expired_offsets(ctx: OperationContext, group_id: str, group: Group | None) -> bool:
    """Kafka's cleanupExpiredOffsets: a tombstone per expired offset; True if the group has none left."""
    committed = ctx.state.offsets.get(group_id)
    if not committed:
        return True
    # Offsets without a group (not made by replay, which creates a simple group) expire as a simple group's.
    condition = group.offset_expiration_condition() if group is not None else OffsetExpirationCondition()
    if condition is None:
        return False
    retention = ctx.config.offsets_retention_ms
    all_expired = True
    subscribed: dict[str, bool] = {}
    for (topic, partition), value in sorted(committed.items()):
        if topic not in subscribed:
            subscribed[topic] = group is not None and group.is_subscribed_to_topic(topic)
        if not subscribed[topic] and condition.is_offset_expired(value, ctx.now, retention):
            ctx.write(offset_tombstone(group_id, topic, partition))
        else:
            all_expired = False
    return all_expired
