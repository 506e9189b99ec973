"""Heartbeat and LeaveGroup (seed 000 §5, §7.2).

Heartbeat by state (Kafka 4.x GroupMetadataManager.classicGroupHeartbeatToClassicGroup): Empty ->
UNKNOWN_MEMBER_ID; PreparingRebalance -> refresh the session, REBALANCE_IN_PROGRESS (rejoin);
CompletingRebalance -> refresh the session, REBALANCE_IN_PROGRESS (SPEC.md §2, as the seed's
coordinator answers; Kafka 4.x answers NONE); Stable -> refresh the session, NONE. A member may
heartbeat between its JoinGroup answer and its SyncGroup: the leader while its assignor runs,
which may take longer than its session timeout.

LeaveGroup removes members (by member id, or by group.instance.id with an unknown member id, as
admin tools do); Stable | CompletingRebalance -> PreparingRebalance; PreparingRebalance -> try to
complete the join phase; the last member gone -> Empty.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
)
from coordinator.classic.rebalance import (
    drop_member,
    heartbeat_key,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    reschedule_heartbeat,
)
from coordinator.classic.state import ClassicGroupState as S
from coordinator.context import OperationContext


def heartbeat(ctx: OperationContext, req: HeartbeatRequest) -> HeartbeatResponse:
    group = ctx.group(req.group_id)
    if not isinstance(group, ClassicGroup):
        return HeartbeatResponse(ErrorCode.unknown_member_id)
    if group.is_in(S.DEAD):
        return HeartbeatResponse(ErrorCode.coordinator_not_available)
    error = group.validate_member(req.member_id, req.group_instance_id)
    if error is not None:
        return HeartbeatResponse(error)
    if req.generation_id != group.generation_id:
        return HeartbeatResponse(ErrorCode.illegal_generation)
    if group.is_in(S.EMPTY):
        return HeartbeatResponse(ErrorCode.unknown_member_id)
    # A heartbeat only moves the member's session deadline: a timer, not state.
    reschedule_heartbeat(ctx, group, req.member_id)
    if group.is_in(S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
        return HeartbeatResponse(ErrorCode.rebalance_in_progress)
    return HeartbeatResponse(ErrorCode.none)


def leave_group(ctx: OperationContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    current = ctx.group(req.group_id)
    if not isinstance(current, ClassicGroup):
        return LeaveGroupResponse(ErrorCode.unknown_member_id)
    if current.is_in(S.DEAD):
        return LeaveGroupResponse(ErrorCode.coordinator_not_available)
    group = ctx.edit(req.group_id)
    answers: list[LeftMember] = []
    for leaving in req.members:
        if leaving.member_id == UNKNOWN_MEMBER_ID:
            static_id = group.static_member_id(leaving.group_instance_id)
            if static_id is None:
                answers.append(LeftMember(leaving.member_id, leaving.group_instance_id, ErrorCode.unknown_member_id))
                continue
            drop_member(ctx, group, static_id)
        elif group.is_pending_member(leaving.member_id):
            group.remove(leaving.member_id)
            ctx.cancel(heartbeat_key(group.group_id, leaving.member_id))
        else:
            error = group.validate_member(leaving.member_id, leaving.group_instance_id)
            if error is not None:
                answers.append(LeftMember(leaving.member_id, leaving.group_instance_id, error))
                continue
            drop_member(ctx, group, leaving.member_id)
        answers.append(LeftMember(leaving.member_id, leaving.group_instance_id, ErrorCode.none))

    if any(a.error_code == ErrorCode.none for a in answers):
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            maybe_prepare_rebalance_or_complete_join(ctx, group, "members left the group")
        elif group.is_in(S.PREPARING_REBALANCE):
            maybe_complete_join_phase(ctx, group)
    return LeaveGroupResponse(ErrorCode.none, tuple(answers))


