"""DeleteGroups' first step for share groups (Kafka 4.x GroupCoordinatorShard.sharePartitionDeleteRequests,
GroupMetadataManager.shareGroupBuildPartitionDeleteRequest).

Kafka deletes a share group in three steps: this operation checks the group is Empty and, in the same
operation, moves its share partitions to `deleting` (a ShareGroupStatePartitionMetadata record); the
cluster deletes their share state through the persister; then DeleteGroups deletes the group only if
it is still Empty (coordinator/admin.py). Because nothing is initialized any more after this step, a
member that joins in between is not handed partitions whose state is about to go: its heartbeat
initializes them again (share_state.maybe_initialize takes them out of `deleting`), and the final
delete answers GROUP_NOT_EMPTY. A failed state delete keeps the group, Empty and still `deleting`;
the next DeleteGroups deletes those topics whole again."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from kio.schema.errors import ErrorCode

from coordinator.context import OperationContext
from coordinator.share.group import ShareGroup
from coordinator.share.messages import ShareStateDeletion
from coordinator.share.metadata import TopicsImage
from coordinator.share.partition_metadata import ShareStatePartitionMetadata, deletes_for, partitions_to_delete
from coordinator.share.records import share_state_partition_metadata_record


def prepare_share_group_deletes(ctx: OperationContext, group_ids: Iterable[str]) -> list[ShareStateDeletion]:
    return [prepare_share_group_delete(ctx, group_id) for group_id in group_ids]


def prepare_share_group_delete(ctx: OperationContext, group_id: str) -> ShareStateDeletion:
    """Which share state of group_id to delete before deleting the group, or why it must stay.
    Anything but a share group answers nothing to delete: the group delete answers for it."""
    group = ctx.group(group_id)
    if not isinstance(group, ShareGroup):
        return ShareStateDeletion(group_id, ErrorCode.none)
    error = group.validate_delete()
    if error is not None:
        return ShareStateDeletion(group_id, error)
    if group.share_state is None:
        return ShareStateDeletion(group_id, ErrorCode.none)
    image = ctx.state.topics_image
    candidates = partitions_to_delete(group.share_state, image)
    names = {tid: _topic_name(group.share_state, image, tid) for tid in candidates}
    # Kafka writes the record even with nothing to delete: initializing and initialized end empty.
    ctx.write(share_state_partition_metadata_record(group_id, {}, {}, names))
    return ShareStateDeletion(group_id, ErrorCode.none, deletes_for(group_id, candidates))


def _topic_name(info: ShareStatePartitionMetadata, image: TopicsImage, topic_id: UUID) -> str:
    for known in (info.initialized, info.initializing):
        if topic_id in known:
            return known[topic_id].name
    if topic_id in info.deleting:
        return info.deleting[topic_id]
    return image.by_id[topic_id].name
