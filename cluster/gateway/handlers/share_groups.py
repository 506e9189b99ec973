"""ShareGroupHeartbeat, ShareGroupDescribe and DescribeShareGroupOffsets.

A share group lives on the same `__consumer_offsets` partition a classic group of that id would,
and the request goes to the actor leading it, like every classic group API (groups.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.share.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from sharestate import messages as m

from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import described_groups, kafka_message, named_partitions, partition_known, refresh_if_unknown


async def share_group_heartbeat(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    req = ShareGroupHeartbeatRequest(
        group_id=b.group_id,
        member_id=b.member_id,
        member_epoch=b.member_epoch,
        rack_id=b.rack_id,
        subscribed_topic_names=None if b.subscribed_topic_names is None else tuple(b.subscribed_topic_names),
        client_id=request.client_id or "",
        client_host=f"/{request.client_host}",
    )
    outcome = await gw.coordinators.group(Op.SHARE_HEARTBEAT, b.group_id, req)
    response = (
        # Kafka's handleOperationException: a fresh response, so no member id and epoch 0.
        ShareGroupHeartbeatResponse(outcome.error_code)
        if isinstance(outcome, Failed)
        else outcome.response
    )
    assignment = None
    if response.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": list(partitions)} for topic_id, partitions in response.assignment
            ]
        }
    return build_response(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        v,
        {
            "error_code": response.error_code,
            "error_message": kafka_message(response.error_code, response.error_message),
            "member_id": response.member_id,
            "member_epoch": response.member_epoch,
            "heartbeat_interval": response.heartbeat_interval_ms,
            "assignment": assignment,
        },
    )


def _member(m: Any) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "rack_id": m.rack_id,
        "member_epoch": m.member_epoch,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "assignment": named_partitions(m.assignment),
    }


async def share_group_describe(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    per_group = await gw.coordinators.per_group(Op.SHARE_DESCRIBE, b.group_ids)
    return build_response(ApiKey.SHARE_GROUP_DESCRIBE, v, {"groups": described_groups(b.group_ids, per_group, _member)})


# -- DescribeShareGroupOffsets ---------------------------------------------------------------------------


async def describe_share_group_offsets(gw: GatewayContext, request: Request) -> Any:
    """Each share partition's start offset from the share coordinator (ReadShareGroupStateSummary);
    v1 adds the lag: records from the start offset to the log end not yet done."""
    b, v = request.body, request.api_version
    listed = await gw.coordinators.per_group(Op.SHARE_TOPICS, [g.group_id for g in b.groups])
    groups = await asyncio.gather(*(_group_offsets(gw, g, listed[g.group_id], v) for g in b.groups))
    return build_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, v, {"groups": list(groups)})


async def _group_offsets(gw: GatewayContext, group: Any, listed: Any, v: int) -> dict[str, Any]:
    if isinstance(listed, Failed) or listed.error_code != ErrorCode.none:
        code = listed.error_code
        message = listed.message if isinstance(listed, Failed) else listed.error_message
        return {"group_id": group.group_id, "error_code": code, "error_message": kafka_message(code, message),
                "topics": []}
    if group.topics is None:
        wanted = [(tid, name, list(parts)) for tid, name, parts in listed.topics]
    else:
        await refresh_if_unknown(gw, [t.topic_name for t in group.topics])
        wanted = []
        for t in group.topics:
            info = gw.leadership.topics.get(t.topic_name)
            wanted.append((info.topic_id if info else None, t.topic_name, list(t.partitions)))

    async def one(topic_id: Any, name: str, p: int) -> dict[str, Any]:
        if topic_id is None or not partition_known(gw, name, p):
            return {"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                    "error_code": ErrorCode.unknown_topic_or_partition}
        summary = await gw.persister.summary(m.ReadShareGroupStateSummaryRequest(group.group_id, topic_id, p))
        lag = -1
        if v >= 1 and summary.error_code == ErrorCode.none and summary.start_offset >= 0:
            end = await _log_end(gw, name, p)
            if end >= 0:
                done = max(summary.delivery_complete_count, 0)
                lag = max(0, end - summary.start_offset - done)
        return {
            "partition_index": p,
            "start_offset": summary.start_offset,
            "leader_epoch": summary.leader_epoch,
            "lag": lag,
            "error_code": summary.error_code,
            "error_message": kafka_message(summary.error_code, summary.error_message),
        }

    topics = []
    for topic_id, name, parts in wanted:
        answers = await asyncio.gather(*(one(topic_id, name, p) for p in parts))
        topics.append({"topic_name": name, "topic_id": topic_id, "partitions": list(answers)})
    return {"group_id": group.group_id, "error_code": ErrorCode.none, "topics": topics}


async def _log_end(gw: GatewayContext, topic: str, partition: int) -> int:
    end = await gw.partitions.list_offsets(topic, partition)
    return end.offset if end.error_code == ErrorCode.none else -1
