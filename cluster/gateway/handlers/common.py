"""Helpers the partition-routed handlers share, and the rule for the error messages clients get."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.calls import Failed
from cluster.gateway.context import GatewayContext
from cluster.gateway.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
_untold_log = RateLimitedLog(log, per_second=3)

# Errors whose text raygroups never sends, because Kafka sends none: UNKNOWN_SERVER_ERROR never
# carries one ("to ensure we don't leak sensitive information", ApiError.fromThrowable); Kafka's
# coordinator runtime throws NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and
# COORDINATOR_NOT_AVAILABLE with the error's default text, which fromThrowable drops, and
# CoordinatorOperationExceptionHelper answers null for the errors it rewrites into them; a
# forwarded request whose controller did not answer is REQUEST_TIMED_OUT without one. raygroups'
# texts for these, and for KAFKA_STORAGE_ERROR and NOT_LEADER_OR_FOLLOWER, are an exception's:
# partitions and epochs, a log's directory, an OS error.
UNTOLD = frozenset({
    ErrorCode.unknown_server_error,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out,
    ErrorCode.kafka_storage_error,
    ErrorCode.not_leader_or_follower,
})
# Of those, the ones a failover answers many times a second: not worth a warning.
_ROUTINE = frozenset(
    {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.not_leader_or_follower}
)


def kafka_message(code: Any, text: str | None) -> str | None:
    """The error message a client gets with `code`: `text` (Kafka's, or raygroups' own words for a
    request it refuses), or none for the errors above, whose text goes to the log instead."""
    if not text or code not in UNTOLD:
        return text or None
    if code in _ROUTINE:
        log.debug("answered %s: %s", ErrorCode(code).name, text)
    else:
        _untold_log.warning("answered %s: %s", ErrorCode(code).name, text)
    return None


_ONE_MS = timedelta(milliseconds=1)


def ms(value: Any) -> int:
    """A duration field as milliseconds: kio decodes Kafka's int32 ms fields as timedeltas. Exact
    integer division: float seconds times 1000 truncated 1001 ms to 1000 (one copy of this did)."""
    return value // _ONE_MS if isinstance(value, timedelta) else int(value)


def resolve_topic(gw: GatewayContext, name: str | None, topic_id: Any = None) -> tuple[str | None, ErrorCode]:
    """The topic name behind a name or a topic id, or the error a client gets for it."""
    leadership = gw.leadership
    if name is None and topic_id is not None:
        info = leadership.topics_by_id.get(topic_id)
        return (info.name, ErrorCode.none) if info else (None, ErrorCode.unknown_topic_id)
    if name is None or name not in leadership.topics:
        return None, ErrorCode.unknown_topic_or_partition
    return name, ErrorCode.none


async def refresh_if_unknown(gw: GatewayContext, names: list[str | None], topic_ids: list[Any] = ()) -> None:
    """A topic another gateway just created may not have reached this one yet: pull once."""
    # Loops, not any() over generators: this runs on every OffsetCommit (about 0.4 us less).
    leadership = gw.leadership
    topics = leadership.topics
    for name in names:
        if name is not None and name not in topics:
            await gw.router.refresh()
            return
    by_id = leadership.topics_by_id
    for topic_id in topic_ids:
        if topic_id is not None and topic_id not in by_id:
            await gw.router.refresh()
            return


async def topic_names(gw: GatewayContext, topics: Any, by_id: bool) -> list[str | None]:
    """The names of a request's topics: as sent (`.name`), or, for the versions that name topics by
    id (KIP-516: Produce v13, OffsetCommit/OffsetFetch v10), behind their `.topic_id`, None for an
    id this cluster does not know after one pull of the map. When every topic is known, as on
    nearly every request, this costs one pass and no await."""
    if by_id:
        if any(t.topic_id not in gw.leadership.topics_by_id for t in topics):
            await refresh_if_unknown(gw, [], [t.topic_id for t in topics])
        return [resolve_topic(gw, None, t.topic_id)[0] for t in topics]
    if any(t.name not in gw.leadership.topics for t in topics):
        await refresh_if_unknown(gw, [t.name for t in topics])
    return [t.name for t in topics]


def partition_known(gw: GatewayContext, topic: str, partition: int) -> bool:
    info = gw.leadership.topics.get(topic)
    return info is not None and 0 <= partition < info.partitions


def named_partitions(named: Any) -> dict[str, Any]:
    """An assignment answered with topic names: ((topic id, name, partitions), ...) as the
    describe APIs' TopicPartitions."""
    return {"topic_partitions": [{"topic_id": t, "topic_name": name, "partitions": list(ps)} for t, name, ps in named]}


def described_groups(group_ids: Any, per_group: dict[str, Any], member: Any) -> list[dict[str, Any]]:
    """ShareGroupDescribe's and ConsumerGroupDescribe's DescribedGroups, in the order asked: a group
    whose coordinator failed answers its error and no members; otherwise the fields both APIs
    share, and each member as `member(m)` answers it."""
    groups = []
    for group_id in group_ids:
        d = per_group[group_id]
        if isinstance(d, Failed):
            groups.append({"error_code": d.error_code, "error_message": kafka_message(d.error_code, d.message),
                           "group_id": group_id, "members": []})
            continue
        groups.append(
            {
                "error_code": d.error_code,
                "error_message": kafka_message(d.error_code, d.error_message),
                "group_id": d.group_id,
                "group_state": d.group_state,
                "group_epoch": d.group_epoch,
                "assignment_epoch": d.assignment_epoch,
                "assignor_name": d.assignor_name,
                "authorized_operations": d.authorized_operations,
                "members": [member(m) for m in d.members],
            }
        )
    return groups
