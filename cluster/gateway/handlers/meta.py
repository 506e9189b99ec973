"""ApiVersions, Metadata, DescribeCluster, FindCoordinator: the cluster as clients see it.

Every gateway is a broker. Partition leaders in Metadata and coordinators in FindCoordinator
are gateways too (any gateway serves any request), spread over the gateways so that clients
spread their connections; a client never learns about actors.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.hashing import group_partition, java_string_hash, kafka_abs

from cluster.clients.controller import ControllerFailed
from cluster.gateway.apis import SUPPORTED, ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.topics import over_partition_limits
from cluster.leadership import leader_broker
from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TopicSpec, validate_topic_name

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2


def api_versions(gw: GatewayContext, request: Request) -> Any:
    return build_response(
        ApiKey.API_VERSIONS,
        request.api_version,
        {
            "error_code": ErrorCode.none,
            "api_keys": [
                {"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(SUPPORTED.items())
            ],
        },
    )


def _brokers(gw: GatewayContext) -> list[dict[str, Any]]:
    return [{"node_id": g.node_id, "host": g.host, "port": g.port, "rack": None} for g in gw.leadership.gateways]


def _controller_id(gw: GatewayContext) -> int:
    gateways = gw.leadership.gateways
    return gateways[0].node_id if gateways else -1


def _topic_entry(gw: GatewayContext, name: str) -> dict[str, Any]:
    leadership = gw.leadership
    info = leadership.topics[name]
    partitions = []
    for p in range(info.partitions):
        route = leadership.leaders.get((name, p))
        if route is None:
            partitions.append(
                {"error_code": ErrorCode.leader_not_available, "partition_index": p, "leader_id": -1, "leader_epoch": -1}
            )
            continue
        replicated = leadership.replica_brokers.get((name, p))
        if replicated is not None:
            # The broker on the leader replica's node: its gateway reaches the leader on its own node.
            _, replicas, isr, offline = replicated
            leader = leader_broker(leadership, name, p)
            partitions.append({
                "error_code": ErrorCode.none, "partition_index": p, "leader_id": leader, "leader_epoch": route[1],
                "replica_nodes": list(replicas), "isr_nodes": list(isr), "offline_replicas": list(offline),
            })
            continue
        broker = leadership.broker_for(p)
        partitions.append(
            {
                "error_code": ErrorCode.none,
                "partition_index": p,
                "leader_id": broker,
                "leader_epoch": route[1],
                "replica_nodes": [broker],
                "isr_nodes": [broker],
                "offline_replicas": [],
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": partitions,
    }


async def metadata(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    requested = body.topics
    auto_create = getattr(body, "allow_auto_topic_creation", True) and gw.config["auto.create.topics.enable"]
    if requested is None:
        names: list[str | None] = sorted(gw.leadership.topics)
    else:
        names = []
        for t in requested:
            name = getattr(t, "name", None)
            topic_id = getattr(t, "topic_id", None)
            if name is None and topic_id is not None:
                info = gw.leadership.topics_by_id.get(topic_id)
                name = info.name if info else None
            names.append(name)
    missing = [n for n in names if n is not None and n not in gw.leadership.topics]
    if missing:
        await gw.router.refresh()
        missing = [n for n in missing if n not in gw.leadership.topics]
    if missing and auto_create:
        creatable = [n for n in missing if validate_topic_name(n) is None]
        specs = [TopicSpec(n, gw.config["num.partitions"]) for n in creatable]
        # Names past the partition limits stay unknown, as any other topic that was not created.
        refused = over_partition_limits(gw, specs)
        specs = [spec for i, spec in enumerate(specs) if i not in refused]
        if specs:
            try:
                await gw.controller.create_topics(specs)
            except ControllerFailed as exc:
                # The topics stay unknown, which the client retries; the operator sees why.
                log.warning("auto-creation of %d topics failed: %s", len(specs), exc)
            await gw.router.refresh()
    topics = []
    for name in names:
        if name is None:
            topics.append({"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": None, "partitions": []})
        elif name in gw.leadership.topics:
            topics.append(_topic_entry(gw, name))
        else:
            error = ErrorCode.invalid_topic_exception if validate_topic_name(name) else ErrorCode.unknown_topic_or_partition
            topics.append({"error_code": error, "name": name, "topic_id": None, "partitions": []})
    return build_response(
        ApiKey.METADATA,
        request.api_version,
        {
            "brokers": _brokers(gw),
            "cluster_id": gw.leadership.cluster_id,
            "controller_id": _controller_id(gw),
            "topics": topics,
        },
    )


def describe_cluster(gw: GatewayContext, request: Request) -> Any:
    brokers = [{"broker_id": g.node_id, "host": g.host, "port": g.port, "rack": None} for g in gw.leadership.gateways]
    return build_response(
        ApiKey.DESCRIBE_CLUSTER,
        request.api_version,
        {
            "error_code": ErrorCode.none,
            "cluster_id": gw.leadership.cluster_id,
            "controller_id": _controller_id(gw),
            "brokers": brokers,
        },
    )


def coordinator_for(gw: GatewayContext, key_type: int, key: str) -> dict[str, Any]:
    """The gateway that fronts the internal partition owning key, as a FindCoordinator entry."""
    leadership = gw.leadership
    if key_type == KEY_TYPE_GROUP:
        topic = CONSUMER_OFFSETS
        partition = group_partition(key, gw.config["offsets.topic.num.partitions"])
    elif key_type == KEY_TYPE_SHARE:
        topic = SHARE_GROUP_STATE
        parts = key.rsplit(":", 2)
        if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
            return _no_coordinator(key, ErrorCode.invalid_request, "share key must be group:topicId:partition")
        partition = kafka_abs(java_string_hash(key)) % gw.config["share.coordinator.state.topic.num.partitions"]
    else:
        return _no_coordinator(key, ErrorCode.invalid_request, f"key type {key_type} is not supported")
    if (topic, partition) not in leadership.leaders or not leadership.gateways:
        return _no_coordinator(key, ErrorCode.coordinator_not_available, "coordinator is moving")
    node_id = leader_broker(leadership, topic, partition)
    gateway = next((g for g in leadership.gateways if g.node_id == node_id), None)
    if gateway is None:
        # A replicated partition whose leader's node has no gateway listed yet (starting, or
        # gone): any gateway serves any coordinator, so the spread one is named, as for a
        # partition kept in one copy.
        spread = leadership.broker_for(partition)
        gateway = next(g for g in leadership.gateways if g.node_id == spread)
    return {
        "key": key,
        "node_id": gateway.node_id,
        "host": gateway.host,
        "port": gateway.port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }


def _no_coordinator(key: str, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": message}


def find_coordinator(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    key_type = getattr(body, "key_type", KEY_TYPE_GROUP)
    if request.api_version >= 4:
        entries = [coordinator_for(gw, key_type, key) for key in body.coordinator_keys]
        return build_response(ApiKey.FIND_COORDINATOR, request.api_version, {"coordinators": entries})
    entry = coordinator_for(gw, key_type, body.key)
    entry.pop("key")
    return build_response(ApiKey.FIND_COORDINATOR, request.api_version, entry)
