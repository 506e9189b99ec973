"""Produce: each partition's batches go to the actor leading it; batched per actor per tick.

acks=0 gets no response at all (Kafka), acks=1 and acks=-1 both answer once the leader has the
batches in its log under the flush policy: with no follower replicas, the leader is the ISR.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey, build_response
from cluster.gateway.connection import Request
from cluster.gateway.handlers.common import partition_known, refresh_if_unknown
from cluster.partition import ProduceOutcome


async def produce(gw: Any, request: Request) -> Any:
    body = request.body
    acks = body.acks
    await refresh_if_unknown(gw, [t.name for t in body.topic_data])

    async def one(topic: str, partition: int, records: bytes | None) -> ProduceOutcome:
        if acks not in (0, 1, -1):
            return ProduceOutcome(ErrorCode.invalid_required_acks, message=f"acks must be 0, 1 or -1, got {acks}")
        if body.transactional_id is not None:
            return ProduceOutcome(ErrorCode.invalid_request, message="transactions are not supported (SPEC.md §11)")
        info = gw.leadership.topics.get(topic)
        if info is None or not partition_known(gw, topic, partition):
            return ProduceOutcome(ErrorCode.unknown_topic_or_partition, message=f"unknown partition {topic}-{partition}")
        if info.internal:
            return ProduceOutcome(ErrorCode.invalid_topic_exception, message=f"cannot produce to internal topic {topic}")
        return await gw.partitions.produce(topic, partition, bytes(records or b""))

    keys = [(t.name, p.index) for t in body.topic_data for p in t.partition_data]
    outcomes = await asyncio.gather(
        *(one(t.name, p.index, p.records) for t in body.topic_data for p in t.partition_data)
    )
    if acks == 0:
        return None
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), o in zip(keys, outcomes):
        by_topic.setdefault(topic, []).append(
            {
                "index": partition,
                "error_code": o.error_code,
                "base_offset": o.base_offset,
                "log_start_offset": o.log_start_offset,
                "error_message": o.message,
                "record_errors": [],
            }
        )
    return build_response(
        ApiKey.PRODUCE,
        request.api_version,
        {"responses": [{"name": t, "partition_responses": parts} for t, parts in by_topic.items()]},
    )
