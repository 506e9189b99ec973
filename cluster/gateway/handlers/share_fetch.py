"""ShareFetch and ShareAcknowledge (KIP-932): share sessions here, in-flight records on the leaders.

Version 2 (Kafka 4.2) adds RENEW acknowledgements with the `IsRenewAck` flag (KIP-1222: a
renewing ShareFetch only acknowledges, it fetches nothing) and ShareFetch's `ShareAcquireMode`
(KIP-1206: record_limit makes MaxRecords exact); ShareAcknowledge v2 answers the acquisition
lock timeout, as ShareFetch does.

A request runs in the member's share session on this gateway (share_sessions.py). This module
checks it and translates it; `gw.partitions` (cluster/clients/partition_leader.py) sends each
leader concerned one call carrying the acknowledgements and what to fetch, long-polls, and
wakes the other leaders when one answers with records (cluster/share/manager.py answers).

When a session ends (final epoch, or the connection that created it closed), what the member
holds on the session's partitions is released at once, after the session's pending calls have
come back, as Kafka's ShareSessionCache does through its listener. A session replaced by a new
epoch 0 releases nothing: the member keeps its records (Kafka's newContext removes it quietly).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcknowledgementBatch

from cluster.calls import ShareFetchSpec, SharePartitionCall
from cluster.gateway.context import GatewayContext
from cluster.leadership import leader_broker
from cluster.group_configs import lock_duration_ms
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request
from cluster.gateway.handlers.common import ms, refresh_if_unknown
from cluster.gateway.share_sessions import FINAL_EPOCH, SessionError, SharePartitionId, ShareSession
from cluster.share import fetch_policy
from cluster.share.requests import ShareOutcome

log = logging.getLogger(__name__)


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


# Acknowledge types a request version may carry: RENEW (4) from v2 on (KAFKA-19844).
MAX_ACK_TYPE_V1 = 3
MAX_ACK_TYPE_V2 = 4

# ShareFetch v2's ShareAcquireMode ids (Kafka's ShareAcquireMode.forId).
BATCH_OPTIMIZED = 0
RECORD_LIMIT = 1


def max_ack_type(version: int) -> int:
    return MAX_ACK_TYPE_V2 if version >= 2 else MAX_ACK_TYPE_V1


def invalid_acknowledgements(batches: tuple[AcknowledgementBatch, ...], max_type: int = MAX_ACK_TYPE_V1) -> str | None:
    """Why these acknowledgement batches are malformed (INVALID_REQUEST), or None.

    Kafka's ShareFetch/ShareAcknowledge validation: ordered, non-overlapping batches, each with
    one type or one per offset, types 0 to `max_type` (RENEW, 4, only from version 2).
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
        if any(not 0 <= t <= max_type for t in b.acknowledge_types):
            return f"unknown acknowledge type in {list(b.acknowledge_types)}"
        previous_last = b.last_offset
    return None


# -- ShareFetch ---------------------------------------------------------------------------------------


def _invalid_v2_fetch(b: Any) -> str | None:
    """ShareFetch v2's own checks (KafkaApis.handleShareFetchRequest): a renewing fetch asks for
    nothing (KAFKA-19844), and the acquire mode must be one Kafka knows (KIP-1206)."""
    if b.is_renew_ack and (b.max_wait.total_seconds() or b.min_bytes or b.max_bytes or b.max_records):
        return "MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0 when IsRenewAck is set."
    if b.share_acquire_mode not in (BATCH_OPTIMIZED, RECORD_LIMIT):
        return f"Unknown share acquire mode id: {b.share_acquire_mode}"
    return None


async def share_fetch(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    acks = _acknowledgements(b.topics)
    invalid = _invalid_ids(b.group_id, b.member_id)
    if invalid is not None:
        return _fetch_error(v, *invalid)
    renewing = v >= 2 and b.is_renew_ack
    if v >= 2 and (problem := _invalid_v2_fetch(b)) is not None:
        return _fetch_error(v, ErrorCode.invalid_request, problem)
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
    # A renewing fetch only acknowledges: Kafka skips fetchMessages for it (KAFKA-19844).
    fetching = [] if final or renewing else session.rotated()
    outcomes = await call_leaders(
        gw,
        session,
        fetching,
        acks,
        max_wait_ms=ms(b.max_wait),
        min_bytes=b.min_bytes,
        max_bytes=b.max_bytes,
        max_records=fetch_policy.max_records(b.max_records),
        max_type=max_ack_type(v),
        record_limit=v >= 2 and b.share_acquire_mode == RECORD_LIMIT,
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
                "current_leader": {"leader_id": _leader_of(gw, topic_id, p), "leader_epoch": leader_epoch},
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
            "acquisition_lock_timeout": lock_duration_ms(gw.config, gw.leadership.group_configs.get(b.group_id)),
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


async def share_acknowledge(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    acks = _acknowledgements(b.topics)
    invalid = _invalid_ids(b.group_id, b.member_id)
    if invalid is not None:
        return _acknowledge_error(v, *invalid)
    try:
        session = gw.share_sessions.acknowledge(b.group_id, b.member_id, b.share_session_epoch)
    except SessionError as exc:
        return _acknowledge_error(v, exc.error_code, exc.message)
    outcomes = await call_leaders(gw, session, [], acks, max_type=max_ack_type(v))
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
                "current_leader": {"leader_id": _leader_of(gw, topic_id, p), "leader_epoch": leader_epoch},
            }
        )
    return build_response(
        ApiKey.SHARE_ACKNOWLEDGE,
        v,
        {
            "error_code": ErrorCode.none,
            # v2 (KAFKA-19892): the lock a RENEW restarted lasts this long, as ShareFetch tells.
            "acquisition_lock_timeout": lock_duration_ms(gw.config, gw.leadership.group_configs.get(b.group_id)),
            "responses": [{"topic_id": t, "partitions": parts} for t, parts in responses.items()],
            "node_endpoints": _endpoints(gw) if endpoints else [],
        },
    )


def _acknowledge_error(v: int, code: ErrorCode, message: str) -> Any:
    return build_response(
        ApiKey.SHARE_ACKNOWLEDGE,
        v,
        {"error_code": code, "error_message": message, "acquisition_lock_timeout": 0, "responses": [], "node_endpoints": []},
    )


def _endpoints(gw: GatewayContext) -> list[dict[str, Any]]:
    return [{"node_id": g.node_id, "host": g.host, "port": g.port} for g in gw.leadership.gateways]


# -- calling the partition leaders --------------------------------------------------------------------------


async def call_leaders(
    gw: GatewayContext,
    session: ShareSession,
    fetching: list[SharePartitionId],
    acks: dict[SharePartitionId, tuple[AcknowledgementBatch, ...]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 2**31 - 1,
    max_records: int = 500,
    max_type: int = MAX_ACK_TYPE_V1,
    record_limit: bool = False,
) -> dict[SharePartitionId, tuple[ShareOutcome, int]]:
    """Acknowledge and fetch on every leader concerned: (outcome, leader epoch) per partition;
    `max_type` the highest acknowledge type the request's version allows."""
    keys = list(dict.fromkeys([*fetching, *acks]))
    wanted = set(fetching)
    await refresh_if_unknown(gw, [], [topic_id for topic_id, _ in keys])
    results: dict[SharePartitionId, tuple[ShareOutcome, int]] = {}
    # Malformed acknowledgements are answered here; their partition may still be fetched.
    rejected = {key: problem for key, batches in acks.items() if (problem := invalid_acknowledgements(batches, max_type))}
    acks = {key: batches for key, batches in acks.items() if key not in rejected}
    keys = [key for key in keys if key in wanted or key in acks]
    for key, problem in rejected.items():
        results[key] = (ShareOutcome(acknowledge_error_code=ErrorCode.invalid_request, acknowledge_error_message=problem), -1)
    parts: list[tuple[SharePartitionId, SharePartitionCall]] = []
    for key in keys:
        topic_id, p = key
        info = gw.leadership.topics_by_id.get(topic_id)
        if info is None or not 0 <= p < info.partitions:
            out = ShareOutcome()
            code = ErrorCode.unknown_topic_id if info is None else ErrorCode.unknown_topic_or_partition
            out.fail(code, None, key in acks)
            results[key] = (out, -1)
            continue
        parts.append((key, SharePartitionCall(info.name, p, topic_id, acks.get(key, ()), key in wanted)))
    if not parts:
        return results

    spec = ShareFetchSpec(
        session.group_id,
        session.member_id,
        gateway=gw.node_id,
        max_wait_ms=max_wait_ms if wanted else 0,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records,
        record_limit=record_limit,
    )
    answers = await gw.partitions.share_fetch(
        spec, [part for _, part in parts], session.in_flight, closed=lambda: not gw.share_sessions.holds(session))
    for i, (out, epoch) in answers.items():
        key = parts[i][0]
        if key in rejected:
            out.acknowledge_error_code, out.acknowledge_error_message = ErrorCode.invalid_request, rejected[key]
        results[key] = (out, epoch)
    return results


# -- ending sessions ----------------------------------------------------------------------------------------


async def end_session(gw: GatewayContext, session: ShareSession) -> None:
    """Release what the member holds on the session's partitions, once its calls are back; when
    the group has no session left here, its share partitions are evicted from their leaders."""
    if session.in_flight:
        for actor, wake_key in session.in_flight.values():
            gw.partitions.share_wake(actor, [wake_key])  # no need to wait out their MaxWaitMs
        await asyncio.wait(list(session.in_flight), timeout=60)
    await gw.partitions.share_release(session.group_id, session.member_id, _named(gw, session.partitions))
    emptied = gw.share_sessions.group_emptied(session.group_id)
    if emptied:
        # Kafka's onGroupEmpty: the next fetch reads the durable state again, so a deleted or
        # altered share state is never served from a stale cache. The leader evicts only once
        # no gateway has a session of the group (members elsewhere may hold records).
        await gw.partitions.share_evict(session.group_id, _named(gw, emptied), gateway=gw.node_id)


def _named(gw: GatewayContext, partitions: Iterable[SharePartitionId]) -> list[tuple[str, int]]:
    """(topic name, partition) of each partition whose topic this gateway still knows."""
    named = []
    for topic_id, p in partitions:
        info = gw.leadership.topics_by_id.get(topic_id)
        if info is not None:
            named.append((info.name, p))
    return named


def connection_closed(gw: GatewayContext, connection_id: int) -> None:
    """Kafka's ClientConnectionDisconnectListener: end the sessions this connection created."""
    for session in gw.share_sessions.disconnected(connection_id):
        asyncio.ensure_future(end_session(gw, session))


def _leader_of(gw: GatewayContext, topic_id: Any, partition: int) -> int:
    info = gw.leadership.topics_by_id.get(topic_id)
    return leader_broker(gw.leadership, info.name, partition) if info is not None else gw.leadership.broker_for(partition)
