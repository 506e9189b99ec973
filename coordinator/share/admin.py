"""ShareGroupDescribe and the initialized share partitions of a share group (Kafka 4.x
GroupMetadataManager.shareGroupDescribe, ShareGroup.asDescribedGroup); DeleteGroups of a share group
is coordinator/admin.py over ShareGroup's part of the Group protocol."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.share.group import ShareGroup
from coordinator.share.messages import SIMPLE_ASSIGNOR_NAME, DescribedShareGroup, DescribedShareMember, ShareGroupTopics
from coordinator.share.metadata import TopicsImage
from coordinator.context import OperationContext


def describe_share_group(ctx: OperationContext, group_id: str) -> DescribedShareGroup:
    if group_id == "":
        return DescribedShareGroup(group_id, ErrorCode.invalid_group_id, ErrorCode.invalid_group_id.name)
    group = ctx.group(group_id)
    if group is None:
        return DescribedShareGroup(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ShareGroup):
        return DescribedShareGroup(group_id, ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
    image: TopicsImage = ctx.state.topics_image
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


def share_group_topics(ctx: OperationContext, group_id: str) -> ShareGroupTopics:
    """The share group's initialized share partitions, or why there are none to list."""
    group = ctx.group(group_id)
    if group is None or not isinstance(group, ShareGroup):
        what = "not found" if group is None else "not a share group"
        return ShareGroupTopics(group_id, ErrorCode.group_id_not_found, f"Group {group_id} {what}.")
    initialized = group.share_state.initialized if group.share_state is not None else {}
    topics = tuple((tid, v.name, tuple(sorted(v.partitions))) for tid, v in sorted(initialized.items(), key=lambda kv: kv[1].name))
    return ShareGroupTopics(group_id, ErrorCode.none, topics=topics)
