"""Classic group APIs: every version turned into the coordinator's requests and back.

How a call reaches the coordinator of its group (batching, streaming for JoinGroup and SyncGroup,
retries, fan-out over partitions) is the CoordinatorClient's (`gw.coordinators`); this module
translates Kafka requests to calls and outcomes to Kafka responses.
"""

from __future__ import annotations

import asyncio
import functools
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

from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import answer_shape, build_response
from cluster.gateway.connection import Request, shared_answer
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import ms, partition_known, topic_names


# Kafka's GroupCoordinatorService refuses an empty group id on these four before any coordinator
# sees it; OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups accept it "for backwards
# compatibility" (only a null id, which these versions cannot send, is INVALID_GROUP_ID).
def _invalid(group_id: str) -> bool:
    return group_id == ""


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -------------------------------------------------


async def join_group(gw: GatewayContext, request: Request) -> Any:
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
    if _invalid(b.group_id):
        outcome = JoinGroupResponse(ErrorCode.invalid_group_id, member_id=b.member_id)
    else:
        outcome = await gw.coordinators.group(Op.JOIN, b.group_id, req)
    if isinstance(outcome, Failed):  # Kafka's error path: a fresh response, member id ""
        outcome = JoinGroupResponse(outcome.error_code, member_id="")
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


async def sync_group(gw: GatewayContext, request: Request) -> Any:
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
    outcome = (
        SyncGroupResponse(ErrorCode.invalid_group_id)
        if _invalid(b.group_id)
        else await gw.coordinators.group(Op.SYNC, b.group_id, req)
    )
    if isinstance(outcome, Failed):
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


async def heartbeat(gw: GatewayContext, request: Request) -> Any:
    b = request.body
    req = HeartbeatRequest(b.group_id, b.generation_id, b.member_id, getattr(b, "group_instance_id", None))
    if _invalid(b.group_id):
        error = ErrorCode.invalid_group_id
    else:
        error = (await gw.coordinators.group(Op.HEARTBEAT, b.group_id, req)).error_code
        if error == ErrorCode.coordinator_load_in_progress:
            # Kafka: "The group is still loading, so blindly respond". A member must not drop out
            # over a failover it cannot see (aiokafka's heartbeat task dies on this code).
            error = ErrorCode.none
    return _heartbeat_response(request.api_version, error)


@functools.cache
def _heartbeat_response(version: int, error: ErrorCode) -> Any:
    """A heartbeat's answer is a frozen entity, the same for every heartbeat with this outcome:
    built and encoded once (building one from a dict by reflection was about 7 us a heartbeat)."""
    return shared_answer(build_response(ApiKey.HEARTBEAT, version, {"error_code": error}))


async def leave_group(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    if v >= 3:
        members = tuple(LeavingMember(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in b.members)
    else:
        members = (LeavingMember(b.member_id),)
    if _invalid(b.group_id):
        return build_response(ApiKey.LEAVE_GROUP, v, {"error_code": ErrorCode.invalid_group_id, "members": []})
    outcome = await gw.coordinators.group(Op.LEAVE, b.group_id, LeaveGroupRequest(b.group_id, members))
    if isinstance(outcome, Failed):
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


async def offset_commit(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    names = await topic_names(gw, b.topics, v >= 10)
    with_epoch = v >= 6
    known: list[tuple[str, tuple[CommitPartition, ...]]] = []
    answers: dict[tuple[Any, int], ErrorCode] = {}  # keyed by name, or by topic id when it names nothing
    for t, name in zip(b.topics, names):
        parts = []
        for p in t.partitions:
            index = p.partition_index
            if name is None:  # v10: an id this cluster does not know (Kafka: UNKNOWN_TOPIC_ID)
                answers[(t.topic_id, index)] = ErrorCode.unknown_topic_id
            elif partition_known(gw, name, index):
                epoch = p.committed_leader_epoch if with_epoch else -1
                parts.append(CommitPartition(index, p.committed_offset, epoch, p.committed_metadata))
            else:
                answers[(name, index)] = ErrorCode.unknown_topic_or_partition
        if parts:
            known.append((name, tuple(parts)))
    if known:
        req = OffsetCommitRequest(
            group_id=b.group_id,
            generation_id=b.generation_id_or_member_epoch,
            member_id=b.member_id,
            group_instance_id=b.group_instance_id if v >= 7 else None,
            topics=tuple(known),
            retention_time_ms=ms(b.retention_time) if 2 <= v <= 4 else -1,
            api_version=v,
        )
        outcome = await gw.coordinators.group(Op.COMMIT, b.group_id, req)
        if isinstance(outcome, Failed):
            for topic, parts in known:
                for p in parts:
                    answers[(topic, p.partition)] = outcome.error_code
        else:
            for topic, outcomes in outcome.topics:
                for partition, error in outcomes:
                    answers[(topic, partition)] = error
    answer = answer_shape(ApiKey.OFFSET_COMMIT, v)
    topic = answer.of("topics")
    # v10 names topics by id, in the request and in the answer (KIP-848's topic ids).
    return answer(topics=tuple(
        topic(**({"topic_id": t.topic_id} if v >= 10 else {"name": t.name}),
              partitions=tuple(_committed(v, p.partition_index, answers[(name or t.topic_id, p.partition_index)])
                               for p in t.partitions))
        for t, name in zip(b.topics, names)
    ))


# An OffsetCommit answer is built from typed values (answers.py): by `build_response` from dicts it
# was about 4.5 us of the handler's 8.7 (in process, one partition), the largest part of what a
# commit costs the gateway more than a heartbeat.


@functools.lru_cache(maxsize=4096)
def _committed(version: int, partition: int, error: Any) -> Any:
    """One partition's answer: a frozen entity, so one per (version, partition, outcome) serves all."""
    code = error if isinstance(error, ErrorCode) else ErrorCode(int(error))
    return answer_shape(ApiKey.OFFSET_COMMIT, version).of("topics").of("partitions")(partition_index=partition, error_code=code)


async def _fetch_one_group(
    gw: GatewayContext, group_id: str, wanted: Any, require_stable: bool, version: int, group: Any = None
) -> OffsetFetchResponse:
    """wanted: ((topic name, partitions), ...), or None for every committed offset. From v9 a
    consumer-protocol member fetches as itself (`group`'s member id and epoch)."""
    member_id, member_epoch = getattr(group, "member_id", None), getattr(group, "member_epoch", -1)
    req = OffsetFetchRequest(group_id, wanted, require_stable, member_id, member_epoch)
    outcome = await gw.coordinators.group(Op.FETCH_OFFSETS, group_id, req)
    if isinstance(outcome, Failed):
        if version >= 2:  # a top-level error code exists: Kafka's groupError lists no partitions
            return OffsetFetchResponse(group_id, outcome.error_code, ())
        failed = tuple(
            (name, tuple(_failed_partition(p, outcome.error_code) for p in partitions)) for name, partitions in (wanted or ())
        )
        return OffsetFetchResponse(group_id, outcome.error_code, failed)
    return outcome


def _failed_partition(partition: int, error: ErrorCode) -> FetchedOffset:
    return FetchedOffset(partition, -1, -1, "", error)


def _partitions_out(parts: Any) -> list[dict[str, Any]]:
    return [
        {
            "partition_index": o.partition,
            "committed_offset": o.offset,
            "committed_leader_epoch": o.leader_epoch,
            "metadata": o.metadata,
            "error_code": o.error_code,
        }
        for o in parts
    ]


def _topics_out(response: OffsetFetchResponse) -> list[dict[str, Any]]:
    return [{"name": topic, "partitions": _partitions_out(parts)} for topic, parts in response.topics]


async def _fetch_group_by_ids(gw: GatewayContext, group: Any, require_stable: bool, version: int) -> dict[str, Any]:
    """OffsetFetch v10's group: topics named by id. An id this cluster does not know answers
    UNKNOWN_TOPIC_ID for its partitions; of every committed offset (no topics asked), a topic
    that has no id any more (deleted) is left out, as a client naming topics by id cannot use it."""
    unknown: list[Any] = []
    wanted = None
    if group.topics is not None:
        resolved = []
        for t, name in zip(group.topics, await topic_names(gw, group.topics, by_id=True)):
            if name is None:
                unknown.append(t)
            else:
                resolved.append((name, tuple(t.partition_indexes)))
        wanted = tuple(resolved)
    result = await _fetch_one_group(gw, group.group_id, wanted, require_stable, version, group) \
        if wanted is None or wanted else OffsetFetchResponse(group.group_id, ErrorCode.none, ())
    topics = gw.leadership.topics
    out = [{"topic_id": topics[name].topic_id, "partitions": _partitions_out(parts)}
           for name, parts in result.topics if name in topics]
    out += [{"topic_id": t.topic_id,
             "partitions": _partitions_out(_failed_partition(p, ErrorCode.unknown_topic_id) for p in t.partition_indexes)}
            for t in unknown]
    return {"group_id": group.group_id, "topics": out, "error_code": result.error_code}


def _wanted(topics: Any) -> Any:
    return None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)


async def offset_fetch(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    require_stable = bool(getattr(b, "require_stable", False))
    if v >= 10:
        groups = await asyncio.gather(*(_fetch_group_by_ids(gw, g, require_stable, v) for g in b.groups))
        return build_response(ApiKey.OFFSET_FETCH, v, {"groups": list(groups)})
    if v >= 8:
        results = await asyncio.gather(
            *(_fetch_one_group(gw, g.group_id, _wanted(g.topics), require_stable, v, g) for g in b.groups)
        )
        groups = [{"group_id": r.group_id, "topics": _topics_out(r), "error_code": r.error_code} for r in results]
        return build_response(ApiKey.OFFSET_FETCH, v, {"groups": groups})
    result = await _fetch_one_group(gw, b.group_id, _wanted(b.topics), require_stable, v)
    return build_response(ApiKey.OFFSET_FETCH, v, {"topics": _topics_out(result), "error_code": result.error_code})


# -- DescribeGroups / ListGroups / DeleteGroups ---------------------------------------------------------


async def describe_groups(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    per_group = await gw.coordinators.per_group(Op.DESCRIBE, b.groups)
    groups = []
    for group_id in b.groups:
        d = per_group[group_id]
        if isinstance(d, Failed):
            groups.append({"error_code": d.error_code, "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": []})
            continue
        error, message = d.error_code, d.error_message
        if error == ErrorCode.group_id_not_found and v < 6:
            error, message = ErrorCode.none, None  # before v6 an unknown group is only Dead (KIP-1043)
        groups.append(
            {
                "error_code": error,
                "error_message": message,
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


async def list_groups(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    states = tuple(getattr(b, "states_filter", ()) or ())
    types = tuple(getattr(b, "types_filter", ()) or ())
    listing = await gw.coordinators.list_groups(states, types)
    groups = [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state, "group_type": g.group_type}
        for g in listing.groups
    ]
    return build_response(ApiKey.LIST_GROUPS, v, {"error_code": listing.error_code, "groups": groups})


async def delete_groups(gw: GatewayContext, request: Request) -> Any:
    b, v = request.body, request.api_version
    per_group = await gw.groups.delete_groups(b.groups_names)
    results = [{"group_id": g, "error_code": per_group[g].error_code} for g in b.groups_names]
    return build_response(ApiKey.DELETE_GROUPS, v, {"results": results})
