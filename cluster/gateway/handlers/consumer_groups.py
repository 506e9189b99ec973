"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848).

A consumer group lives on the `__consumer_offsets` partition a classic group of that id would, and
its requests go to the actor leading it, like every group API (groups.py); the coordinator's domain
is coordinator/consumer/.
"""

from __future__ import annotations

from typing import Any

from coordinator.consumer.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed
from cluster.gateway.answers import build_response
from cluster.gateway.apis import ApiKey
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import described_groups, kafka_message, ms, named_partitions


async def consumer_group_heartbeat(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    owned = None
    if b.topic_partitions is not None:
        owned = tuple((t.topic_id, tuple(t.partitions)) for t in b.topic_partitions)
    req = ConsumerGroupHeartbeatRequest(
        group_id=b.group_id,
        member_id=b.member_id,
        member_epoch=b.member_epoch,
        instance_id=b.instance_id,
        rack_id=b.rack_id,
        rebalance_timeout_ms=ms(b.rebalance_timeout),
        subscribed_topic_names=None if b.subscribed_topic_names is None else tuple(b.subscribed_topic_names),
        subscribed_topic_regex=getattr(b, "subscribed_topic_regex", None),  # v1 and later
        server_assignor=b.server_assignor,
        topic_partitions=owned,
        client_id=request.client_id or "",
        client_host=f"/{request.client_host}",
        api_version=v,
    )
    outcome = await gw.coordinators.group(Op.CONSUMER_HEARTBEAT, b.group_id, req)
    # Kafka's handleOperationException: a fresh response, so no member id and epoch 0.
    response = ConsumerGroupHeartbeatResponse(outcome.error_code) if isinstance(outcome, Failed) else outcome
    assignment = None
    if response.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": list(partitions)} for topic_id, partitions in response.assignment
            ]
        }
    return build_response(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
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
        "instance_id": m.instance_id,
        "rack_id": m.rack_id,
        "member_epoch": m.member_epoch,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "assignment": named_partitions(m.assignment),
        "target_assignment": named_partitions(m.target_assignment),
        "member_type": m.member_type,
    }


async def consumer_group_describe(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    per_group = await gw.coordinators.per_group(Op.CONSUMER_DESCRIBE, b.group_ids)
    return build_response(ApiKey.CONSUMER_GROUP_DESCRIBE, v, {"groups": described_groups(b.group_ids, per_group, _member)})
