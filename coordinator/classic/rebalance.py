"""The rebalance core (seed 000 §2-§7; Kafka's prepareRebalance / completeClassicGroupJoin / expiries).

A rebalance is a join phase (PreparingRebalance: members rejoin; the DelayedJoin waits for all of
them or the rebalance timeout; an Empty group first waits group.initial.rebalance.delay.ms and
extends while members keep arriving) and a sync phase (CompletingRebalance: the leader's
SyncGroup stores the assignment and answers everyone). Timers keyed per group or member make the
DelayedJoin, the DelayedHeartbeat (session timeout) and the pending-sync deadline.
"""

from __future__ import annotations


from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import UNKNOWN_MEMBER_ID, JoinGroupMember, JoinGroupResponse, SyncGroupResponse
from coordinator.classic.state import ClassicGroupState as S
from coordinator.classic.records import group_metadata_record
from coordinator.context import OperationContext


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def reschedule_heartbeat(ctx: OperationContext, group: ClassicGroup, member_id: str, timeout_ms: int | None = None) -> None:
    """DelayedHeartbeat: the member must show life again within its session timeout."""
    member = group.member(member_id)
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    ctx.schedule(heartbeat_key(group.group_id, member_id), timeout, "expire_heartbeat", group.group_id, member_id)


def drop_member(ctx: OperationContext, group: ClassicGroup, member_id: str, error: ErrorCode = ErrorCode.unknown_member_id) -> None:
    """Remove a member, answering whatever it still has parked: no request may hang, and a parked
    answer that never comes would also hold back every later answer on the client's connection."""
    member = group.members.get(member_id)
    if member is not None:
        if member.awaiting_join is not None:
            ctx.reply(member.awaiting_join, JoinGroupResponse(error, UNKNOWN_MEMBER_ID))
        if member.awaiting_sync is not None:
            ctx.reply(member.awaiting_sync, SyncGroupResponse(error))
    group.remove(member_id)
    ctx.cancel(heartbeat_key(group.group_id, member_id))


def join_response(group: ClassicGroup, member_id: str, *, with_members: bool, skip_assignment: bool = False) -> JoinGroupResponse:
    members = ()
    if with_members:
        members = tuple(JoinGroupMember(*entry) for entry in group.current_members_metadata())
    return JoinGroupResponse(
        error_code=ErrorCode.none,
        member_id=member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        skip_assignment=skip_assignment,
        members=members,
    )


# -- the join phase ------------------------------------------------------------------------------


def prepare_rebalance(ctx: OperationContext, group: ClassicGroup, reason: str) -> None:
    # Members waiting in SyncGroup for an assignment that will never come: tell them to rejoin.
    if group.is_in(S.COMPLETING_REBALANCE):
        reset_and_propagate_assignment_with_error(ctx, group, ErrorCode.rebalance_in_progress)
    remove_sync_expiration(ctx, group)
    initial = group.is_in(S.EMPTY)
    if initial:
        # InitialDelayedJoin: a new group waits for more members before its first generation.
        delay = ctx.config.initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        schedule_initial_rebalance(ctx, group.group_id, delay, remaining)
    group.transition_to(S.PREPARING_REBALANCE, ctx.now)
    if not initial:
        maybe_complete_join_else_schedule(ctx, group)


def schedule_initial_rebalance(ctx: OperationContext, group_id: str, delay_ms: int, remaining_ms: int) -> None:
    ctx.schedule(join_key(group_id), delay_ms, "try_complete_initial_rebalance", group_id, delay_ms, remaining_ms)


def try_complete_initial_rebalance(ctx: OperationContext, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
    if group.new_member_added and remaining_ms != 0:
        # A member arrived during the delay: wait again, within the rebalance timeout.
        group.new_member_added = False
        new_delay = min(ctx.config.initial_rebalance_delay_ms, remaining_ms)
        new_remaining = max(remaining_ms - delay_ms, 0)
        schedule_initial_rebalance(ctx, group.group_id, new_delay, new_remaining)
    else:
        complete_join(ctx, group)


def maybe_complete_join_else_schedule(ctx: OperationContext, group: ClassicGroup) -> None:
    if group.has_all_members_joined():
        complete_join(ctx, group)
    else:
        schedule_join_expiry(ctx, group)


def schedule_join_expiry(ctx: OperationContext, group: ClassicGroup) -> None:
    """DelayedJoin: after the rebalance timeout the join phase completes without the laggards."""
    ctx.schedule(join_key(group.group_id), group.rebalance_timeout_ms(), "complete_join_on_timeout", group.group_id)


def maybe_prepare_rebalance_or_complete_join(ctx: OperationContext, group: ClassicGroup, reason: str) -> None:
    if group.can_rebalance():
        prepare_rebalance(ctx, group, reason)
    else:
        maybe_complete_join_phase(ctx, group)


def maybe_complete_join_phase(ctx: OperationContext, group: ClassicGroup) -> None:
    """Try to complete the DelayedJoin: every member rejoined and nobody is pending.

    Not during an initial rebalance: the InitialDelayedJoin completes only on its timer.
    """
    if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is not S.EMPTY and group.has_all_members_joined():
        complete_join(ctx, group)


def complete_join(ctx: OperationContext, group: ClassicGroup) -> None:
    """onCompleteJoin: drop dynamic members that did not rejoin, start the next generation, answer all joins."""
    ctx.cancel(join_key(group.group_id))
    for member in group.not_yet_rejoined():
        if not member.is_static:  # static members keep their place across a missed rebalance
            drop_member(ctx, group, member.member_id)
    if group.is_in(S.DEAD):
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Only static members that did not rejoin are left: wait another rebalance timeout for
        # them (their sessions will expire if they are gone).
        schedule_join_expiry(ctx, group)
        return
    group.init_next_generation(ctx.now)
    if group.is_in(S.EMPTY):
        ctx.write(group_metadata_record(group, {}))
        return
    # One new member per member, answered and no longer new together: at 1,000 members this loop
    # is the rebalance's largest operation, and it runs after the last join, on the critical path.
    for member in list(group.members.values()):
        member_id = member.member_id
        if member.awaiting_join is not None:
            ctx.reply(member.awaiting_join, join_response(group, member_id, with_members=group.is_leader(member_id)))
        group.put(member.but(awaiting_join=None, is_new=False))
        reschedule_heartbeat(ctx, group, member_id, member.session_timeout_ms)
        group.pending_sync_members.add(member_id)
    schedule_pending_sync(ctx, group)


# -- the sync phase ---------------------------------------------------------------------------------


def schedule_pending_sync(ctx: OperationContext, group: ClassicGroup) -> None:
    """Members that joined must send SyncGroup within the rebalance timeout, or they are removed."""
    ctx.schedule(
        sync_key(group.group_id), group.rebalance_timeout_ms(), "expire_pending_sync", group.group_id, group.generation_id
    )


def remove_sync_expiration(ctx: OperationContext, group: ClassicGroup) -> None:
    group.pending_sync_members.clear()
    ctx.cancel(sync_key(group.group_id))


def remove_pending_sync_member(ctx: OperationContext, group: ClassicGroup, member_id: str) -> None:
    group.pending_sync_members.discard(member_id)
    if group.is_in(S.DEAD, S.EMPTY, S.PREPARING_REBALANCE) or not group.pending_sync_members:
        ctx.cancel(sync_key(group.group_id))


def expire_pending_sync(ctx: OperationContext, group: ClassicGroup, generation_id: int) -> None:
    if generation_id != group.generation_id or not group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
        return
    if group.pending_sync_members:
        for member_id in sorted(group.pending_sync_members):
            drop_member(ctx, group, member_id)
        prepare_rebalance(ctx, group, "members did not send SyncGroup in time")


def reset_and_propagate_assignment_with_error(ctx: OperationContext, group: ClassicGroup, error: ErrorCode) -> None:
    for member_id, member in list(group.members.items()):
        group.put(member.but(assignment=b""))
    propagate_assignment(ctx, group, error)


def propagate_assignment(ctx: OperationContext, group: ClassicGroup, error: ErrorCode,
                         assignment: dict[str, bytes] | None = None) -> None:
    """Answer every member parked in SyncGroup with its assignment; `assignment` (the leader's,
    by member) is stored on every member on the way, one new member each (at 1,000 members the
    leader's SyncGroup is the sync phase's largest operation)."""
    ok = error == ErrorCode.none
    protocol_type = group.protocol_type if ok else None
    protocol_name = group.protocol_name if ok else None
    for member in list(group.members.values()):
        data = member.assignment if assignment is None else assignment[member.member_id]
        if member.awaiting_sync is None:
            if data is not member.assignment:
                group.put(member.but(assignment=data))
            continue
        ctx.reply(member.awaiting_sync, SyncGroupResponse(error, protocol_type, protocol_name, data))
        group.put(member.but(assignment=data, awaiting_sync=None))
        # A session that lapsed while the member waited for the assignment was ignored (parked
        # members satisfy their heartbeat): arm the next one now.
        reschedule_heartbeat(ctx, group, member.member_id, member.session_timeout_ms)


# -- members leaving ----------------------------------------------------------------------------------


def remove_member_and_update_group(ctx: OperationContext, group: ClassicGroup, member_id: str, reason: str) -> None:
    # A new member may time out while parked in JoinGroup: answering it lets a live client retry.
    drop_member(ctx, group, member_id)
    if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(ctx, group, reason)
    elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
        complete_join(ctx, group)


def remove_pending_member_and_update_group(ctx: OperationContext, group: ClassicGroup, member_id: str) -> None:
    group.remove(member_id)
    if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
        complete_join(ctx, group)


def expire_heartbeat(ctx: OperationContext, group: ClassicGroup, member_id: str) -> None:
    """The session timeout passed with no heartbeat (seed 000 §7.3)."""
    if group.is_in(S.DEAD):
        return
    if group.is_pending_member(member_id):
        remove_pending_member_and_update_group(ctx, group, member_id)
    elif group.has_member(member_id) and not group.member(member_id).has_satisfied_heartbeat():
        remove_member_and_update_group(ctx, group, member_id, f"member {member_id} session expired")


def rebalance_if_over_capacity(ctx: OperationContext, group_id: str) -> None:
    """Kafka's onLoaded: a freshly loaded classic group above group.max.size (lowered meanwhile)
    rebalances, giving its consumers a chance to commit before the last joiners are turned away."""
    group = ctx.group(group_id)
    if isinstance(group, ClassicGroup) and group.num_members > ctx.config.max_size and group.can_rebalance():
        prepare_rebalance(ctx, ctx.edit(group_id), f"freshly-loaded group {group_id} is over capacity")
