"""ConsumerGroupDescribe (Kafka 4.2's GroupMetadataManager.consumerGroupDescribe and
ConsumerGroup.asDescribedGroup / ConsumerGroupMember.asConsumerGroupDescribeMember). ListGroups,
DeleteGroups and OffsetDelete reach consumer groups through the Group protocol (coordinator/admin.py);
DescribeGroups describes classic groups only, as Kafka's does (coordinator/classic/admin.py)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.messages import DescribedConsumerGroup, DescribedConsumerMember
from coordinator.context import OperationContext
from coordinator.share.metadata import TopicsImage
from coordinator.topic_partitions import TopicPartitions


def _named(partitions: TopicPartitions, image: TopicsImage) -> tuple:
    """(topic id, name, partitions) for the topics the image still has (Kafka needs the name)."""
    return tuple(
        (topic_id, image.by_id[topic_id].name, tuple(sorted(ps)))
        for topic_id, ps in sorted(partitions.items())
        if topic_id in image.by_id
    )


def describe_consumer_group(ctx: OperationContext, group_id: str) -> DescribedConsumerGroup:
    if group_id == "":
        return DescribedConsumerGroup(group_id, ErrorCode.invalid_group_id, ErrorCode.invalid_group_id.name)
    group = ctx.group(group_id)
    if group is None:
        return DescribedConsumerGroup(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ConsumerGroup):
        return DescribedConsumerGroup(
            group_id, ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
        )
    image: TopicsImage = ctx.state.topics_image
    members = tuple(
        DescribedConsumerMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            subscribed_topic_regex=m.subscribed_topic_regex or None,
            assignment=_named(m.assigned_partitions, image),
            target_assignment=_named(group.target_assignment.get(m.member_id, {}), image),
        )
        for _mid, m in sorted(group.members.items())
    )
    return DescribedConsumerGroup(
        group_id=group_id,
        error_code=ErrorCode.none,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.target_assignment_epoch,
        assignor_name=group.preferred_server_assignor() or ctx.config.consumer_assignors[0],
        members=members,
    )
