"""OffsetDelete: committed offsets removed by an admin (Kafka 4.x OffsetMetadataManager.deleteOffsets,
validateOffsetDelete; ClassicGroup.validateOffsetDelete, isSubscribedToTopic, computeSubscribedTopics).

Kafka's rules, in its order:
- no group of that id: GROUP_ID_NOT_FOUND; a share group is "not a consumer group": GROUP_ID_NOT_FOUND;
- a classic group with members whose protocol type is not "consumer" (Connect, ...): NON_EMPTY_GROUP,
  since the coordinator cannot tell what they consume (a consumer group checks nothing);
- otherwise per topic: a topic some member subscribes to (as of the group's last generation: Kafka's
  subscribedTopics) answers GROUP_SUBSCRIBED_TO_TOPIC for each of its partitions (a member would
  commit it again), any other partition answers NONE, and a tombstone
  is written where an offset is committed. Nothing else changes: the group stays, even with no
  offsets left (offset expiry deletes such a group later, as it does in Kafka).
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup, parse_subscription_topics  # noqa: F401  (its tests' import)
from coordinator.classic.records import offset_tombstone
from coordinator.context import OperationContext


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
    topics = []
    for topic, partitions in req.topics:
        if group.is_subscribed_to_topic(topic):
            topics.append((topic, tuple((p, ErrorCode.group_subscribed_to_topic) for p in partitions)))
            continue
        for p in partitions:
            if (topic, p) in committed:
                ctx.write(offset_tombstone(req.group_id, topic, p))
        topics.append((topic, tuple((p, ErrorCode.none) for p in partitions)))
    return OffsetDeleteResponse(ErrorCode.none, tuple(topics))


def validate_offset_delete(group: object) -> ErrorCode | None:
    """Kafka's Group.validateOffsetDelete, each group kind's own (no group: GROUP_ID_NOT_FOUND)."""
    if group is None:
        return ErrorCode.group_id_not_found
    return group.validate_offset_delete()  # type: ignore[attr-defined]
