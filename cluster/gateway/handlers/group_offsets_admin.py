"""OffsetDelete, AlterShareGroupOffsets and DeleteShareGroupOffsets: Kafka's admin tools for a group's
offsets (Kafka 4.x KafkaApis.handleOffsetDeleteRequest, handleAlterShareGroupOffsetsRequest,
handleDeleteShareGroupOffsetsRequest).

As in KafkaApis, topics the cluster does not know are answered here (UNKNOWN_TOPIC_OR_PARTITION) and
the rest go to the group's coordinator; an error of the whole request (the group missing or not
Empty, the coordinator moving) is the response's top-level error with no topics. raygroups has no
ACLs, so the authorization checks Kafka makes first have nothing to refuse.

After share state changed, the partition leaders drop what they cached of the group's share
partitions (Kafka fences them with the state epoch), so the next consumer reads the new state.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.classic.offset_delete import OffsetDeleteRequest
from coordinator.share.offsets_admin import AlterShareOffsetsRequest, DeleteShareOffsetsRequest

from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import kafka_message, partition_known, refresh_if_unknown

_UNKNOWN_MESSAGE = "This server does not host this topic-partition."


# -- OffsetDelete -----------------------------------------------------------------------------------


async def offset_delete(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    if not b.group_id:
        return build_response(ApiKey.OFFSET_DELETE, v, {"error_code": ErrorCode.invalid_group_id, "topics": []})
    await refresh_if_unknown(gw, [t.name for t in b.topics])
    answers: dict[tuple[str, int], ErrorCode] = {}
    known: list[tuple[str, tuple[int, ...]]] = []
    for t in b.topics:
        partitions = [p.partition_index for p in t.partitions]
        valid = tuple(p for p in partitions if partition_known(gw, t.name, p))
        for p in partitions:
            if p not in valid:
                answers[(t.name, p)] = ErrorCode.unknown_topic_or_partition
        if valid:
            known.append((t.name, valid))
    if known:
        outcome = await gw.coordinators.group(Op.OFFSET_DELETE, b.group_id, OffsetDeleteRequest(b.group_id, tuple(known)))
        if isinstance(outcome, Failed) or outcome.error_code != ErrorCode.none:
            return build_response(ApiKey.OFFSET_DELETE, v, {"error_code": outcome.error_code, "topics": []})
        for topic, parts in outcome.topics:
            for partition, error in parts:
                answers[(topic, partition)] = error
    topics = []
    for t in b.topics:
        parts = [{"partition_index": p.partition_index, "error_code": answers[(t.name, p.partition_index)]} for p in t.partitions]
        topics.append({"name": t.name, "partitions": parts})
    return build_response(ApiKey.OFFSET_DELETE, v, {"error_code": ErrorCode.none, "topics": topics})


# -- AlterShareGroupOffsets -------------------------------------------------------------------------


async def alter_share_group_offsets(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    if not b.group_id:
        return _alter_error(v, ErrorCode.invalid_group_id, None)
    await refresh_if_unknown(gw, [t.topic_name for t in b.topics])
    unknown = [t for t in b.topics if t.topic_name not in gw.leadership.topics]
    known = [t for t in b.topics if t.topic_name in gw.leadership.topics]
    responses: list[dict[str, Any]] = [
        {
            "topic_name": t.topic_name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": ErrorCode.unknown_topic_or_partition,
                 "error_message": _UNKNOWN_MESSAGE}
                for p in t.partitions
            ],
        }
        for t in unknown
    ]
    if known:
        req = AlterShareOffsetsRequest(
            b.group_id, tuple((t.topic_name, tuple((p.partition_index, p.start_offset) for p in t.partitions)) for t in known)
        )
        outcome = await gw.groups.alter_share_group_offsets(req)
        if isinstance(outcome, Failed):
            return _alter_error(v, outcome.error_code, outcome.message)
        if outcome.error_code != ErrorCode.none:
            return _alter_error(v, outcome.error_code, outcome.error_message)
        altered = [(t.name, p.partition) for t in outcome.topics for p in t.partitions if p.error_code == ErrorCode.none]
        await _evict(gw, b.group_id, altered)
        responses += [
            {
                "topic_name": t.name,
                "topic_id": t.topic_id,
                "partitions": [
                    {"partition_index": p.partition, "error_code": p.error_code,
                     "error_message": kafka_message(p.error_code, p.error_message)}
                    for p in t.partitions
                ],
            }
            for t in outcome.topics
        ]
    return build_response(ApiKey.ALTER_SHARE_GROUP_OFFSETS, v, {"error_code": ErrorCode.none, "responses": responses})


def _alter_error(v: int, error: ErrorCode, message: str | None) -> Any:
    return build_response(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS, v,
        {"error_code": error, "error_message": kafka_message(error, message), "responses": []},
    )


# -- DeleteShareGroupOffsets ------------------------------------------------------------------------


async def delete_share_group_offsets(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    if not b.group_id:
        return _delete_error(v, ErrorCode.invalid_group_id, None)
    names = tuple(t.topic_name for t in b.topics)
    await refresh_if_unknown(gw, list(names))
    first, answered = await gw.groups.delete_share_group_offsets(DeleteShareOffsetsRequest(b.group_id, names))
    if isinstance(first, Failed):
        return _delete_error(v, first.error_code, first.message)
    if first.error_code != ErrorCode.none:
        return _delete_error(v, first.error_code, first.error_message)
    gone = [t.name for t in answered if t.error_code == ErrorCode.none and t.name is not None]
    await _evict(gw, b.group_id, [(name, p) for name in gone for p in range(_partition_count(gw, name))])
    responses = [
        {"topic_name": t.name, "topic_id": t.topic_id, "error_code": t.error_code,
         "error_message": kafka_message(t.error_code, t.error_message)}
        for t in answered
    ]
    return build_response(ApiKey.DELETE_SHARE_GROUP_OFFSETS, v, {"error_code": ErrorCode.none, "responses": responses})


def _delete_error(v: int, error: ErrorCode, message: str | None) -> Any:
    return build_response(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS, v,
        {"error_code": error, "error_message": kafka_message(error, message), "responses": []},
    )


def _partition_count(gw: GatewayContext, topic: str) -> int:
    info = gw.leadership.topics.get(topic)
    return info.partitions if info is not None else 0


async def _evict(gw: GatewayContext, group_id: str, partitions: list[tuple[str, int]]) -> None:
    """Drop the leaders' cached share partitions of the group: evicted for every gateway, as if
    each had closed its last share session of the group (the group is Empty: none is in use)."""
    if not partitions:
        return
    for gateway in gw.leadership.gateways:
        await gw.partitions.share_evict(group_id, partitions, gateway=gateway.node_id)
