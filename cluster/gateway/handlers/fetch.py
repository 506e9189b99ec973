"""Fetch (long poll across partition leaders) and ListOffsets.

A Fetch names partitions on several actors: each actor gets one call carrying its partitions
and the request's max wait and min bytes. When the first actor answers with data, the others
are asked again without waiting and their long polls are cancelled, so data on one actor is
never held back by an idle partition on another. Fetch sessions (KIP-227) are not offered:
session id 0 tells clients to send full fetches, as Kafka does when its session cache is off.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey, build_response
from cluster.gateway.connection import Request
from cluster.gateway.handlers.common import partition_known, refresh_if_unknown, resolve_topic
from cluster.routing import NoLeader, answer_or_none
from cluster.partition import FetchOutcome


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


async def fetch(gw: Any, request: Request) -> Any:
    body = request.body
    v = request.api_version
    by_id = v >= 13
    await refresh_if_unknown(
        gw,
        [] if by_id else [t.topic for t in body.topics],
        [t.topic_id for t in body.topics] if by_id else [],
    )
    max_wait = _ms(body.max_wait)
    max_bytes = getattr(body, "max_bytes", 2**31 - 1)

    # (topic key as the client named it, partition) -> outcome; routed ones grouped per actor.
    order: list[tuple[Any, int]] = []
    outcomes: dict[tuple[Any, int], FetchOutcome] = {}
    per_actor: dict[str, list[tuple[tuple[Any, int], tuple]]] = {}
    for t in body.topics:
        topic_key = t.topic_id if by_id else t.topic
        name, error = resolve_topic(gw, None if by_id else t.topic, t.topic_id if by_id else None)
        for p in t.partitions:
            key = (topic_key, p.partition)
            order.append(key)
            if name is None:
                outcomes[key] = FetchOutcome(error)
                continue
            if not partition_known(gw, name, p.partition):
                outcomes[key] = FetchOutcome(ErrorCode.unknown_topic_or_partition)
                continue
            route = gw.router.leader(name, p.partition)
            if route is None:
                outcomes[key] = FetchOutcome(ErrorCode.not_leader_or_follower)
                continue
            actor, epoch = route
            item = (
                name,
                p.partition,
                epoch,
                getattr(p, "current_leader_epoch", -1),
                p.fetch_offset,
                p.partition_max_bytes,
            )
            per_actor.setdefault(actor, []).append((key, item))

    outcomes.update(await _fetch_from_actors(gw, per_actor, max_wait, body.min_bytes, max_bytes))

    responses: dict[Any, list[dict[str, Any]]] = {}
    for topic_key, partition in order:
        o = outcomes[(topic_key, partition)]
        responses.setdefault(topic_key, []).append(
            {
                "partition_index": partition,
                "error_code": o.error_code,
                "high_watermark": o.high_watermark,
                "last_stable_offset": o.high_watermark,
                "log_start_offset": o.log_start_offset,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": o.records,
            }
        )
    return build_response(
        ApiKey.FETCH,
        v,
        {
            "error_code": ErrorCode.none,
            "session_id": 0,
            "responses": [
                {"topic": k, "topic_id": k, "partitions": parts} for k, parts in responses.items()
            ],
        },
    )


async def _fetch_from_actors(
    gw: Any,
    per_actor: dict[str, list[tuple[tuple[Any, int], tuple]]],
    max_wait: int,
    min_bytes: int,
    max_bytes: int,
) -> dict[tuple[Any, int], FetchOutcome]:
    results: dict[tuple[Any, int], FetchOutcome] = {}
    if not per_actor:
        return results

    def call(actor: str, wait: int) -> Any:
        handle = gw.router.handle(actor)
        if handle is None:
            return None
        return handle.fetch.remote([item for _, item in per_actor[actor]], wait, min_bytes, max_bytes)

    refs = {actor: call(actor, max_wait) for actor in per_actor}
    pending = {asyncio.ensure_future(answer_or_none(ref)): actor for actor, ref in refs.items() if ref is not None}
    answered: dict[str, list[FetchOutcome] | None] = {actor: None for actor, ref in refs.items() if ref is None}
    got_bytes = 0
    while pending:
        done, _ = await asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            actor = pending.pop(task)
            answered[actor] = task.result()
            got_bytes += sum(len(o.records) for o in answered[actor] or [])
        if pending and got_bytes > 0 and got_bytes >= min_bytes:
            # Data arrived: collect the other leaders' state now instead of waiting out their polls.
            for task, actor in list(pending.items()):
                ray.cancel(refs[actor])
                task.cancel()
                answered[actor] = await answer_or_none(call(actor, 0))
            pending.clear()

    stale = False
    for actor, outs in answered.items():
        keys = [key for key, _ in per_actor[actor]]
        if outs is None:
            stale = True
            outs = [FetchOutcome(ErrorCode.not_leader_or_follower)] * len(keys)
        for key, o in zip(keys, outs):
            stale = stale or o.error_code == ErrorCode.not_leader_or_follower
            results[key] = o
    if stale:
        asyncio.ensure_future(gw.router.refresh())
    return results


async def list_offsets(gw: Any, request: Request) -> Any:
    body = request.body
    await refresh_if_unknown(gw, [t.name for t in body.topics])

    async def one(topic: str, partition: int, client_epoch: int, timestamp: int) -> tuple[int, int, int, int]:
        if not partition_known(gw, topic, partition):
            return (ErrorCode.unknown_topic_or_partition.value, -1, -1, -1)
        try:
            return await gw.router.call_leader(
                topic,
                partition,
                "list_offsets",
                lambda epoch: (topic, partition, epoch, client_epoch, timestamp),
                lambda r: r[0] == ErrorCode.not_leader_or_follower.value,
            )
        except NoLeader:
            return (ErrorCode.not_leader_or_follower.value, -1, -1, -1)

    keys = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    answers = await asyncio.gather(
        *(
            one(t.name, p.partition_index, getattr(p, "current_leader_epoch", -1), p.timestamp)
            for t in body.topics
            for p in t.partitions
        )
    )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (error, offset, timestamp, epoch) in zip(keys, answers):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "error_code": ErrorCode(error),
                "timestamp": timestamp,
                "offset": offset,
                "leader_epoch": epoch,
            }
        )
    return build_response(
        ApiKey.LIST_OFFSETS,
        request.api_version,
        {"topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]},
    )
