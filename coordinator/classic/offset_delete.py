"""OffsetDelete: committed offsets removed by an admin (Kafka 4.x OffsetMetadataManager.deleteOffsets,
validateOffsetDelete; ClassicGroup.validateOffsetDelete, isSubscribedToTopic, computeSubscribedTopics).

Kafka's rules, in its order:
- no group of that id: GROUP_ID_NOT_FOUND; a share group is "not a consumer group": GROUP_ID_NOT_FOUND;
- a classic group with members whose protocol type is not "consumer" (Connect, ...): NON_EMPTY_GROUP,
  since the coordinator cannot tell what they consume;
- otherwise per topic: a topic some member subscribes to answers GROUP_SUBSCRIBED_TO_TOPIC for each of
  its partitions (a member would commit it again), any other partition answers NONE, and a tombstone
  is written where an offset is committed. Nothing else changes: the group stays, even with no
  offsets left (offset expiry deletes such a group later, as it does in Kafka).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.records import offset_tombstone
from coordinator.classic.state import ClassicGroupState as S
from coordinator.context import OperationContext

CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions)


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error_code: ErrorCode
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...] = ()  # (topic, ((partition, error), ...))


def delete_offsets(ctx: OperationContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    group = ctx.group(req.group_id)
    error = validate_offset_delete(group)
    if error is not None:
        return OffsetDeleteResponse(error)
    committed = ctx.state.offsets.get(req.group_id, {})
    subscribed = subscribed_topics(group)
    topics = []
    for topic, partitions in req.topics:
        if _is_subscribed(group, subscribed, topic):
            topics.append((topic, tuple((p, ErrorCode.group_subscribed_to_topic) for p in partitions)))
            continue
        for p in partitions:
            if (topic, p) in committed:
                ctx.write(offset_tombstone(req.group_id, topic, p))
        topics.append((topic, tuple((p, ErrorCode.none) for p in partitions)))
    return OffsetDeleteResponse(ErrorCode.none, tuple(topics))


def validate_offset_delete(group: object) -> ErrorCode | None:
    if not isinstance(group, ClassicGroup) or group.is_in(S.DEAD):
        return ErrorCode.group_id_not_found
    if group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE) and not _uses_consumer_protocol(group):
        return ErrorCode.non_empty_group
    return None


def _uses_consumer_protocol(group: ClassicGroup) -> bool:
    return group.protocol_type == CONSUMER_PROTOCOL_TYPE


def _is_subscribed(group: ClassicGroup, subscribed: frozenset[str] | None, topic: str) -> bool:
    """Kafka's isSubscribedToTopic: when the subscriptions cannot be known, a consumer group is
    taken as subscribed to everything (deleting an offset a member may commit again is refused)."""
    if subscribed is None:
        return _uses_consumer_protocol(group)
    return topic in subscribed


def subscribed_topics(group: ClassicGroup) -> frozenset[str] | None:
    """Kafka's computeSubscribedTopics: the topics the members' consumer-protocol subscriptions name,
    an empty set for a consumer group without members, None when unknown (another protocol type,
    no protocol chosen yet, or metadata that does not parse)."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    if not group.members:
        return frozenset()
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        parsed = parse_subscription_topics(member.metadata(group.protocol_name))
        if parsed is None:
            return None
        topics |= parsed
    return frozenset(topics)


def parse_subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription, read as version 0, the prefix of every version
    (as Kafka does, so a newer client's subscription still parses); None if it does not parse."""
    try:
        offset = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, offset)
        offset += 4
        if count < 0:
            return None
        topics = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, offset)
            offset += 2
            if length < 0 or offset + length > len(metadata):
                return None
            topics.add(metadata[offset : offset + length].decode("utf-8"))
            offset += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
