"""Online migration between a classic group and a consumer group (KIP-848; Kafka 4.2's
GroupMetadataManager.validateOnlineUpgrade / convertToConsumerGroup, ConsumerGroup.fromClassicGroup
and createConsumerGroupRecords; validateOnlineDowngradeWithFencedMembers / convertToClassicGroup,
ClassicGroup.fromConsumerGroup and createClassicGroupRecords).

`group.consumer.migration.policy` says which way a group may go (bidirectional by default):
- upgrade: a consumer-protocol member joins a classic group of the "consumer" protocol type. The
  classic group's tombstone and the records of a consumer group holding the classic members, at
  the classic generation as their epoch and with their last assignment as both target and current
  assignment, are written by the joining heartbeat, which then runs against that group. Classic
  members keep working inside it (classic_members.py); parked JoinGroup and SyncGroup requests are
  answered REBALANCE_IN_PROGRESS, so the members rejoin the consumer group.
- downgrade: the last consumer-protocol member leaves (or is fenced) while classic members remain.
  The consumer group's tombstones and a classic group's GroupMetadata record (generation = the
  group epoch, each member's target serialized as its assignment) are written, and the classic
  group starts a rebalance, which its members join by the classic protocol.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicMember
from coordinator.classic.messages import JoinGroupResponse, SyncGroupResponse
from coordinator.classic.records import group_metadata_record, group_tombstone
from coordinator.classic.rebalance import prepare_rebalance, reschedule_heartbeat
from coordinator.classic.state import ClassicGroupState
from coordinator.consumer import records as r
from coordinator.consumer.group import ConsumerGroup, PartitionEpochError, session_key
from coordinator.consumer.member import ClassicMemberMetadata, ClassicProtocol, ConsumerGroupMember
from coordinator.consumer.protocol import MalformedProtocol, decode_assignment, decode_subscription, encode_assignment, subscription_version
from coordinator.context import OperationContext
from coordinator.member_state import MemberState
from coordinator.share.metadata import TopicsImage, metadata_hash
from coordinator.topic_partitions import TopicPartitions
from kernel.codec import Record


class MigrationRefused(Exception):
    """The group cannot be converted: the heartbeat answers GROUP_ID_NOT_FOUND with this message."""


def upgrade_enabled(policy: str) -> bool:
    return policy in ("upgrade", "bidirectional")


def downgrade_enabled(policy: str) -> bool:
    return policy in ("downgrade", "bidirectional")


def can_upgrade(ctx: OperationContext, classic: ClassicGroup) -> bool:
    """Kafka's validateOnlineUpgrade."""
    return (
        upgrade_enabled(ctx.config.consumer_migration_policy)
        and not classic.is_in(ClassicGroupState.DEAD)
        and classic.uses_consumer_protocol()
        and classic.num_members <= ctx.config.consumer_max_size
    )


def to_ids(partitions: dict[str, tuple[int, ...]] | tuple, image: TopicsImage) -> dict:
    """Topic names -> ids through the image (Kafka's toTopicPartitionMap): unknown topics dropped."""
    items = partitions.items() if isinstance(partitions, dict) else partitions
    out: dict = {}
    for name, ps in items:
        topic = image.by_name.get(name)
        if topic is not None and ps:
            out[topic.topic_id] = frozenset(out.get(topic.topic_id, frozenset()) | frozenset(ps))
    return out


def to_names(partitions: TopicPartitions, image: TopicsImage) -> dict[str, tuple[int, ...]]:
    """Topic ids -> names (Kafka's toConsumerProtocolAssignment): topics the image lacks dropped."""
    return {image.by_id[t].name: tuple(sorted(ps)) for t, ps in partitions.items() if t in image.by_id}


def upgrade(ctx: OperationContext, classic: ClassicGroup) -> tuple[ConsumerGroup, list[Record]]:
    """Kafka's convertToConsumerGroup: the consumer group the classic one becomes, and the records
    that make it so (the classic tombstone first). Parked classic requests are answered here;
    the members' sessions restart under the consumer group's timers."""
    gid, image = classic.group_id, ctx.state.topics_image
    group = ConsumerGroup(gid)
    generation = classic.generation_id
    members: list[ConsumerGroupMember] = []
    try:
        for m in classic.members.values():
            subscription = decode_subscription(m.metadata(classic.protocol_name))
            assigned = to_ids(decode_assignment(m.assignment), image)
            members.append(
                ConsumerGroupMember(
                    m.member_id,
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    instance_id=m.group_instance_id,
                    rack_id=subscription.rack_id,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=frozenset(subscription.topics),
                    assigned_partitions=assigned,
                    classic_member_metadata=ClassicMemberMetadata(
                        m.session_timeout_ms, tuple(ClassicProtocol(name, meta) for name, meta in m.protocols)
                    ),
                )
            )
    except MalformedProtocol:
        raise MigrationRefused(
            f"Cannot upgrade classic group {gid} to consumer group because the embedded consumer protocol is malformed."
        ) from None
    try:
        group.set_group_epoch(generation)
        group.set_target_assignment_epoch(generation)
        for member in members:
            group.update_target_assignment(member.member_id, member.assigned_partitions)
            group.update_member(member)
    except PartitionEpochError as e:
        raise MigrationRefused(f"Cannot upgrade classic group {gid} to consumer group: {e}") from None
    group.set_metadata_hash(metadata_hash(group.subscribed_topic_names, image))

    for m in classic.members.values():
        if m.awaiting_join is not None:
            ctx.reply(m.awaiting_join, JoinGroupResponse(ErrorCode.rebalance_in_progress, m.member_id))
        if m.awaiting_sync is not None:
            ctx.reply(m.awaiting_sync, SyncGroupResponse(ErrorCode.rebalance_in_progress))
    # Kafka's createConsumerGroupRecords, in its order.
    records: list[Record] = [group_tombstone(gid)]
    records += [r.consumer_member_subscription_record(gid, m) for m in members]
    records.append(r.consumer_group_epoch_record(gid, generation, group.metadata_hash))
    records += [r.consumer_target_assignment_record(gid, m.member_id, m.assigned_partitions) for m in members]
    records.append(r.consumer_target_assignment_epoch_record(gid, generation))
    records += [r.consumer_current_assignment_record(gid, m) for m in members]
    for m in members:
        assert m.classic_member_metadata is not None
        ctx.schedule(session_key(gid, m.member_id), m.classic_member_metadata.session_timeout_ms,
                     "expire_consumer_session", gid, m.member_id)
    return group, records


def can_downgrade(ctx: OperationContext, group: ConsumerGroup, leaving: set[str]) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMembers: only classic members would remain, at least
    one of them, the policy allows it, and they fit in a classic group."""
    remaining = [m for mid, m in group.members.items() if mid not in leaving]
    return (
        bool(remaining)
        and all(m.use_classic_protocol for m in remaining)
        and downgrade_enabled(ctx.config.consumer_migration_policy)
        and len(remaining) <= ctx.config.max_size
    )


def downgrade(ctx: OperationContext, group: ConsumerGroup, leaving: set[str]) -> None:
    """Kafka's convertToClassicGroup for members leaving: the consumer group's tombstones, the
    classic group's GroupMetadata record, then a rebalance of the classic group."""
    gid, image = group.group_id, ctx.state.topics_image
    for record in group.delete_records(()):
        ctx.write(record)
    classic = ClassicGroup(
        gid,
        state=ClassicGroupState.STABLE,
        state_timestamp=ctx.now,
        generation_id=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
    )
    for mid in sorted(group.members):
        m = group.members[mid]
        if mid in leaving or m.classic_member_metadata is None:
            continue
        protocols = tuple((p.name, p.metadata) for p in m.classic_member_metadata.supported_protocols)
        classic.add(
            ClassicMember(
                member_id=mid,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic_member_metadata.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=protocols,
            )
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    assignments: dict[str, bytes] = {}
    for mid, m in list(classic.members.items()):
        version = subscription_version(m.metadata(classic.protocol_name))
        data = encode_assignment(to_names(group.target_assignment.get(mid, {}), image), version)
        assignments[mid] = data
        classic.put(m.but(assignment=data))
    ctx.write(group_metadata_record(classic, assignments))
    created = ctx.create(classic)
    for mid in list(created.members):
        ctx.cancel(session_key(gid, mid))
        reschedule_heartbeat(ctx, created, mid)
    prepare_rebalance(ctx, created, f"Downgrade group {gid} from consumer to classic.")


__all__ = ["MigrationRefused", "can_downgrade", "can_upgrade", "downgrade", "to_ids", "to_names", "upgrade"]
