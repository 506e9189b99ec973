"""Classic group APIs: every version turned into the coordinator's requests and back.

A group lives on `__consumer_offsets` partition abs(javaHash(group id)) % partitions; the request
goes to the actor leading it. JoinGroup and SyncGroup may park, so they travel in streaming
batches; everything else in plain batches. APIs naming several groups (DescribeGroups,
DeleteGroups, OffsetFetch v8+) are split per partition, sent in parallel and merged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import (
    CommitPartition,
    FetchedOffset,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.hashing import group_partition

from cluster.actors.common import ActorKind
from cluster.actors.coordinator_host import CoordinatorError
from cluster.gateway.apis import ApiKey, build_response
from cluster.gateway.connection import Request
from cluster.gateway.handlers.common import partition_known, refresh_if_unknown
from cluster.routing import ACTOR_GONE, NoLeader
from cluster.metadata import CONSUMER_OFFSETS


def ms(value: Any) -> int:
    return round(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def coordinator_partition(gw: Any, group_id: str) -> int:
    return group_partition(group_id, gw.config["offsets.topic.num.partitions"])


async def call_coordinator(gw: Any, partition: int, op: str, payload: Any, *, parks: bool = False) -> Any:
    """The outcome of op on the coordinator of partition, or a CoordinatorError."""
    try:
        return await gw.router.call_leader(
            CONSUMER_OFFSETS,
            partition,
            "execute_stream" if parks else "execute",
            lambda epoch: (op, partition, epoch, payload),
            lambda outcome: isinstance(outcome, CoordinatorError) and outcome.error_code == ErrorCode.not_coordinator,
        )
    except NoLeader as exc:
        return CoordinatorError(ErrorCode.coordinator_not_available, str(exc))


async def call_group(gw: Any, group_id: str, op: str, payload: Any, *, parks: bool = False) -> Any:
    return await call_coordinator(gw, coordinator_partition(gw, group_id), op, payload, parks=parks)


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -------------------------------------------------


async def join_group(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    session = ms(b.session_timeout)
    rebalance = ms(b.rebalance_timeout) if v >= 1 else session
    req = JoinGroupRequest(
        group_id=b.group_id,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance if rebalance >= 0 else session,
        member_id=b.member_id,
        group_instance_id=getattr(b, "group_instance_id", None),
        protocol_type=b.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in b.protocols),
        client_id=request.client_id or "",
        client_host=f"/{request.client_host}",
        reason=getattr(b, "reason", None),
        requires_known_member_id=v >= 4,
        supports_skip_assignment=v >= 9,
    )
    outcome = await call_group(gw, b.group_id, "join", req, parks=True)
    if isinstance(outcome, CoordinatorError):
        outcome = JoinGroupResponse(outcome.error_code, member_id=b.member_id)
    return build_response(
        ApiKey.JOIN_GROUP,
        v,
        {
            "error_code": outcome.error_code,
            "generation_id": outcome.generation_id,
            "protocol_type": outcome.protocol_type,
            "protocol_name": outcome.protocol_name,
            "leader": outcome.leader,
            "skip_assignment": outcome.skip_assignment,
            "member_id": outcome.member_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                for m in outcome.members
            ],
        },
    )


async def sync_group(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    req = SyncGroupRequest(
        group_id=b.group_id,
        generation_id=b.generation_id,
        member_id=b.member_id,
        group_instance_id=getattr(b, "group_instance_id", None),
        protocol_type=getattr(b, "protocol_type", None),
        protocol_name=getattr(b, "protocol_name", None),
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in b.assignments),
    )
    outcome = await call_group(gw, b.group_id, "sync", req, parks=True)
    if isinstance(outcome, CoordinatorError):
        outcome = SyncGroupResponse(outcome.error_code)
    return build_response(
        ApiKey.SYNC_GROUP,
        v,
        {
            "error_code": outcome.error_code,
            "protocol_type": outcome.protocol_type,
            "protocol_name": outcome.protocol_name,
            "assignment": outcome.assignment,
        },
    )


async def heartbeat(gw: Any, request: Request) -> Any:
    b = request.body
    req = HeartbeatRequest(b.group_id, b.generation_id, b.member_id, getattr(b, "group_instance_id", None))
    outcome = await call_group(gw, b.group_id, "heartbeat", req)
    return build_response(ApiKey.HEARTBEAT, request.api_version, {"error_code": outcome.error_code})


async def leave_group(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    if v >= 3:
        members = tuple(LeavingMember(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in b.members)
    else:
        members = (LeavingMember(b.member_id),)
    outcome = await call_group(gw, b.group_id, "leave", LeaveGroupRequest(b.group_id, members))
    if isinstance(outcome, CoordinatorError):
        return build_response(ApiKey.LEAVE_GROUP, v, {"error_code": outcome.error_code, "members": []})
    error = outcome.error_code
    if v < 3 and error == ErrorCode.none and outcome.members:
        error = outcome.members[0].error_code  # one member per request: its error is the request's
    return build_response(
        ApiKey.LEAVE_GROUP,
        v,
        {
            "error_code": error,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": m.error_code}
                for m in outcome.members
            ],
        },
    )


# -- offsets ----------------------------------------------------------------------------------------


async def offset_commit(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    await refresh_if_unknown(gw, [t.name for t in b.topics])
    known: list[tuple[str, tuple[CommitPartition, ...]]] = []
    answers: dict[tuple[str, int], ErrorCode] = {}
    for t in b.topics:
        parts = []
        for p in t.partitions:
            if not partition_known(gw, t.name, p.partition_index):
                answers[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            parts.append(
                CommitPartition(
                    p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
                )
            )
        if parts:
            known.append((t.name, tuple(parts)))
    if known:
        retention = ms(b.retention_time) if 2 <= v <= 4 else -1
        req = OffsetCommitRequest(
            group_id=b.group_id,
            generation_id=b.generation_id_or_member_epoch,
            member_id=b.member_id,
            group_instance_id=getattr(b, "group_instance_id", None),
            topics=tuple(known),
            retention_time_ms=retention,
            api_version=v,
        )
        outcome = await call_group(gw, b.group_id, "commit", req)
        for topic, parts in known:
            for p in parts:
                if isinstance(outcome, CoordinatorError):
                    answers[(topic, p.partition)] = outcome.error_code
        if not isinstance(outcome, CoordinatorError):
            for topic, parts in outcome.topics:
                for partition, error in parts:
                    answers[(topic, partition)] = error
    return build_response(
        ApiKey.OFFSET_COMMIT,
        v,
        {
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": answers[(t.name, p.partition_index)]}
                        for p in t.partitions
                    ],
                }
                for t in b.topics
            ]
        },
    )


async def _fetch_one_group(gw: Any, group_id: str, topics: Any, require_stable: bool) -> OffsetFetchResponse:
    wanted = None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)
    outcome = await call_group(gw, group_id, "fetch_offsets", OffsetFetchRequest(group_id, wanted, require_stable))
    if isinstance(outcome, CoordinatorError):
        failed = tuple(
            (name, tuple(_failed_partition(p, outcome.error_code) for p in partitions)) for name, partitions in (wanted or ())
        )
        return OffsetFetchResponse(group_id, outcome.error_code, failed)
    return outcome


def _failed_partition(partition: int, error: ErrorCode) -> FetchedOffset:
    return FetchedOffset(partition, -1, -1, "", error)


def _topics_out(response: OffsetFetchResponse) -> list[dict[str, Any]]:
    return [
        {
            "name": topic,
            "partitions": [
                {
                    "partition_index": o.partition,
                    "committed_offset": o.offset,
                    "committed_leader_epoch": o.leader_epoch,
                    "metadata": o.metadata,
                    "error_code": o.error_code,
                }
                for o in parts
            ],
        }
        for topic, parts in response.topics
    ]


async def offset_fetch(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    require_stable = bool(getattr(b, "require_stable", False))
    if v >= 8:
        results = await asyncio.gather(*(_fetch_one_group(gw, g.group_id, g.topics, require_stable) for g in b.groups))
        groups = [{"group_id": r.group_id, "topics": _topics_out(r), "error_code": r.error_code} for r in results]
        return build_response(ApiKey.OFFSET_FETCH, v, {"groups": groups})
    result = await _fetch_one_group(gw, b.group_id, b.topics, require_stable)
    return build_response(ApiKey.OFFSET_FETCH, v, {"topics": _topics_out(result), "error_code": result.error_code})


# -- DescribeGroups / ListGroups / DeleteGroups ---------------------------------------------------------


async def per_partition(gw: Any, group_ids: list[str], op: str) -> dict[str, Any]:
    """Run op once per coordinator partition over the groups it owns; outcome per group id."""
    by_partition: dict[int, list[str]] = {}
    for g in dict.fromkeys(group_ids):
        by_partition.setdefault(coordinator_partition(gw, g), []).append(g)
    outcomes = await asyncio.gather(*(call_coordinator(gw, p, op, tuple(ids)) for p, ids in by_partition.items()))
    per_group: dict[str, Any] = {}
    for ids, outcome in zip(by_partition.values(), outcomes):
        for i, group_id in enumerate(ids):
            per_group[group_id] = outcome if isinstance(outcome, CoordinatorError) else outcome[i]
    return per_group


async def describe_groups(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    per_group = await per_partition(gw, list(b.groups), "describe")
    groups = []
    for group_id in b.groups:
        d = per_group[group_id]
        if isinstance(d, CoordinatorError):
            groups.append({"error_code": d.error_code, "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": []})
            continue
        groups.append(
            {
                "error_code": d.error_code,
                "group_id": d.group_id,
                "group_state": d.state,
                "protocol_type": d.protocol_type,
                "protocol_data": d.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in d.members
                ],
            }
        )
    return build_response(ApiKey.DESCRIBE_GROUPS, v, {"groups": groups})


async def list_groups(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    states = tuple(getattr(b, "states_filter", ()) or ())
    types = tuple(getattr(b, "types_filter", ()) or ())
    coordinators = [
        handle for name, handle in gw.leadership.handles.items() if name.startswith(ActorKind.GROUP_COORDINATOR.value)
    ]
    answers = await asyncio.gather(*(h.list_groups.remote(states, types) for h in coordinators), return_exceptions=True)
    error = ErrorCode.none
    groups = []
    for answer in answers:
        if isinstance(answer, BaseException):
            if not isinstance(answer, ACTOR_GONE):
                raise answer
            error = ErrorCode.coordinator_not_available
            continue
        actor_error, listed = answer
        if actor_error is not None:
            error = actor_error.error_code
        groups += [
            {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state, "group_type": g.group_type}
            for g in listed
        ]
    groups.sort(key=lambda g: g["group_id"])
    return build_response(ApiKey.LIST_GROUPS, v, {"error_code": error, "groups": groups})


async def delete_groups(gw: Any, request: Request) -> Any:
    b, v = request.body, request.api_version
    per_group = await per_partition(gw, list(b.groups_names), "delete")
    results = [{"group_id": g, "error_code": per_group[g].error_code} for g in b.groups_names]
    return build_response(ApiKey.DELETE_GROUPS, v, {"results": results})
