"""Members speaking the classic protocol inside a consumer group (KIP-848's online migration;
Kafka 4.2's GroupMetadataManager.classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
classicGroupHeartbeatToConsumerGroup and classicGroupLeaveToConsumerGroup).

A classic member rolls through the consumer group's machinery with the classic protocol's calls:
- JoinGroup updates its subscription (read from its "consumer" protocol metadata), computes the
  target if the group epoch moved, and takes a reconciliation step with the partitions its
  subscription says it owns; the answer's generation is its member epoch, and no member is the
  leader: the coordinator assigns;
- SyncGroup answers its assigned partitions, serialized at its subscription's version;
- Heartbeat keeps its session and says REBALANCE_IN_PROGRESS while the group epoch is ahead of its
  epoch (unless it is still revoking), so that it joins again to catch up;
- LeaveGroup removes it (and downgrades the group when only classic members remain).
A member that does not join again within its rebalance timeout after being told to, or does not
sync within it after joining, is fenced, as its session's expiry fences it.
"""

from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from coordinator.classic.group import CONSUMER_PROTOCOL_TYPE
from coordinator.classic.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.consumer import heartbeat as hb
from coordinator.consumer import records as r
from coordinator.consumer.group import ConsumerGroup, join_key, session_key, sync_key
from coordinator.consumer.member import ClassicMemberMetadata, ClassicProtocol, ConsumerGroupMember
from coordinator.consumer.migration import to_ids, to_names
from coordinator.consumer.protocol import MalformedProtocol, decode_subscription, encode_assignment, subscription_version
from coordinator.context import OperationContext
from coordinator.member_state import MemberState


def _supports(group: ConsumerGroup, protocol_type: str, protocols: tuple) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the "consumer" type, and a protocol every
    classic member already in the group supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return False
    classic = [m for m in group.members.values() if m.use_classic_protocol]
    names = {name for name, _ in protocols}
    return any(
        all(any(p.name == name for p in m.classic_member_metadata.supported_protocols) for m in classic)  # type: ignore[union-attr]
        for name in names
    )


def _protocol_name(member: ConsumerGroupMember) -> str:
    assert member.classic_member_metadata is not None
    return member.classic_member_metadata.supported_protocols[0].name


def join(ctx: OperationContext, group: ConsumerGroup, req: JoinGroupRequest) -> JoinGroupResponse:
    gid = req.group_id
    unknown = req.member_id == UNKNOWN_MEMBER_ID
    member_id = ctx.state.new_member_id(req.client_id) if unknown else req.member_id
    try:
        hb.check_not_full(ctx, group, member_id)
    except hb._Rejected as e:
        return JoinGroupResponse(e.code, member_id)
    if not _supports(group, req.protocol_type, req.protocols):
        return JoinGroupResponse(ErrorCode.inconsistent_group_protocol, req.member_id)
    if unknown and req.group_instance_id is None and req.requires_known_member_id:
        # A dynamic member learns its id first, as with a classic group (MEMBER_ID_REQUIRED).
        return JoinGroupResponse(ErrorCode.member_id_required, member_id)
    try:
        subscription = decode_subscription(req.protocols[0][1])
    except MalformedProtocol:
        return JoinGroupResponse(ErrorCode.inconsistent_group_protocol, req.member_id)

    change = hb.GroupChange(ctx, gid)
    change.begin(group)
    member = _joining_member(change, group, member_id, req, unknown)
    if isinstance(member, JoinGroupResponse):
        return member
    updated = replace(
        member,
        instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
        subscribed_topic_names=frozenset(subscription.topics),
        client_id=req.client_id,
        client_host=req.client_host,
        classic_member_metadata=ClassicMemberMetadata(
            req.session_timeout_ms, tuple(ClassicProtocol(name, meta) for name, meta in req.protocols)
        ),
    )
    try:
        bump, _changed = change.subscribe(group, member, updated, regexes=False)
        group_epoch = change.group_epoch(group, bump)
        target_epoch, target = change.target(group, group_epoch, member, updated)
        owned = to_ids(subscription.owned_partitions, change.image)
        reconciled = change.reconcile(group, updated, target_epoch, target, owned, bump)
    except hb._Rejected as e:
        return JoinGroupResponse(e.code, member_id)
    change.write(updated, reconciled)
    ctx.cancel(join_key(gid, member_id))
    ctx.schedule(session_key(gid, member_id), req.session_timeout_ms, "expire_consumer_session", gid, member_id)
    ctx.schedule(sync_key(gid, member_id), req.rebalance_timeout_ms, "expire_consumer_classic_timer", gid, member_id)
    return JoinGroupResponse(
        ErrorCode.none,
        member_id=reconciled.member_id,
        generation_id=reconciled.member_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=_protocol_name(reconciled),
    )


def _joining_member(
    change: hb.GroupChange, group: ConsumerGroup, member_id: str, req: JoinGroupRequest, unknown: bool
) -> ConsumerGroupMember | JoinGroupResponse:
    """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember with the classic protocol (no
    epoch check): a static member joining without a member id replaces the one of its instance."""
    instance_id = req.group_instance_id
    if instance_id is None:
        return group.member(member_id) or ConsumerGroupMember(member_id)
    existing = group.static_member(instance_id)
    if not unknown:
        if existing is None:
            return JoinGroupResponse(ErrorCode.unknown_member_id, member_id)
        if existing.member_id != member_id:
            return JoinGroupResponse(ErrorCode.fenced_instance_id, member_id)
        return existing
    if existing is None:
        return group.member(member_id) or ConsumerGroupMember(member_id)
    new_member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    gid = group.group_id
    target = group.target_assignment.get(existing.member_id, {})
    change.records += hb._remove_member_records(gid, existing.member_id)
    change.records.append(r.consumer_member_subscription_record(gid, new_member))
    change.records.append(r.consumer_target_assignment_record(gid, member_id, target))
    change.records.append(r.consumer_current_assignment_record(gid, new_member))
    change.members.pop(existing.member_id, None)
    change.targets.pop(existing.member_id, None)
    change.targets[member_id] = target
    return new_member


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember | ErrorCode:
    """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.member(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
    else:
        member = group.static_member(instance_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member.member_id != member_id:
            return ErrorCode.fenced_instance_id
    if not member.use_classic_protocol:
        return ErrorCode.unknown_member_id
    return member


def _rebalance_in_progress(ctx: OperationContext, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's throwIfRebalanceInProgress: the group moved past the member's epoch and the member is
    not still revoking (it then joins again by itself): it must rejoin within its rebalance timeout."""
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        ctx.schedule_if_absent(join_key(group.group_id, member.member_id), member.rebalance_timeout_ms,
                               "expire_consumer_classic_timer", group.group_id, member.member_id)
        return True
    return False


def sync(ctx: OperationContext, group: ConsumerGroup, req: SyncGroupRequest) -> SyncGroupResponse:
    member = _classic_member(group, req.member_id, req.group_instance_id)
    if isinstance(member, ErrorCode):
        return SyncGroupResponse(member)
    if req.generation_id != member.member_epoch:
        return SyncGroupResponse(ErrorCode.illegal_generation)
    name = _protocol_name(member)
    if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        req.protocol_name is not None and req.protocol_name != name
    ):
        return SyncGroupResponse(ErrorCode.inconsistent_group_protocol)
    if _rebalance_in_progress(ctx, group, member):
        return SyncGroupResponse(ErrorCode.rebalance_in_progress)
    gid = group.group_id
    ctx.cancel(sync_key(gid, member.member_id))
    assert member.classic_member_metadata is not None
    ctx.schedule(session_key(gid, member.member_id), member.classic_member_metadata.session_timeout_ms,
                 "expire_consumer_session", gid, member.member_id)
    version = subscription_version(member.classic_member_metadata.supported_protocols[0].metadata)
    data = encode_assignment(to_names(member.assigned_partitions, ctx.state.topics_image), version)
    return SyncGroupResponse(ErrorCode.none, CONSUMER_PROTOCOL_TYPE, name, data)


def heartbeat(ctx: OperationContext, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResponse:
    member = _classic_member(group, req.member_id, req.group_instance_id)
    if isinstance(member, ErrorCode):
        return HeartbeatResponse(member)
    if req.generation_id != member.member_epoch:
        return HeartbeatResponse(ErrorCode.illegal_generation)
    assert member.classic_member_metadata is not None
    ctx.schedule(session_key(group.group_id, member.member_id), member.classic_member_metadata.session_timeout_ms,
                 "expire_consumer_session", group.group_id, member.member_id)
    if _rebalance_in_progress(ctx, group, member):
        return HeartbeatResponse(ErrorCode.rebalance_in_progress)
    return HeartbeatResponse(ErrorCode.none)


def leave(ctx: OperationContext, group: ConsumerGroup, req: LeaveGroupRequest) -> LeaveGroupResponse:
    """Kafka's classicGroupLeaveToConsumerGroup: each member found leaves; then one group epoch bump
    for all of them, or a downgrade if only classic members remain."""
    answers: list[LeftMember] = []
    leaving: list[ConsumerGroupMember] = []
    for m in req.members:
        if m.group_instance_id is None:
            member = group.member(m.member_id)
            error = None if member is not None else ErrorCode.unknown_member_id
        else:
            member = group.static_member(m.group_instance_id)
            error = None
            if member is None:
                error = ErrorCode.unknown_member_id
            elif m.member_id != UNKNOWN_MEMBER_ID and member.member_id != m.member_id:
                error = ErrorCode.fenced_instance_id
        if error is not None or member is None:
            answers.append(LeftMember(m.member_id, m.group_instance_id, error or ErrorCode.unknown_member_id))
            continue
        if all(x.member_id != member.member_id for x in leaving):
            leaving.append(member)
        answers.append(LeftMember(m.member_id, m.group_instance_id, ErrorCode.none))
    if leaving:
        hb.fence_members(ctx, group, leaving)
    return LeaveGroupResponse(ErrorCode.none, tuple(answers))


def expire_timer(ctx: OperationContext, group_id: str, member_id: str) -> None:
    """A classic member's join or sync timeout: it did not come back in time, it is fenced."""
    group = ctx.group(group_id)
    if isinstance(group, ConsumerGroup) and member_id in group.members:
        hb.fence_members(ctx, group, [group.members[member_id]])


__all__ = ["expire_timer", "heartbeat", "join", "leave", "sync"]
