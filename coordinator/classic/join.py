"""JoinGroup by group state (seed 000 §3, seed 004 §5.4.3; Kafka 4.x classicGroupJoin).

    Empty | Stable, new or changed member  add/update it, prepare a rebalance (an InitialDelayedJoin
                                          when the group was Empty), try to complete the join phase
    Stable, follower, unchanged            answer the current generation at once
    PreparingRebalance                     add/update the member, try to complete the join phase
    CompletingRebalance, unchanged         re-send its JoinGroup response (it missed it)
    CompletingRebalance, new or changed    prepare a new rebalance: parked SyncGroups get
                                          REBALANCE_IN_PROGRESS
    Dead                                   COORDINATOR_NOT_AVAILABLE

A member that must wait is parked (PARKED) under its request token; the completion of the join
phase answers every parked member, the leader with every member's metadata.
"""

from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup, ClassicMember
from coordinator.classic.messages import UNKNOWN_MEMBER_ID, JoinGroupRequest, JoinGroupResponse, SyncGroupResponse
from coordinator.classic.rebalance import (
    drop_member,
    heartbeat_key,
    join_response,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    prepare_rebalance,
    reschedule_heartbeat,
)
from coordinator.classic.state import ClassicGroupState as S
from coordinator.classic.records import empty_group_metadata_record, group_metadata_record
from kernel.result import PARKED, RequestToken
from coordinator.context import OperationContext


def _error(code: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, member_id=member_id)


def join_group(ctx: OperationContext, req: JoinGroupRequest, token: RequestToken) -> JoinGroupResponse:
    config = ctx.config
    if not req.group_id:
        return _error(ErrorCode.invalid_group_id, req.member_id)
    if not config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms:
        return _error(ErrorCode.invalid_session_timeout, req.member_id)
    existing = ctx.group(req.group_id)
    if existing is not None and not isinstance(existing, ClassicGroup):
        # A share group owns this id (Kafka answers a JoinGroup to it this way).
        return _error(ErrorCode.inconsistent_group_protocol)
    unknown_member = req.member_id == UNKNOWN_MEMBER_ID
    if existing is None:
        if not unknown_member:
            return _error(ErrorCode.unknown_member_id, req.member_id)
        group = ctx.create(ClassicGroup(req.group_id, state_timestamp=ctx.now))
        created = True
    else:
        group = ctx.edit(req.group_id)
        created = False

    if not _accept_joining_member(group, req.member_id, config.max_size):
        drop_member(ctx, group, req.member_id, ErrorCode.group_max_size_reached)
        response: JoinGroupResponse = _error(ErrorCode.group_max_size_reached)
    elif unknown_member:
        response = _join_new_member(ctx, group, req, token)
    else:
        response = _join_existing_member(ctx, group, req, token)

    if created and not ctx.records:
        # Kafka commits a newly created group to the log even when the join wrote nothing else.
        ctx.write(empty_group_metadata_record(group))
    return response


def _accept_joining_member(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    if group.is_in(S.EMPTY, S.DEAD):
        return True
    if group.is_in(S.PREPARING_REBALANCE):
        # Counting members awaiting join (not all members) lets the last rejoiners be kicked out
        # when group.max.size was lowered below the group's size.
        already = group.has_member(member_id) and group.member(member_id).is_awaiting_join
        return already or group.num_awaiting_join < max_size
    return group.has_member(member_id) or group.num_members < max_size


def _join_new_member(ctx: OperationContext, group: ClassicGroup, req: JoinGroupRequest, token: RequestToken) -> JoinGroupResponse:
    if group.is_in(S.DEAD):
        return _error(ErrorCode.coordinator_not_available)
    if not group.supports_protocols(req.protocol_type, req.protocols):
        return _error(ErrorCode.inconsistent_group_protocol)
    new_member_id = ctx.state.new_member_id(req.group_instance_id or req.client_id)
    if req.group_instance_id is not None:
        existing_member_id = group.static_member_id(req.group_instance_id)
        if existing_member_id is not None:
            return _replace_static_member_then_rebalance_or_complete_join(ctx, group, req, existing_member_id, new_member_id, token)
        return _add_member_then_rebalance_or_complete_join(ctx, group, req, new_member_id, token)
    if req.requires_known_member_id:
        # Two-phase join (JoinGroup v4+): hand out the id, remember it as pending for one session.
        group.pending_join_members.add(new_member_id)
        ctx.schedule(
            heartbeat_key(group.group_id, new_member_id),
            req.session_timeout_ms,
            "expire_heartbeat",
            group.group_id,
            new_member_id,
        )
        return _error(ErrorCode.member_id_required, new_member_id)
    return _add_member_then_rebalance_or_complete_join(ctx, group, req, new_member_id, token)


def _join_existing_member(ctx: OperationContext, group: ClassicGroup, req: JoinGroupRequest, token: RequestToken) -> JoinGroupResponse:
    member_id = req.member_id
    if group.is_in(S.DEAD):
        return _error(ErrorCode.coordinator_not_available, member_id)
    if not group.supports_protocols(req.protocol_type, req.protocols):
        return _error(ErrorCode.inconsistent_group_protocol, member_id)
    if group.is_pending_member(member_id):
        if req.group_instance_id is not None:  # a pending member is never static
            return _error(ErrorCode.invalid_request, member_id)
        return _add_member_then_rebalance_or_complete_join(ctx, group, req, member_id, token)
    error = group.validate_member(member_id, req.group_instance_id)
    if error is not None:
        return _error(error, member_id)
    member = group.member(member_id)
    if group.is_in(S.PREPARING_REBALANCE):
        return _update_member_then_rebalance_or_complete_join(ctx, group, member, req, token)
    if group.is_in(S.COMPLETING_REBALANCE):
        if member.matches(req.protocols):
            # It missed its JoinGroup response: send it again, same generation (seed 004, figure 5-20).
            return join_response(group, member_id, with_members=group.is_leader(member_id))
        return _update_member_then_rebalance_or_complete_join(ctx, group, member, req, token)
    if group.is_in(S.STABLE):
        if group.is_leader(member_id) or not member.matches(req.protocols):
            # A rejoining leader forces a rebalance: it may have seen metadata change (new partitions).
            return _update_member_then_rebalance_or_complete_join(ctx, group, member, req, token)
        # A follower that missed its response: the current generation, so it can SyncGroup.
        return join_response(group, member_id, with_members=False)
    return _error(ErrorCode.unknown_member_id, member_id)  # Empty: reset and rejoin


def _add_member_then_rebalance_or_complete_join(
    ctx: OperationContext, group: ClassicGroup, req: JoinGroupRequest, member_id: str, token: RequestToken
) -> JoinGroupResponse:
    protocols, client_id, client_host = group.shared(req.protocols, req.client_id, req.client_host)
    member = ClassicMember(
        member_id=member_id,
        group_instance_id=req.group_instance_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        session_timeout_ms=req.session_timeout_ms,
        protocol_type=group.protocol_type if group.protocol_type == req.protocol_type else req.protocol_type,
        protocols=protocols,
        awaiting_join=token,
        is_new=True,
    )
    if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
        group.new_member_added = True  # extends the initial delayed join
    group.add(member)
    # A parked new member cannot heartbeat and its socket is muted; time its JoinGroup out instead.
    reschedule_heartbeat(ctx, group, member_id, ctx.config.new_member_join_timeout_ms)
    maybe_prepare_rebalance_or_complete_join(ctx, group, f"adding new member {member_id}")
    return PARKED


def _update_member_then_rebalance_or_complete_join(
    ctx: OperationContext, group: ClassicGroup, member: ClassicMember, req: JoinGroupRequest, token: RequestToken
) -> JoinGroupResponse:
    if member.awaiting_join is not None:
        # A second JoinGroup while the first is parked: the newer one is the one the client waits on.
        ctx.reply(member.awaiting_join, _error(ErrorCode.rebalance_in_progress, member.member_id))
    group.put(
        member.but(
            protocols=group.shared(req.protocols)[0],
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            awaiting_join=token,
        )
    )
    maybe_prepare_rebalance_or_complete_join(ctx, group, f"member {member.member_id} rejoined")
    return PARKED


def _replace_static_member_then_rebalance_or_complete_join(
    ctx: OperationContext,
    group: ClassicGroup,
    req: JoinGroupRequest,
    old_member_id: str,
    new_member_id: str,
    token: RequestToken,
) -> JoinGroupResponse:
    """A static member restarted (same group.instance.id, unknown member id): it takes the old id's place.

    The old member id is fenced (FENCED_INSTANCE_ID) for any request still parked or yet to come.
    In Stable, if the selected protocol would not change, no rebalance: the group is stored with
    the new member id and the member gets the current generation back.
    """
    old_leader = group.leader_id
    old = group.member(old_member_id)
    if old.awaiting_join is not None:
        ctx.reply(old.awaiting_join, _error(ErrorCode.fenced_instance_id, old_member_id))
    if old.awaiting_sync is not None:
        ctx.reply(old.awaiting_sync, SyncGroupResponse(ErrorCode.fenced_instance_id))
    was_pending_sync = old_member_id in group.pending_sync_members
    group.remove(old_member_id)
    group.put(
        old.but(
            member_id=new_member_id,
            protocols=group.shared(req.protocols)[0],
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            awaiting_join=token,
            awaiting_sync=None,
        )
    )
    if old_leader == old_member_id:
        group.leader_id = new_member_id
    if was_pending_sync:
        group.pending_sync_members.add(new_member_id)
    ctx.cancel(heartbeat_key(group.group_id, old_member_id))
    reschedule_heartbeat(ctx, group, new_member_id)

    if group.is_in(S.STABLE):
        if group.protocol_name == group.select_protocol():
            ctx.write(group_metadata_record(group, group.assignment_of()))
            group.put(group.member(new_member_id).but(awaiting_join=None))
            if req.supports_skip_assignment:
                # KIP-814: a static leader that rejoined gets the members but need not reassign.
                leader = group.is_leader(new_member_id)
                return join_response(group, new_member_id, with_members=leader, skip_assignment=leader)
            response = join_response(group, new_member_id, with_members=False)
            return replace(response, leader=old_leader or "")
        maybe_prepare_rebalance_or_complete_join(ctx, group, f"static member {req.group_instance_id} changed protocols")
        return PARKED
    if group.is_in(S.COMPLETING_REBALANCE):
        # The leader may already hold the old member id in its assignment: assign again.
        prepare_rebalance(ctx, group, f"static member {req.group_instance_id} replaced during sync")
        return PARKED
    maybe_complete_join_phase(ctx, group)
    return PARKED
