"""Fetch and ListOffsets: Kafka requests translated to PartitionLeaderClient calls and back.

Partitions this gateway can name are read through `gw.partitions`, which long-polls their
leaders (cluster/clients/partition_leader.py); unknown topics and partitions are answered here.
A partition of `__consumer_offsets` or `__share_group_state` goes the same way to the coordinator
actor leading it, which serves its stored batches as Kafka serves its internal topics.
Fetch sessions (KIP-227) are not offered: session id 0 tells clients to send full fetches, as
Kafka does when its session cache is off.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.calls import FetchPartition, LogEnd
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import Shape, answer_shape, build_response
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import ms, partition_known, refresh_if_unknown, resolve_topic
from cluster.partition import FetchOutcome

# Kafka's broker fetch.max.bytes default: a request's max_bytes (up to 2^31 - 1) is cut to it,
# so one fetch reads at most this much per leader (plus the first batch, KIP-74).
# A named constant until the setting exists.
FETCH_MAX_BYTES = 57_671_680


async def fetch(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    v = request.api_version
    by_id = v >= 13
    await refresh_if_unknown(
        gw,
        [] if by_id else [t.topic for t in body.topics],
        [t.topic_id for t in body.topics] if by_id else [],
    )
    # (topic key as the client named it, partition) -> outcome; the known ones go to their leaders.
    order: list[tuple[Any, int]] = []
    outcomes: dict[tuple[Any, int], FetchOutcome] = {}
    reads: list[tuple[tuple[Any, int], FetchPartition]] = []
    for t in body.topics:
        topic_key = t.topic_id if by_id else t.topic
        name, error = resolve_topic(gw, None if by_id else t.topic, t.topic_id if by_id else None)
        for p in t.partitions:
            key = (topic_key, p.partition)
            order.append(key)
            if name is None:
                outcomes[key] = FetchOutcome(error)
            elif not partition_known(gw, name, p.partition):
                outcomes[key] = FetchOutcome(ErrorCode.unknown_topic_or_partition)
            else:
                part = FetchPartition(
                    name, p.partition, p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1)
                )
                reads.append((key, part))

    if reads:
        answers = await gw.partitions.fetch(
            [part for _, part in reads],
            ms(body.max_wait),
            body.min_bytes,
            min(getattr(body, "max_bytes", FETCH_MAX_BYTES), FETCH_MAX_BYTES),
        )
        outcomes.update(zip((key for key, _ in reads), answers))

    return _response(v, order, outcomes)


def _response(version: int, order: list[tuple[Any, int]], outcomes: dict[tuple[Any, int], FetchOutcome]) -> Any:
    """The answer from typed values (answers.py): every consumer's fetch comes through here, and
    the generic dict coercion cost more than the rest. No aborted transactions: null, as Kafka
    answers a read without any (SPEC.md §11, no transactions)."""
    response, topic, partition, topic_field = _shapes(version)
    with_log_start = partition.has("log_start_offset")  # from v5
    by_topic: dict[Any, list[Any]] = {}
    for topic_key, p in order:
        o = outcomes[(topic_key, p)]
        fields = {"partition_index": p, "error_code": o.error_code, "high_watermark": o.high_watermark,
                  "last_stable_offset": o.high_watermark, "records": o.records, "aborted_transactions": None}
        if with_log_start:
            fields["log_start_offset"] = o.log_start_offset
        by_topic.setdefault(topic_key, []).append(partition(**fields))
    return response(responses=tuple(topic(**{topic_field: k, "partitions": tuple(parts)}) for k, parts in by_topic.items()))


@functools.cache
def _shapes(version: int) -> tuple[Shape, Shape, Shape, str]:
    """The response's, a topic's and a partition's shapes, and the field naming the topic (name,
    or id from v13)."""
    response = answer_shape(ApiKey.FETCH, version)
    topic = response.of("responses")
    return response, topic, topic.of("partitions"), "topic_id" if topic.has("topic_id") else "topic"


async def list_offsets(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    await refresh_if_unknown(gw, [t.name for t in body.topics])

    keys = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    # Kafka answers every occurrence of a partition named twice INVALID_REQUEST and looks none up.
    seen: set[tuple[str, int]] = set()
    duplicates = {key for key in keys if key in seen or seen.add(key)}

    async def one(topic: str, partition: int, client_epoch: int, timestamp: int) -> LogEnd:
        if (topic, partition) in duplicates:
            return LogEnd(ErrorCode.invalid_request)
        if not partition_known(gw, topic, partition):
            return LogEnd(ErrorCode.unknown_topic_or_partition)
        return await gw.partitions.list_offsets(topic, partition, timestamp, client_epoch)

    answers = await asyncio.gather(
        *(
            one(t.name, p.partition_index, getattr(p, "current_leader_epoch", -1), p.timestamp)
            for t in body.topics
            for p in t.partitions
        )
    )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), end in zip(keys, answers):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "error_code": end.error_code,
                "timestamp": end.timestamp,
                "offset": end.offset,
                "leader_epoch": end.leader_epoch,
            }
        )
    return build_response(
        ApiKey.LIST_OFFSETS,
        request.api_version,
        {"topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]},
    )
