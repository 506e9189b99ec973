"""AlterPartitionReassignments and ListPartitionReassignments: operators move replicas (KIP-455).

Forwarded to the controller, which owns the registrations (cluster/control/replica_keeper.py).
Replicas are named by broker id, as Metadata names them: the gateway of the node whose data
directory keeps the replica. A partition kept in one copy (one data directory, or a shared one)
has no replica to move and is answered INVALID_REPLICA_ASSIGNMENT. A controller that does not
answer fails the whole request, as Kafka answers a forwarded request that timed out.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.clients.controller import ControllerFailed
from cluster.gateway.answers import build_response
from cluster.gateway.apis import ApiKey
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import kafka_message


async def alter_partition_reassignments(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    items = [
        (t.name, p.partition_index, None if p.replicas is None else [int(r) for r in p.replicas])
        for t in body.topics for p in t.partitions
    ]
    allow_change = bool(getattr(body, "allow_replication_factor_change", True))
    top: tuple[ErrorCode, str | None] = (ErrorCode.none, None)
    answers: list[tuple[int, str | None]] = []
    try:
        answers = await gw.controller.alter_partition_reassignments(items, allow_change) if items else []
    except ControllerFailed as exc:
        top = (exc.error_code, None)
    await gw.router.refresh()
    answered = iter(answers)
    responses = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            code, message = next(answered) if top[0] == ErrorCode.none else (top[0].value, None)
            partitions.append({"partition_index": p.partition_index, "error_code": ErrorCode(code),
                               "error_message": kafka_message(code, message)})
        responses.append({"name": t.name, "partitions": partitions})
    return build_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request.api_version, {
        "allow_replication_factor_change": allow_change,
        "error_code": top[0], "error_message": None, "responses": responses,
    })


async def list_partition_reassignments(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    wanted = None if body.topics is None else [(t.name, [int(p) for p in t.partition_indexes]) for t in body.topics]
    try:
        moving = await gw.controller.list_partition_reassignments(wanted)
    except ControllerFailed as exc:
        return build_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, request.api_version,
                              {"error_code": exc.error_code, "error_message": None, "topics": []})
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, p, replicas, adding, removing in moving:
        topics.setdefault(topic, []).append({
            "partition_index": p, "replicas": replicas, "adding_replicas": adding, "removing_replicas": removing,
        })
    return build_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, request.api_version, {
        "error_code": ErrorCode.none, "error_message": None,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    })
