"""Produce: each partition's batches go to the actor leading it; batched per actor per tick.

acks=0 gets no response at all (Kafka), acks=1 and acks=-1 both answer once the leader has the
batches in its log under the flush policy; on a replicated partition acks=-1 waits for its
in-sync replicas too (cluster/replicated_partition.py), up to the request's timeout.

This runs once per produced batch of every producer, so the answer is built straight from kio's
classes (a template per version) rather than through the generic dict coercion, and partitions
rejected here never become a task.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import Shape, answer_shape
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import kafka_message, ms, partition_known, topic_names
from cluster.partition import ProduceOutcome


async def produce(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    acks = body.acks
    by_id = request.api_version >= 13  # KIP-516: v13 names topics by id, in request and answer
    names = await topic_names(gw, body.topic_data, by_id)
    rejected = _request_error(acks, body.transactional_id)
    timeout = ms(body.timeout)

    keys: list[tuple[Any, int]] = []  # (the topic as the request names it: name, or id from v13; partition)
    outcomes: list[ProduceOutcome | None] = []
    waiting: list[tuple[int, Any]] = []
    for t, topic in zip(body.topic_data, names):
        ref = t.topic_id if by_id else t.name
        for p in t.partition_data:
            if topic is None:  # v13: an id this cluster does not know
                outcome = rejected or ProduceOutcome(ErrorCode.unknown_topic_id, message=f"unknown topic id {ref}")
            else:
                outcome = rejected or _partition_error(gw, topic, p.index)
            if outcome is None:
                records = p.records
                if type(records) is not bytes:
                    records = bytes(records or b"")
                waiting.append((len(outcomes), gw.partitions.produce(topic, p.index, records, acks == -1, timeout)))
            keys.append((ref, p.index))
            outcomes.append(outcome)
    if len(waiting) == 1:
        outcomes[waiting[0][0]] = await waiting[0][1]
    elif waiting:
        for (i, _), outcome in zip(waiting, await asyncio.gather(*(call for _, call in waiting))):
            outcomes[i] = outcome
    if acks == 0:
        return None
    return _response(request.api_version, keys, outcomes)  # type: ignore[arg-type]


def _request_error(acks: int, transactional_id: str | None) -> ProduceOutcome | None:
    if acks not in (0, 1, -1):
        return ProduceOutcome(ErrorCode.invalid_required_acks, message=f"acks must be 0, 1 or -1, got {acks}")
    if transactional_id is not None:
        return ProduceOutcome(ErrorCode.invalid_request, message="transactions are not supported (SPEC.md §11)")
    return None


def _partition_error(gw: GatewayContext, topic: str, partition: int) -> ProduceOutcome | None:
    info = gw.leadership.topics.get(topic)
    if info is None or not partition_known(gw, topic, partition):
        return ProduceOutcome(ErrorCode.unknown_topic_or_partition, message=f"unknown partition {topic}-{partition}")
    if info.internal:
        return ProduceOutcome(ErrorCode.invalid_topic_exception, message=f"cannot produce to internal topic {topic}")
    return None


def _response(version: int, keys: list[tuple[Any, int]], outcomes: list[ProduceOutcome]) -> Any:
    """The answer from typed values (answers.py): every producer's request comes through here.
    keys: (the topic as the request named it, partition)."""
    response, topic, partition = _shapes(version)
    with_log_start, with_message = partition.has("log_start_offset"), partition.has("error_message")
    field = "topic_id" if version >= 13 else "name"
    by_topic: dict[Any, list[Any]] = {}
    for (name, p), o in zip(keys, outcomes):
        fields = {"index": p, "error_code": o.error_code, "base_offset": o.base_offset}
        if with_log_start:
            fields["log_start_offset"] = o.log_start_offset
        if with_message:
            fields["error_message"] = o.message if o.message is None else kafka_message(o.error_code, o.message)
        by_topic.setdefault(name, []).append(partition(**fields))
    return response(responses=tuple(topic(**{field: t, "partition_responses": tuple(parts)}) for t, parts in by_topic.items()))


@functools.cache
def _shapes(version: int) -> tuple[Shape, Shape, Shape]:
    """The response's, a topic's and a partition's shapes."""
    response = answer_shape(ApiKey.PRODUCE, version)
    topic = response.of("responses")
    return response, topic, topic.of("partition_responses")
