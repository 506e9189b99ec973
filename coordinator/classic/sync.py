"""SyncGroup by group state (seed 000 §4; Kafka 4.x classicGroupSyncToClassicGroup).

    Empty | unknown group      UNKNOWN_MEMBER_ID
    Dead                       COORDINATOR_NOT_AVAILABLE
    PreparingRebalance         REBALANCE_IN_PROGRESS (rejoin)
    CompletingRebalance        park the member; the leader's SyncGroup fills missing members with
                               empty assignments, stores the group (generation, members,
                               assignments) as a GroupMetadata record, moves to Stable and, once
                               the record is durable, answers every parked member
    Stable                     the member's assignment at once (it missed the answer)
Wrong generation: ILLEGAL_GENERATION; protocol type or name mismatch: INCONSISTENT_GROUP_PROTOCOL.
"""

from __future__ import annotations


from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import SyncGroupRequest, SyncGroupResponse
from coordinator.classic.rebalance import propagate_assignment, remove_pending_sync_member, reschedule_heartbeat
from coordinator.classic.state import ClassicGroupState as S
from coordinator.classic.records import group_metadata_record
from kernel.result import PARKED, RequestToken
from coordinator.context import OperationContext


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def validate_sync(group: ClassicGroup, req: SyncGroupRequest) -> ErrorCode | None:
    if group.is_in(S.DEAD):
        return ErrorCode.coordinator_not_available
    error = group.validate_member(req.member_id, req.group_instance_id)
    if error is not None:
        return error
    if req.generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(req.protocol_name, group.protocol_name):
        return ErrorCode.inconsistent_group_protocol
    return None


def sync_group(ctx: OperationContext, req: SyncGroupRequest, token: RequestToken) -> SyncGroupResponse:
    current = ctx.group(req.group_id)
    if not isinstance(current, ClassicGroup) or current.is_empty():
        return SyncGroupResponse(ErrorCode.unknown_member_id)
    error = validate_sync(current, req)
    if error is not None:
        return SyncGroupResponse(error)
    if current.is_in(S.PREPARING_REBALANCE):
        return SyncGroupResponse(ErrorCode.rebalance_in_progress)

    group = ctx.edit(req.group_id)
    member = group.member(req.member_id)
    if group.is_in(S.STABLE):
        remove_pending_sync_member(ctx, group, req.member_id)
        reschedule_heartbeat(ctx, group, req.member_id)
        return SyncGroupResponse(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)

    # CompletingRebalance: wait for the leader's assignment.
    if member.awaiting_sync is not None:
        ctx.reply(member.awaiting_sync, SyncGroupResponse(ErrorCode.rebalance_in_progress))
    group.put(member.but(awaiting_sync=token))
    remove_pending_sync_member(ctx, group, req.member_id)
    if group.is_leader(req.member_id):
        assignment = {m.member_id: b"" for m in group.members.values()}
        assignment.update((member_id, data) for member_id, data in req.assignments if member_id in assignment)
        group.transition_to(S.STABLE, ctx.now)
        ctx.write(group_metadata_record(group, assignment))
        # Stores each member's assignment and answers the parked ones: the runtime sends these
        # answers only once the record above is durable.
        propagate_assignment(ctx, group, ErrorCode.none, assignment)
    return PARKED
