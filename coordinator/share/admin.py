"""ShareGroupDescribe, and what DeleteGroups does to a share group (Kafka 4.x GroupMetadataManager
.shareGroupDescribe, ShareGroup.asDescribedGroup / validateDeleteGroup / createGroupTombstoneRecords,
GroupCoordinatorService.deleteShareGroups)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import DeletedGroup
from coordinator.records import (
    offset_tombstone,
    share_current_assignment_tombstone,
    share_group_epoch_tombstone,
    share_member_subscription_tombstone,
    share_state_partition_metadata_tombstone,
    share_target_assignment_epoch_tombstone,
    share_target_assignment_tombstone,
)
from coordinator.share.group import ShareGroup, ShareGroupState
from coordinator.share.messages import SIMPLE_ASSIGNOR_NAME, DescribedShareGroup, DescribedShareMember, ShareGroupTopics
from coordinator.share.metadata import TopicsImage
from coordinator.share.share_state import deletes_for, partitions_to_delete
from coordinator.txn import Txn


def describe_share_group(txn: Txn, group_id: str) -> DescribedShareGroup:
    if group_id == "":
        return DescribedShareGroup(group_id, ErrorCode.invalid_group_id, ErrorCode.invalid_group_id.name)
    group = txn.group(group_id)
    if group is None:
        return DescribedShareGroup(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ShareGroup):
        return DescribedShareGroup(group_id, ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
    image: TopicsImage = txn.shard.topics_image
    members = tuple(
        DescribedShareMember(
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            # Kafka lists only the assigned topics it finds in the metadata image (it needs the name).
            assignment=tuple(
                (topic_id, image.by_id[topic_id].name, tuple(sorted(ps)))
                for topic_id, ps in sorted(m.assigned_partitions.items())
                if topic_id in image.by_id
            ),
        )
        for m in group.members.values()
    )
    return DescribedShareGroup(
        group_id=group_id,
        error_code=ErrorCode.none,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR_NAME,
        members=members,
    )


def share_group_topics(txn: Txn, group_id: str) -> ShareGroupTopics:
    """The share group's initialized share partitions, or why there are none to list."""
    group = txn.group(group_id)
    if group is None or not isinstance(group, ShareGroup):
        what = "not found" if group is None else "not a share group"
        return ShareGroupTopics(group_id, ErrorCode.group_id_not_found, f"Group {group_id} {what}.")
    initialized = group.share_state.initialized if group.share_state is not None else {}
    topics = tuple((tid, v.name, tuple(sorted(v.partitions))) for tid, v in sorted(initialized.items(), key=lambda kv: kv[1].name))
    return ShareGroupTopics(group_id, ErrorCode.none, topics=topics)


def delete_share_group(txn: Txn, group: ShareGroup) -> DeletedGroup:
    """DeleteGroups of a share group: only an Empty one (NON_EMPTY_GROUP otherwise). Its records are
    tombstoned in Kafka's order (ShareGroup.createGroupTombstoneRecords), and its share partitions'
    state is returned for the cluster to delete on the share coordinators.

    Kafka first moves the partitions to `deleting`, deletes the share state, and deletes the group
    only if that worked; here the group goes at once and the cluster deletes the state afterwards
    (deleting absent state is harmless, and a failed delete leaves only orphaned state behind)."""
    gid = group.group_id
    if group.state is not ShareGroupState.EMPTY:
        return DeletedGroup(gid, ErrorCode.non_empty_group)
    deletes = ()
    if group.share_state is not None:
        deletes = deletes_for(gid, partitions_to_delete(group.share_state, txn.shard.topics_image))
    for topic, partition in sorted(txn.shard.offsets.get(gid, {})):
        txn.write(offset_tombstone(gid, topic, partition))
    for member_id in group.members:
        txn.write(share_current_assignment_tombstone(gid, member_id))
    for member_id in group.target_assignment:
        txn.write(share_target_assignment_tombstone(gid, member_id))
    txn.write(share_target_assignment_epoch_tombstone(gid))
    for member_id in group.members:
        txn.write(share_member_subscription_tombstone(gid, member_id))
    txn.write(share_state_partition_metadata_tombstone(gid))
    txn.write(share_group_epoch_tombstone(gid))
    return DeletedGroup(gid, ErrorCode.none, share_state_deletes=deletes)
