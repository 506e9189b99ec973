"""OffsetCommit, OffsetFetch and offset retention (Kafka 4.x OffsetMetadataManager, classic groups).

Commits are checked against the group: a member of the current generation may commit; a client
outside group management (generation -1, no member id: "simple consumers", admin tools) may commit
only into an Empty group, which it creates if needed. A commit during CompletingRebalance gets
REBALANCE_IN_PROGRESS. Offsets of an Empty group expire `offsets.retention.minutes` after the group
became Empty (after their own commit for simple groups); an Empty group whose offsets are all gone
is deleted.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.join import validate_member
from coordinator.classic.messages import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from coordinator.classic.state import ClassicGroupState as S
from coordinator.records import OffsetCommitValue, group_tombstone, offset_commit_record, offset_tombstone
from coordinator.txn import Txn


def validate_offset_commit(group: ClassicGroup, req: OffsetCommitRequest) -> ErrorCode | None:
    if group.is_in(S.DEAD):
        return ErrorCode.coordinator_not_available
    if req.generation_id < 0 and group.is_in(S.EMPTY):
        return None  # a commit from outside group management into an Empty group
    if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
        error = validate_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
    elif not group.is_in(S.EMPTY):
        return ErrorCode.unknown_member_id
    if group.is_in(S.COMPLETING_REBALANCE):
        # The member has the new generation but no assignment yet: let it finish the rebalance.
        return ErrorCode.rebalance_in_progress
    return None


def commit_offsets(txn: Txn, req: OffsetCommitRequest) -> OffsetCommitResponse:
    group = txn.group(req.group_id)
    error: ErrorCode | None
    if group is None:
        if req.generation_id < 0:
            txn.create(req.group_id)  # a "simple" group: offsets only, no protocol
            error = None
        else:
            error = ErrorCode.group_id_not_found if req.api_version >= 9 else ErrorCode.illegal_generation
    elif not isinstance(group, ClassicGroup):
        error = ErrorCode.group_id_not_found
    else:
        error = validate_offset_commit(group, req)
    topics = []
    for topic, partitions in req.topics:
        answers = []
        for p in partitions:
            if error is not None:
                answers.append((p.partition, error))
                continue
            metadata = p.metadata or ""
            if len(metadata.encode()) > txn.config.offset_metadata_max_bytes:
                answers.append((p.partition, ErrorCode.offset_metadata_too_large))
                continue
            expire = txn.now + req.retention_time_ms if req.retention_time_ms >= 0 else -1
            txn.write(
                offset_commit_record(req.group_id, topic, p.partition, p.offset, p.leader_epoch, metadata, txn.now, expire)
            )
            answers.append((p.partition, ErrorCode.none))
        topics.append((topic, tuple(answers)))
    return OffsetCommitResponse(tuple(topics))


def fetch_offsets(txn: Txn, req: OffsetFetchRequest) -> OffsetFetchResponse:
    """Committed offsets; -1 where none (an unknown group is not an error). No transactions here, so
    `require_stable` never finds pending transactional offsets to wait for."""
    group = txn.group(req.group_id)
    if group is not None and not isinstance(group, ClassicGroup):
        # Kafka's ShareGroup.validateOffsetFetch: a share group has no committed offsets to fetch.
        failed = tuple(
            (topic, tuple(FetchedOffset(p, -1, -1, "", ErrorCode.group_id_not_found) for p in partitions))
            for topic, partitions in (req.topics or ())
        )
        return OffsetFetchResponse(req.group_id, ErrorCode.group_id_not_found, failed)
    committed = txn.shard.offsets.get(req.group_id, {})
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


def expire_offsets(txn: Txn) -> None:
    """Kafka's cleanupGroupMetadata: drop expired offsets; delete Empty groups left with none."""
    retention = txn.config.offsets_retention_ms
    for group_id in sorted(set(txn.shard.offsets) | set(txn.shard.groups)):
        group = txn.group(group_id)
        if group is not None and not isinstance(group, ClassicGroup):
            continue
        offsets = txn.shard.offsets.get(group_id, {})
        expired = [key for key, value in offsets.items() if _expired(txn.now, group, value, retention)]
        for topic, partition in sorted(expired):
            txn.write(offset_tombstone(group_id, topic, partition))
        if len(expired) == len(offsets) and group is not None and group.is_in(S.EMPTY) and group.is_empty():
            txn.write(group_tombstone(group_id))
            txn.drop(group_id)


def _expired(now: int, group: ClassicGroup | None, value: OffsetCommitValue, retention: int) -> bool:
    if value.expire_timestamp >= 0:  # an old client asked for its own retention
        return now >= value.expire_timestamp
    if group is not None and group.protocol_type:
        if not group.is_in(S.EMPTY):
            return False  # a live group keeps its offsets
        base = group.state_timestamp  # retention counts from when the group became Empty
    else:
        base = value.commit_timestamp  # a simple group: from the commit itself
    return now - base >= retention
