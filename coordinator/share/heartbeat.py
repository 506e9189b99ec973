"""ShareGroupHeartbeat: join, heartbeat and leave of a share group (seed 001 §5-2-1; SPEC §3; Kafka 4.x
GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid and GroupMetadataManager
.shareGroupHeartbeat / shareGroupLeave / shareGroupFenceMember).

A heartbeat, in Kafka's order:
  0. validate the request (INVALID_REQUEST); epoch -1 leaves: the member's records are tombstoned
     and the group epoch bumped;
  1. find the group (epoch 0 may create it; another group type owns the id: GROUP_ID_NOT_FOUND),
     refuse a new member of a full group (GROUP_MAX_SIZE_REACHED), find the member (epoch 0 may create
     it; UNKNOWN_MEMBER_ID) and check its epoch (FENCED_MEMBER_EPOCH, but the previous epoch is
     accepted: the response carrying the new one may have been lost);
  2. update the member (ShareGroupMemberMetadata); a new subscription, newly initialized partitions
     to assign, or a new metadata hash bumps the group epoch (ShareGroupMetadata);
  3. a group epoch above the assignment epoch computes a new target assignment with the
     SimpleAssignor over the initialized share partitions (ShareGroupTargetAssignmentMember for the
     members whose target changed, then ShareGroupTargetAssignmentMetadata);
  4. the member takes its target at once: member epoch = assignment epoch
     (ShareGroupCurrentMemberAssignment);
  5. the session timeout restarts; the response carries the member epoch, the heartbeat interval,
     and the assignment on join, on a full request or when it changed (the session timeout and
     the interval are the group's share.session.timeout.ms / share.heartbeat.interval.ms if it
     has them: shareGroupSessionTimeoutMs / shareGroupHeartbeatIntervalMs);
  6. subscribed share partitions not initialized yet are recorded as initializing
     (ShareGroupStatePartitionMetadata) and returned for the cluster to initialize.
Every check happens before the first record, so an error writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from uuid import UUID

from kio.schema.errors import ErrorCode

from coordinator.share.records import (
    share_current_assignment_record,
    share_current_assignment_tombstone,
    share_group_epoch_record,
    share_member_subscription_record,
    share_member_subscription_tombstone,
    share_target_assignment_epoch_record,
    share_target_assignment_record,
    share_target_assignment_tombstone,
)
from coordinator.share.assignor import simple_assign
from coordinator.share.group import (  # noqa: F401  (session_key re-exported)
    MemberState,
    ShareGroup,
    ShareGroupMember,
    TopicPartitions,
    freeze_partitions,
    session_key,
)
from coordinator.share.messages import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareHeartbeatOutcome,
)
from coordinator.share.metadata import TopicsImage, metadata_hash
from coordinator.share.share_state import assignable_partitions, initialized_assignment_pending, maybe_initialize
from coordinator.context import OperationContext


def _error(code: ErrorCode, message: str) -> ShareHeartbeatOutcome:
    return ShareHeartbeatOutcome(ShareGroupHeartbeatResponse(error_code=code, error_message=message))


def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString test: set, but empty once trimmed."""
    return value is not None and value.strip() == ""


def validate(req: ShareGroupHeartbeatRequest) -> str | None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid: the INVALID_REQUEST message, or None."""
    if _blank(req.member_id):
        return "MemberId can't be empty."
    if _blank(req.group_id):
        return "GroupId can't be empty."
    if _blank(req.rack_id):
        return "RackId can't be empty."
    if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not req.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
    elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return "MemberEpoch is invalid."
    return None


def share_group_heartbeat(ctx: OperationContext, req: ShareGroupHeartbeatRequest) -> ShareHeartbeatOutcome:
    invalid = validate(req)
    if invalid is not None:
        return _error(ErrorCode.invalid_request, invalid)
    if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        return ShareHeartbeatOutcome(_leave(ctx, req))
    return _heartbeat(ctx, req)


# -- leave and fencing ---------------------------------------------------------------------------------


def _find_group(ctx: OperationContext, group_id: str) -> ShareGroup | ShareGroupHeartbeatResponse:
    group = ctx.group(group_id)
    if group is None:
        return ShareGroupHeartbeatResponse(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ShareGroup):
        return ShareGroupHeartbeatResponse(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
    return group


def _leave(ctx: OperationContext, req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    """Kafka's shareGroupLeave: no epoch check, the member is removed whatever epoch it sends."""
    group = _find_group(ctx, req.group_id)
    if isinstance(group, ShareGroupHeartbeatResponse):
        return group
    member = group.members.get(req.member_id)
    if member is None:
        return ShareGroupHeartbeatResponse(
            ErrorCode.unknown_member_id, f"Member {req.member_id} is not a member of group {req.group_id}."
        )
    fence_member(ctx, group, member.member_id)
    return ShareGroupHeartbeatResponse(ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)


def fence_member(ctx: OperationContext, group: ShareGroup, member_id: str) -> None:
    """Kafka's shareGroupFenceMember: tombstones for the member's assignment, target and subscription,
    then a group epoch bump with the metadata hash of the remaining subscriptions. The target
    assignment epoch stays behind, so the next heartbeat of another member reassigns."""
    gid = group.group_id
    ctx.write(share_current_assignment_tombstone(gid, member_id))
    ctx.write(share_target_assignment_tombstone(gid, member_id))
    ctx.write(share_member_subscription_tombstone(gid, member_id))
    new_hash = metadata_hash(group.subscribed_topic_names(without=member_id), ctx.state.topics_image)
    ctx.write(share_group_epoch_record(gid, group.group_epoch + 1, new_hash))
    ctx.cancel(session_key(gid, member_id))


def expire_session(ctx: OperationContext, group_id: str, member_id: str) -> None:
    """Kafka's shareGroupFenceMemberOperation on session expiry: a leave, if the member is still there."""
    group = ctx.group(group_id)
    if isinstance(group, ShareGroup) and member_id in group.members:
        fence_member(ctx, group, member_id)


def schedule_session_timeout(ctx: OperationContext, group_id: str, member_id: str) -> None:
    ctx.schedule(session_key(group_id, member_id), ctx.share_session_timeout_ms(group_id), "expire_share_session",
                 group_id, member_id)


# -- the heartbeat ---------------------------------------------------------------------------------------


def _heartbeat(ctx: OperationContext, req: ShareGroupHeartbeatRequest) -> ShareHeartbeatOutcome:
    gid, mid = req.group_id, req.member_id
    joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
    image: TopicsImage = ctx.state.topics_image

    existing = ctx.group(gid)
    if existing is None:
        if not joining:
            return _error(ErrorCode.group_id_not_found, f"Share group {gid} not found.")
        group = ShareGroup(gid)  # materialized by the replay of this heartbeat's records
    elif not isinstance(existing, ShareGroup):
        # Kafka does not convert between group types: a classic group's id is not found here.
        return _error(ErrorCode.group_id_not_found, f"Group {gid} is not a share group.")
    else:
        group = existing

    max_size = ctx.config.share_max_size
    if len(group.members) >= max_size and mid not in group.members:
        return _error(
            ErrorCode.group_max_size_reached, f"The share group has reached its maximum capacity of {max_size} members."
        )

    member = group.members.get(mid)
    if member is None:
        if not joining:
            return _error(ErrorCode.unknown_member_id, f"Member {mid} is not a member of group {gid}.")
        member = ShareGroupMember(mid)
    fenced = _check_member_epoch(member, req.member_epoch)
    if fenced is not None:
        return _error(ErrorCode.fenced_member_epoch, fenced)

    # 1. Update the member; a new subscription bumps the group epoch, so do newly initialized partitions.
    updated = replace(
        member,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        subscribed_topic_names=(
            frozenset(req.subscribed_topic_names) if req.subscribed_topic_names is not None else member.subscribed_topic_names
        ),
        client_id=req.client_id,
        client_host=req.client_host,
    )
    bump = False
    if updated != member:
        ctx.write(share_member_subscription_record(gid, updated))
        bump = updated.subscribed_topic_names != member.subscribed_topic_names
    bump = bump or initialized_assignment_pending(group, image)

    members = dict(group.members)
    members[mid] = updated
    subscribed = frozenset().union(*(m.subscribed_topic_names for m in members.values()))
    # Kafka recomputes the hash when the epoch is bumped or the group's metadata refresh is due (a
    # subscribed topic changed in the image, or the group was just loaded); the hash depends only on
    # the image and the subscriptions, so computing it on every heartbeat decides the same.
    new_hash = metadata_hash(subscribed, image)
    bump = bump or new_hash != group.metadata_hash
    group_epoch = group.group_epoch
    if bump:
        group_epoch += 1
        ctx.write(share_group_epoch_record(gid, group_epoch, new_hash))

    # 2. A new target assignment when the group epoch moved past the assignment epoch.
    if group_epoch > group.assignment_epoch:
        target = _update_target_assignment(ctx, group, members, group_epoch, image)[mid]
        target_epoch = group_epoch
    else:
        target = dict(group.target_assignment.get(mid, {}))
        target_epoch = group.assignment_epoch

    # 3. Reconcile: a share member takes its target at once (Kafka's ShareGroupAssignmentBuilder).
    reconciled = _reconcile(updated, target_epoch, target, bump, image)
    if reconciled != updated:
        ctx.write(share_current_assignment_record(gid, reconciled))

    schedule_session_timeout(ctx, gid, mid)

    assignment: Assignment | None = None
    if joining or req.subscribed_topic_names is not None or reconciled.assigned_partitions != member.assigned_partitions:
        assignment = _as_response(reconciled.assigned_partitions)
    response = ShareGroupHeartbeatResponse(
        error_code=ErrorCode.none,
        member_id=reconciled.member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=ctx.share_heartbeat_interval_ms(gid),
        assignment=assignment,
    )
    return ShareHeartbeatOutcome(response, maybe_initialize(ctx, group, group_epoch, subscribed))


def _check_member_epoch(member: ShareGroupMember, received: int) -> str | None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: the FENCED_MEMBER_EPOCH message, or None."""
    if received == JOIN_GROUP_MEMBER_EPOCH:
        return None  # (re)joining
    if received > member.member_epoch:
        return (
            f"The share group member has a greater member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."
        )
    if received < member.member_epoch and received != member.previous_member_epoch:
        return (
            f"The share group member has a smaller member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}), and it does not match the previous member epoch "
            f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin."
        )
    return None


def _update_target_assignment(
    ctx: OperationContext, group: ShareGroup, members: Mapping[str, ShareGroupMember], group_epoch: int, image: TopicsImage
) -> dict[str, dict[UUID, frozenset[int]]]:
    """Kafka's updateTargetAssignment with the ShareTargetAssignmentBuilder: the SimpleAssignor over
    the initialized partitions, a record per member whose target changed (or that had none), then the
    new assignment epoch. Returns every member's new target."""
    subscriptions = {mid: image.topic_ids(m.subscribed_topic_names) for mid, m in members.items()}
    previous = {mid: group.target_assignment.get(mid, {}) for mid in members}
    computed = simple_assign(subscriptions, assignable_partitions(group, image), previous)
    gid = group.group_id
    targets: dict[str, dict[UUID, frozenset[int]]] = {}
    for mid in sorted(members):
        new = freeze_partitions(computed.get(mid, {}))
        targets[mid] = new
        if new != group.target_assignment.get(mid):
            ctx.write(share_target_assignment_record(gid, mid, new))
    ctx.write(share_target_assignment_epoch_record(gid, group_epoch))
    return targets


def _reconcile(
    member: ShareGroupMember,
    target_epoch: int,
    target: TopicPartitions,
    subscription_changed: bool,
    image: TopicsImage,
) -> ShareGroupMember:
    """Kafka's maybeReconcile + ShareGroupAssignmentBuilder.build: the member moves to the target
    epoch with the target partitions of the topics it subscribes to."""
    if not subscription_changed and member.is_reconciled_to(target_epoch):
        return member
    subscribed_ids = image.topic_ids(member.subscribed_topic_names)
    filtered = {tid: ps for tid, ps in target.items() if tid in subscribed_ids}
    if target_epoch != member.member_epoch:
        return replace(
            member,
            state=MemberState.STABLE,
            assigned_partitions=filtered,
            member_epoch=target_epoch,
            previous_member_epoch=member.member_epoch,
        )
    if subscription_changed:
        return replace(member, assigned_partitions=filtered)
    return member


def _as_response(partitions: TopicPartitions) -> Assignment:
    return tuple((topic_id, tuple(sorted(ps))) for topic_id, ps in sorted(partitions.items()) if ps)
