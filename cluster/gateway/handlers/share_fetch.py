"""ShareFetch and ShareAcknowledge (KIP-932): share sessions here, in-flight records on the leaders.

A request runs in the member's share session on this gateway (share_sessions.py). Its
partitions are grouped per partition-leader actor and each actor gets one call carrying the
acknowledgements and what to fetch (cluster/share/manager.py). When one actor answers with
records while others are still long-polling, the others are woken, not cancelled: an actor may
be acquiring records at that very moment, and acquired records must reach the client.

When a session ends (final epoch, replaced by a new epoch 0, or its connection closed), what
the member holds on the session's partitions is released at once, after the session's
pending calls have come back, as Kafka's ShareSessionCache does through its listener.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcknowledgementBatch

from cluster.gateway.apis import ApiKey, build_response
from cluster.gateway.connection import Request
from cluster.gateway.handlers.common import refresh_if_unknown
from cluster.gateway.share_sessions import FINAL_EPOCH, SessionError, SharePartitionId, ShareSession
from cluster.routing import answer_or_none
from cluster.share.requests import ShareFetchCall, ShareItem, ShareOutcome

log = logging.getLogger(__name__)

_wake_keys = itertools.count(1)


def _ms(value: Any) -> int:
    return round(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _acknowledgements(topics: Iterable[Any]) -> dict[SharePartitionId, tuple[AcknowledgementBatch, ...]]:
    return {
        (t.topic_id, p.partition_index): tuple(
            AcknowledgementBatch(a.first_offset, a.last_offset, tuple(int(x) for x in a.acknowledge_types))
            for a in p.acknowledgement_batches
        )
        for t in topics
        for p in t.partitions
        if p.acknowledgement_batches
    }


def _invalid_ids(group_id: str | None, member_id: str | None) -> tuple[ErrorCode, str] | None:
    """Kafka's checks before a share session is looked at (an empty group id passes)."""
    if group_id is None:
        return ErrorCode.invalid_request, "Invalid group id in the request."
    if not member_id or len(member_id) > 36:
        return ErrorCode.invalid_request, "Invalid member id in the request."
    return None


def invalid_acknowledgements(batches: tuple[AcknowledgementBatch, ...]) -> str | None:
    """Why these acknowledgement batches are malformed (INVALID_REQUEST), or None.

    Kafka's ShareFetch/ShareAcknowledge v1 validation: ordered, non-overlapping batches, each
    with one type or one per offset, types 0-3 (RENEW needs v2's renew-ack request).
    """
    previous_last = -1
    for b in batches:
        if b.first_offset > b.last_offset:
            return f"acknowledgement batch {b.first_offset}-{b.last_offset} ends before it starts"
        if b.first_offset <= previous_last:
            return "acknowledgement batches overlap or are out of order"
        if not b.acknowledge_types:
            return "an acknowledgement batch has no acknowledge types"
        if len(b.acknowledge_types) > 1 and len(b.acknowledge_types) != b.last_offset - b.first_offset + 1:
            return "acknowledge types must be one for the batch or one per offset"
        if any(not 0 <= t <= 3 for t in b.acknowledge_types):
            return f"unknown acknowledge type in {list(b.acknowledge_types)}"
        previous_last = b.last_offset
    return None


# -- ShareFetch ---------------------------------------------------------------------------------------


async def share_fetch(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    acks = _acknowledgements(b.topics)
    invalid = _invalid_ids(b.group_id, b.member_id)
    if invalid is not None:
        return _fetch_error(v, *invalid)
    added = [(t.topic_id, p.partition_index) for t in b.topics for p in t.partitions]
    try:
        session, final = gw.share_sessions.fetch(
            b.group_id,
            b.member_id,
            b.share_session_epoch,
            request.connection_id,
            added=added,
            forgotten=[(t.topic_id, p) for t in b.forgotten_topics_data for p in t.partitions],
            acknowledging=bool(acks),
        )
    except SessionError as exc:
        return _fetch_error(v, exc.error_code, exc.message)
    fetching = [] if final else session.rotated()
    outcomes = await call_leaders(
        gw,
        session,
        fetching,
        acks,
        max_wait_ms=_ms(b.max_wait),
        min_bytes=b.min_bytes,
        max_bytes=b.max_bytes,
        max_records=b.max_records if b.max_records > 0 else 500,
    )
    if final:
        await end_session(gw, session)
    # A full request answers every partition; an incremental one what changed: records, errors,
    # partitions just added, and acknowledgement results.
    shown = None if b.share_session_epoch == 0 else set(added) | set(acks)
    responses: dict[Any, list[dict[str, Any]]] = {}
    endpoints = False
    for (topic_id, p), (out, leader_epoch) in outcomes.items():
        if shown is not None and not (out.acquired or out.error_code != ErrorCode.none or (topic_id, p) in shown):
            continue
        endpoints = endpoints or out.error_code == ErrorCode.not_leader_or_follower
        responses.setdefault(topic_id, []).append(
            {
                "partition_index": p,
                "error_code": out.error_code,
                "error_message": out.error_message,
                "acknowledge_error_code": out.acknowledge_error_code.value,
                "acknowledge_error_message": out.acknowledge_error_message,
                "current_leader": {"leader_id": gw.leadership.broker_for(p), "leader_epoch": leader_epoch},
                "records": out.records,
                "acquired_records": [
                    {"first_offset": a.first_offset, "last_offset": a.last_offset, "delivery_count": a.delivery_count}
                    for a in out.acquired
                ],
            }
        )
    return build_response(
        ApiKey.SHARE_FETCH,
        v,
        {
            "error_code": ErrorCode.none,
            "acquisition_lock_timeout": gw.config["group.share.record.lock.duration.ms"],
            "responses": [{"topic_id": t, "partitions": parts} for t, parts in responses.items()],
            "node_endpoints": _endpoints(gw) if endpoints else [],
        },
    )


def _fetch_error(v: int, code: ErrorCode, message: str) -> Any:
    return build_response(
        ApiKey.SHARE_FETCH,
        v,
        {"error_code": code, "error_message": message, "acquisition_lock_timeout": 0, "responses": [], "node_endpoints": []},
    )


# -- ShareAcknowledge -----------------------------------------------------------------------------------


async def share_acknowledge(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    acks = _acknowledgements(b.topics)
    invalid = _invalid_ids(b.group_id, b.member_id)
    if invalid is not None:
        return _acknowledge_error(v, *invalid)
    try:
        session = gw.share_sessions.acknowledge(b.group_id, b.member_id, b.share_session_epoch, request.connection_id)
    except SessionError as exc:
        return _acknowledge_error(v, exc.error_code, exc.message)
    outcomes = await call_leaders(gw, session, [], acks)
    if b.share_session_epoch == FINAL_EPOCH:
        await end_session(gw, session)
    responses: dict[Any, list[dict[str, Any]]] = {}
    endpoints = False
    for (topic_id, p), (out, leader_epoch) in outcomes.items():
        code = out.error_code if out.error_code != ErrorCode.none else out.acknowledge_error_code
        message = out.error_message if out.error_code != ErrorCode.none else out.acknowledge_error_message
        endpoints = endpoints or code == ErrorCode.not_leader_or_follower
        responses.setdefault(topic_id, []).append(
            {
                "partition_index": p,
                "error_code": code,
                "error_message": message,
                "current_leader": {"leader_id": gw.leadership.broker_for(p), "leader_epoch": leader_epoch},
            }
        )
    return build_response(
        ApiKey.SHARE_ACKNOWLEDGE,
        v,
        {
            "error_code": ErrorCode.none,
            "responses": [{"topic_id": t, "partitions": parts} for t, parts in responses.items()],
            "node_endpoints": _endpoints(gw) if endpoints else [],
        },
    )


def _acknowledge_error(v: int, code: ErrorCode, message: str) -> Any:
    return build_response(
        ApiKey.SHARE_ACKNOWLEDGE, v, {"error_code": code, "error_message": message, "responses": [], "node_endpoints": []}
    )


def _endpoints(gw: Any) -> list[dict[str, Any]]:
    return [{"node_id": g.node_id, "host": g.host, "port": g.port} for g in gw.leadership.gateways]


# -- calling the partition leaders --------------------------------------------------------------------------


async def call_leaders(
    gw: Any,
    session: ShareSession,
    fetching: list[SharePartitionId],
    acks: dict[SharePartitionId, tuple[AcknowledgementBatch, ...]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 2**31 - 1,
    max_records: int = 500,
) -> dict[SharePartitionId, tuple[ShareOutcome, int]]:
    """Acknowledge and fetch on every leader concerned: (outcome, leader epoch) per partition."""
    keys = list(dict.fromkeys([*fetching, *acks]))
    wanted = set(fetching)
    await refresh_if_unknown(gw, [], [topic_id for topic_id, _ in keys])
    results: dict[SharePartitionId, tuple[ShareOutcome, int]] = {}
    per_actor: dict[str, list[tuple[SharePartitionId, ShareItem]]] = {}
    # Malformed acknowledgements are answered here; their partition may still be fetched.
    rejected = {key: problem for key, batches in acks.items() if (problem := invalid_acknowledgements(batches))}
    acks = {key: batches for key, batches in acks.items() if key not in rejected}
    keys = [key for key in keys if key in wanted or key in acks]
    for key, problem in rejected.items():
        results[key] = (ShareOutcome(acknowledge_error_code=ErrorCode.invalid_request, acknowledge_error_message=problem), -1)
    for key in keys:
        topic_id, p = key
        acking = key in acks
        info = gw.leadership.topics_by_id.get(topic_id)
        if info is None or not 0 <= p < info.partitions:
            out = ShareOutcome()
            code = ErrorCode.unknown_topic_id if info is None else ErrorCode.unknown_topic_or_partition
            out.fail(code, None, acking)
            results[key] = (out, -1)
            continue
        route = gw.router.leader(info.name, p)
        if route is None:
            out = ShareOutcome()
            out.fail(ErrorCode.not_leader_or_follower, None, acking)
            results[key] = (out, -1)
            continue
        actor, epoch = route
        item = ShareItem(info.name, p, epoch, topic_id, acks.get(key, ()), key in wanted)
        per_actor.setdefault(actor, []).append((key, item))
    if not per_actor:
        return results

    calls: dict[str, tuple[Any, str, asyncio.Future]] = {}
    for actor, entries in per_actor.items():
        handle = gw.router.handle(actor)
        wake_key = f"{gw.node_id}:{next(_wake_keys)}"
        call = ShareFetchCall(
            session.group_id,
            session.member_id,
            tuple(item for _, item in entries),
            max_wait_ms=max_wait_ms if wanted else 0,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            max_records=max_records,
            wake_key=wake_key,
            gateway=gw.node_id,
        )
        task = asyncio.ensure_future(answer_or_none(handle.share_fetch.remote(call) if handle is not None else None))
        calls[actor] = (handle, wake_key, task)
        session.in_flight[task] = (handle, wake_key)
        task.add_done_callback(lambda t: session.in_flight.pop(t, None))

    # Shielded: should the client go away mid-request, the calls still finish, and the session's
    # end (on disconnect) waits for them before releasing the member's records.
    pending = {task: actor for actor, (_, _, task) in calls.items()}
    woken = False
    while pending:
        done, _ = await asyncio.shield(asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED))
        for task in done:
            pending.pop(task)
        if pending and not woken and any(o and any(x.acquired for x in o) for o in (t.result() for t in done)):
            woken = True
            for task, actor in pending.items():
                handle, wake_key, _ = calls[actor]
                if handle is not None:
                    handle.share_wake.remote([wake_key])

    stale = False
    for actor, entries in per_actor.items():
        answered = calls[actor][2].result()
        for i, (key, item) in enumerate(entries):
            if answered is None:
                out = ShareOutcome()
                out.fail(ErrorCode.not_leader_or_follower, "the partition's leader is gone", bool(item.acknowledgements))
            else:
                out = answered[i]
            if key in rejected:
                out.acknowledge_error_code, out.acknowledge_error_message = ErrorCode.invalid_request, rejected[key]
            stale = stale or out.error_code == ErrorCode.not_leader_or_follower
            results[key] = (out, item.epoch)
    if stale:
        asyncio.ensure_future(gw.router.refresh())
    return results


# -- ending sessions ----------------------------------------------------------------------------------------


async def end_session(gw: Any, session: ShareSession) -> None:
    """Release what the member holds on the session's partitions, once its calls are back; when
    the group has no session left here, its share partitions are evicted from their leaders."""
    if session.in_flight:
        for handle, wake_key in session.in_flight.values():
            if handle is not None:
                handle.share_wake.remote([wake_key])  # no need to wait out their MaxWaitMs
        await asyncio.wait(list(session.in_flight), timeout=60)
    await _on_leaders(gw, session.partitions, "share_release", session.group_id, session.member_id)
    emptied = gw.share_sessions.group_emptied(session.group_id)
    if emptied:
        # Kafka's onGroupEmpty: the next fetch reads the durable state again, so a deleted or
        # altered share state is never served from a stale cache. The leader evicts only once
        # no gateway has a session of the group (members elsewhere may hold records).
        await _on_leaders(gw, emptied, "share_evict", session.group_id, gateway=gw.node_id)


async def _on_leaders(gw: Any, partitions: Iterable[SharePartitionId], method: str, *args: Any, **kwargs: Any) -> None:
    """Call method(*args, [(topic, partition), ...], **kwargs) on the leader of each partition, in parallel."""
    per_actor: dict[str, list[tuple[str, int]]] = {}
    for topic_id, p in partitions:
        info = gw.leadership.topics_by_id.get(topic_id)
        route = gw.router.leader(info.name, p) if info is not None else None
        if route is not None:
            per_actor.setdefault(route[0], []).append((info.name, p))
    calls = []
    for actor, items in per_actor.items():
        handle = gw.router.handle(actor)
        if handle is not None:
            calls.append(answer_or_none(getattr(handle, method).remote(*args, items, **kwargs)))
    await asyncio.gather(*calls)


def connection_closed(gw: Any, connection_id: int) -> None:
    for session in gw.share_sessions.disconnected(connection_id):
        asyncio.ensure_future(end_session(gw, session))
