"""ConsumerGroupHeartbeat: join, heartbeat and leave of a consumer group (KIP-848; Kafka 4.2's
GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid and GroupMetadataManager
.consumerGroupHeartbeat, consumerGroupLeave, consumerGroupFenceMember, maybeUpdateRegularExpressions,
updateSubscriptionMetadata, updateTargetAssignment and maybeReconcile).

A heartbeat, in Kafka's order:
  0. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR); epoch -1 leaves (the member's
     records are tombstoned and the group epoch bumped), -2 is a static member leaving for now (its
     epoch becomes -2; it keeps its assignment until its session expires or its instance comes back);
  1. find the group (epoch 0 may create it; an Empty classic group of that id is replaced; another
     type owns the id: GROUP_ID_NOT_FOUND), refuse a new member of a full group, find the member
     (epoch 0 may create it, or replace the static member of its instance id that left with -2) and
     check its epoch (FENCED_MEMBER_EPOCH, but the previous epoch is accepted with owned partitions
     the member still has: the response carrying the new one may have been lost);
  2. update the member (ConsumerGroupMemberMetadata); new subscribed names, a regex already
     resolved, a regex resolution that changed what it matches, or a new metadata hash of the
     subscribed topics bumps the group epoch (ConsumerGroupMetadata);
  3. a group epoch above the target assignment epoch computes a new target with the server
     assignor the members prefer (ConsumerGroupTargetAssignmentMember for each member whose target
     changed, then ConsumerGroupTargetAssignmentMetadata);
  4. the member moves towards its target (reconciliation.py): it revokes before anything else and
     is given a partition only once nobody owns it (ConsumerGroupCurrentMemberAssignment); a member
     left revoking gets a rebalance timeout, after which it is fenced;
  5. its session restarts; the answer carries its epoch, the heartbeat interval and, on a join, a
     full request or a change, its assignment.
Every check happens before the first record, so an error writes nothing.

One difference from Kafka, on purpose: Kafka resolves regular expressions on an executor thread
and bumps the group epoch in a later write, so a member joining with a new regex first gets an
empty assignment. Here the resolution (RE2 over the topics image, regex.py) runs inside the
heartbeat under the same conditions (a new regex, new topics in the image, at most every 10 s and
at least every `group.consumer.regex.refresh.interval.ms`), and its records go in the same write:
a shard does no I/O and the topic list is in memory, so there is nothing to wait for.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.records import group_tombstone
from coordinator.consumer import records as r
from coordinator.consumer.assignment_spec import GroupSpec, MemberSpec, PartitionAssignorError, Topics, TopicId
from coordinator.consumer.assignors import assignor
from coordinator.consumer import migration
from coordinator.consumer.group import (
    ConsumerGroup,
    ResolvedRegularExpression,
    join_key,
    rebalance_key,
    session_key,
    sync_key,
)
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.messages import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from coordinator.consumer.reconciliation import FencedMemberEpochError, reconcile, subscribed_topic_ids_resolver
from coordinator.consumer.regex import invalid_reason, resolve
from coordinator.context import OperationContext
from coordinator.member_state import MemberState
from coordinator.share.metadata import TopicsImage, metadata_hash
from coordinator.topic_partitions import TopicPartitions, freeze_partitions
from kernel.codec import Record

# Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: regexes are not resolved again sooner than this.
REGEX_REFRESH_MIN_INTERVAL_MS = 10_000


class _Rejected(Exception):
    """Kafka's ApiException thrown by a check: the answer's error, nothing written."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString test: set, but empty once trimmed."""
    return value is not None and value.strip() == ""


def validate(req: ConsumerGroupHeartbeatRequest, api_version: int, assignors: tuple[str, ...]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (4.2, with v1's member id the client
    generates, KIP-1082)."""
    invalid = ErrorCode.invalid_request
    if _blank(req.group_id):
        raise _Rejected(invalid, "GroupId can't be empty.")
    if _blank(req.instance_id):
        raise _Rejected(invalid, "InstanceId can't be empty.")
    if _blank(req.rack_id):
        raise _Rejected(invalid, "RackId can't be empty.")
    if (api_version >= 1 or req.member_epoch != JOIN_GROUP_MEMBER_EPOCH) and req.member_id.strip() == "":
        raise _Rejected(invalid, "MemberId can't be empty.")
    if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise _Rejected(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise _Rejected(invalid, "TopicPartitions must be empty when (re-)joining.")
        # A member may join subscribing to nothing (an empty list or regex): it is in the group.
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise _Rejected(invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise _Rejected(invalid, "InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _Rejected(invalid, "MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise _Rejected(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
        )


def consumer_group_heartbeat(
    ctx: OperationContext, req: ConsumerGroupHeartbeatRequest, api_version: int = 1
) -> ConsumerGroupHeartbeatResponse:
    try:
        validate(req, api_version, ctx.config.consumer_assignors)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return _leave(ctx, req)
        return _Heartbeat(ctx, req.group_id, req=req).run()
    except _Rejected as rejected:
        return ConsumerGroupHeartbeatResponse(rejected.code, rejected.message)


# -- leave and fencing ---------------------------------------------------------------------------------


def _consumer_group(ctx: OperationContext, group_id: str) -> ConsumerGroup:
    """Kafka's consumerGroup(groupId)."""
    group = ctx.group(group_id)
    if group is None:
        raise _Rejected(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ConsumerGroup):
        raise _Rejected(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
    return group


def _static_member(group: ConsumerGroup, instance_id: str, member_id: str) -> ConsumerGroupMember:
    """Kafka's throwIfStaticMemberIsUnknown and throwIfInstanceIdIsFenced."""
    member = group.static_member(instance_id)
    if member is None:
        raise _Rejected(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise _Rejected(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {member.member_id}.",
        )
    return member


def _leave(ctx: OperationContext, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    """Kafka's consumerGroupLeave: no epoch check; a static member leaving with -2 keeps its place."""
    group = _consumer_group(ctx, req.group_id)
    response = ConsumerGroupHeartbeatResponse(ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)
    if req.instance_id is None:
        member = group.member(req.member_id)
        if member is None:
            raise _Rejected(
                ErrorCode.unknown_member_id, f"Member {req.member_id} is not a member of group {req.group_id}."
            )
        fence_member(ctx, group, member)
        return response
    member = _static_member(group, req.instance_id, req.member_id)
    if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        # Kafka's consumerGroupStaticMemberGroupLeave: the epoch -2 says the instance will be back
        # within its session; what it was revoking is given up with the partitions it still owns.
        leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
        ctx.write(r.consumer_current_assignment_record(group.group_id, leaving))
        return ConsumerGroupHeartbeatResponse(
            ErrorCode.none, member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
        )
    fence_member(ctx, group, member)
    return response


def fence_member(ctx: OperationContext, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    """Kafka's consumerGroupFenceMember."""
    fence_members(ctx, group, [member])


def fence_members(ctx: OperationContext, group: ConsumerGroup, members: list[ConsumerGroupMember]) -> None:
    """Kafka's consumerGroupFenceMember (and classicGroupLeaveToConsumerGroup for several): if only
    classic members would remain, the group goes back to being a classic group (migration.py);
    otherwise tombstones of each member's assignment, target and subscription (and of a regex its
    last user leaves), then one group epoch bump with the metadata hash of what the others
    subscribe to. The target assignment epoch stays behind, so the next heartbeat of another member
    computes a target without them."""
    gid = group.group_id
    gone = {m.member_id for m in members}
    for mid in sorted(gone):
        for key in (session_key(gid, mid), rebalance_key(gid, mid), join_key(gid, mid), sync_key(gid, mid)):
            ctx.cancel(key)
    if migration.can_downgrade(ctx, group, gone):
        migration.downgrade(ctx, group, gone)
        return
    for mid in sorted(gone):
        for record in _remove_member_records(gid, mid):
            ctx.write(record)
    remaining = {m: v for m, v in group.members.items() if m not in gone}
    regexes = dict(group.resolved_regular_expressions)
    for regex in sorted({m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}):
        if not any(v.subscribed_topic_regex == regex for v in remaining.values()):
            ctx.write(r.consumer_regular_expression_tombstone(gid, regex))
            regexes.pop(regex, None)
    new_hash = metadata_hash(_subscribed_topic_names(remaining, regexes), ctx.state.topics_image)
    ctx.write(r.consumer_group_epoch_record(gid, group.group_epoch + 1, new_hash))


def _remove_member_records(group_id: str, member_id: str) -> list[Record]:
    """Kafka's removeMember: the order replay needs (current assignment first)."""
    return [
        r.consumer_current_assignment_tombstone(group_id, member_id),
        r.consumer_target_assignment_tombstone(group_id, member_id),
        r.consumer_member_subscription_tombstone(group_id, member_id),
    ]


def expire_session(ctx: OperationContext, group_id: str, member_id: str) -> None:
    """Kafka's consumerGroupFenceMemberOperation on session expiry: the member is fenced, if it is
    still there."""
    group = ctx.group(group_id)
    if isinstance(group, ConsumerGroup) and member_id in group.members:
        fence_member(ctx, group, group.members[member_id])


def expire_rebalance(ctx: OperationContext, group_id: str, member_id: str, member_epoch: int) -> None:
    """Kafka's rebalance timeout: a member still at the epoch at which it was asked to revoke is
    fenced (it took longer than its rebalance timeout to give the partitions up)."""
    group = ctx.group(group_id)
    if isinstance(group, ConsumerGroup):
        member = group.members.get(member_id)
        if member is not None and member.member_epoch == member_epoch:
            fence_member(ctx, group, member)


def _subscribed_topic_names(
    members: Mapping[str, ConsumerGroupMember], regexes: Mapping[str, ResolvedRegularExpression]
) -> set[str]:
    """The topics the group subscribes to: by name, and through the regexes its members use."""
    names: set[str] = set()
    for m in members.values():
        names |= m.subscribed_topic_names
        if m.subscribed_topic_regex and m.subscribed_topic_regex in regexes:
            names |= regexes[m.subscribed_topic_regex].topics
    return names


# -- the heartbeat ---------------------------------------------------------------------------------------


class _RegexChange(enum.Enum):
    """Kafka's UpdateRegularExpressionsResult."""

    NO_CHANGE = 0
    REGEX_UPDATED = 1
    REGEX_UPDATED_AND_RESOLVED = 2


@dataclass
class GroupChange:
    """One operation's change to a consumer group, in Kafka's steps (the heartbeat's, which a
    classic member's JoinGroup into a consumer group repeats): the records it will write (only once
    every check passed), and the members, targets and resolved regexes as they will be after them.
    `begin` first; `write` last."""

    ctx: OperationContext
    group_id: str
    records: list[Record] = field(default_factory=list)

    def begin(self, group: ConsumerGroup) -> None:
        self.image: TopicsImage = self.ctx.state.topics_image
        self.members = dict(group.members)
        self.targets = dict(group.target_assignment)
        self.regexes = dict(group.resolved_regular_expressions)

    def subscribe(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember, regexes: bool = True
    ) -> tuple[bool, bool]:
        """Kafka's hasMemberSubscriptionChanged and maybeUpdateRegularExpressions (not for a classic
        member's JoinGroup: it has no regex): the member's record if it changed. Returns (bump the
        group epoch, the subscription changed)."""
        names_changed = False
        if updated != member:
            self.records.append(r.consumer_member_subscription_record(self.group_id, updated))
            names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        self.members[updated.member_id] = updated
        if not regexes:
            return names_changed, names_changed
        regex_change, resolution_changed = self._update_regular_expressions(group, member, updated)
        bump = names_changed or regex_change is _RegexChange.REGEX_UPDATED_AND_RESOLVED or resolution_changed
        return bump, names_changed or regex_change is not _RegexChange.NO_CHANGE

    def group_epoch(self, group: ConsumerGroup, bump: bool) -> int:
        """Kafka's updateSubscriptionMetadata: the group epoch, bumped (a ConsumerGroupMetadata
        record) for a new group, when asked, or when the subscribed topics' metadata hash changed."""
        new_hash = metadata_hash(_subscribed_topic_names(self.members, self.regexes), self.image)
        epoch = group.group_epoch
        if bump or epoch == 0 or new_hash != group.metadata_hash:
            epoch += 1
            self.records.append(r.consumer_group_epoch_record(self.group_id, epoch, new_hash))
        return epoch

    def target(
        self, group: ConsumerGroup, group_epoch: int, member: ConsumerGroupMember, updated: ConsumerGroupMember
    ) -> tuple[int, TopicPartitions]:
        """The member's target and its epoch: a new target assignment when the group epoch moved past
        the target's (Kafka's updateTargetAssignment), else the current one."""
        if group_epoch > group.target_assignment_epoch:
            return group_epoch, self._update_target_assignment(group, group_epoch, member, updated)
        return group.target_assignment_epoch, self.targets.get(updated.member_id, {})

    def reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        target_epoch: int,
        target: TopicPartitions,
        owned: Assignment | None,
        has_subscription_changed: bool,
    ) -> ConsumerGroupMember:
        """Kafka's maybeReconcile: the member a step towards its target, its record if it moved."""
        if not has_subscription_changed and member.is_reconciled_to(target_epoch):
            return member
        topic_name = lambda tid: self.image.by_id[tid].name if tid in self.image.by_id else None  # noqa: E731
        try:
            reconciled = reconcile(
                member,
                target_epoch,
                target,
                group.current_partition_epoch,
                owned,
                has_subscription_changed=has_subscription_changed,
                subscribed_topic_ids=subscribed_topic_ids_resolver(
                    topic_name, {regex: rr.topics for regex, rr in self.regexes.items()}
                ),
            )
        except FencedMemberEpochError as e:
            raise _Rejected(ErrorCode.fenced_member_epoch, str(e)) from None
        if reconciled != member:
            self.records.append(r.consumer_current_assignment_record(self.group_id, reconciled))
        return reconciled

    def write(self, member: ConsumerGroupMember, reconciled: ConsumerGroupMember) -> None:
        """Every check passed: the records go out, and a consumer-protocol member that must revoke
        gets its rebalance timeout (Kafka's maybeReconcile; classic members have join and sync
        timeouts instead)."""
        for record in self.records:
            self.ctx.write(record)
        if reconciled != member and not reconciled.use_classic_protocol:
            key = rebalance_key(self.group_id, reconciled.member_id)
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self.ctx.schedule(key, reconciled.rebalance_timeout_ms, "expire_consumer_rebalance",
                                  self.group_id, reconciled.member_id, reconciled.member_epoch)
            else:
                self.ctx.cancel(key)

    # -- 2. regular expressions ------------------------------------------------------------------------
    def _update_regular_expressions(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember
    ) -> tuple[_RegexChange, bool]:
        """Kafka's maybeUpdateRegularExpressions, resolving inline (see the module's docstring).
        Returns how the member's regex changed, and whether a resolution changed what a regex
        matches (Kafka's handleRegularExpressionsResult bumps the group epoch then)."""
        ctx, gid = self.ctx, group.group_id
        old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
        change = _RegexChange.NO_CHANGE
        require_refresh = False
        if old != new:
            change = _RegexChange.REGEX_UPDATED
            if old and group.num_subscribed_members(old) == 1:
                self.records.append(r.consumer_regular_expression_tombstone(gid, old))
                self.regexes.pop(old, None)
            if old and not new:
                # KAFKA-19899 (Kafka 4.2): no regex is a resolved one, matching nothing; the
                # target must drop the topics the old one gave the member now.
                change = _RegexChange.REGEX_UPDATED_AND_RESOLVED
            if new:
                if group.num_subscribed_members(new) == 0:
                    reason = invalid_reason(new)
                    if reason is not None:
                        raise _Rejected(
                            ErrorCode.invalid_regular_expression,
                            f"SubscribedTopicRegex `{new}` is not a valid regular expression: {reason}.",
                        )
                    require_refresh = True
                elif new in group.resolved_regular_expressions:
                    change = _RegexChange.REGEX_UPDATED_AND_RESOLVED

        subscribed = dict(group.subscribed_regular_expressions)
        if old:
            _dec(subscribed, old)
        if new:
            subscribed[new] = subscribed.get(new, 0) + 1
        if not subscribed:
            return change, False
        last_refresh = max((rr.timestamp for rr in group.resolved_regular_expressions.values()), default=-1)
        if ctx.now <= last_refresh + REGEX_REFRESH_MIN_INTERVAL_MS:
            return change, False
        last_version = min((rr.version for rr in group.resolved_regular_expressions.values()), default=-1)
        require_refresh = (
            require_refresh
            or len(subscribed) != len(group.resolved_regular_expressions)
            or last_version < self.image_new_topics_version()
            or ctx.now > last_refresh + ctx.config.consumer_regex_refresh_interval_ms
        )
        if not require_refresh:
            return change, False
        changed = False
        version = self.image_new_topics_version()
        for regex, topics in resolve(subscribed, self.image.by_name).items():
            old_resolved = self.regexes.get(regex)
            if old_resolved is None or old_resolved.topics != topics:
                changed = True
            self.regexes[regex] = ResolvedRegularExpression(topics, version, ctx.now)
            self.records.append(r.consumer_regular_expression_record(gid, regex, topics, version, ctx.now))
        return change, changed

    def image_new_topics_version(self) -> int:
        """Kafka's lastMetadataImageWithNewTopics: when the image last gained a topic."""
        return self.ctx.state.topics_new_at

    # -- 3. the target assignment ----------------------------------------------------------------------

    def _update_target_assignment(
        self, group: ConsumerGroup, group_epoch: int, member: ConsumerGroupMember, updated: ConsumerGroupMember
    ) -> TopicPartitions:
        """Kafka's updateTargetAssignment with the TargetAssignmentBuilder: the preferred server
        assignor over every member's subscribed topics; a record for each member whose target
        changed (or that had none), then the new target epoch. Returns the member's target."""
        gid, image = group.group_id, self.image
        counts = dict(group.server_assignors)
        if member.server_assignor_name is not None and group.member(member.member_id) is not None:
            _dec(counts, member.server_assignor_name)
        if updated.server_assignor_name is not None:
            counts[updated.server_assignor_name] = counts.get(updated.server_assignor_name, 0) + 1
        name = min(counts, key=lambda n: (-counts[n], n)) if counts else self.ctx.config.consumer_assignors[0]

        topic_ids = {n: t.topic_id for n, t in image.by_name.items()}
        specs: dict[str, MemberSpec] = {}
        partitions: dict[TopicId, int] = {}
        for mid in sorted(self.members):
            m = self.members[mid]
            names = set(m.subscribed_topic_names)
            if m.subscribed_topic_regex and m.subscribed_topic_regex in self.regexes:
                names |= self.regexes[m.subscribed_topic_regex].topics
            ids = frozenset(topic_ids[n] for n in names if n in topic_ids)
            for tid in ids:
                partitions[tid] = image.by_id[tid].partitions
            specs[mid] = MemberSpec(ids, self.targets.get(mid, {}), m.rack_id, m.instance_id)
        try:
            computed = assignor(name)(GroupSpec(specs), Topics(partitions))
        except PartitionAssignorError as e:
            raise _Rejected(
                ErrorCode.unknown_server_error,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {e}",
            ) from None
        for mid in sorted(specs):
            new = freeze_partitions(computed.get(mid, {}))
            old = self.targets.get(mid)
            if old is None or new != old:
                self.records.append(r.consumer_target_assignment_record(gid, mid, new))
            self.targets[mid] = new
        self.records.append(r.consumer_target_assignment_epoch_record(gid, group_epoch))
        return self.targets.get(updated.member_id, {})


@dataclass
class _Heartbeat(GroupChange):
    """ConsumerGroupHeartbeat's own steps around GroupChange's."""

    req: ConsumerGroupHeartbeatRequest = None  # type: ignore[assignment]

    def run(self) -> ConsumerGroupHeartbeatResponse:
        ctx, req, gid = self.ctx, self.req, self.group_id
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group(joining)
        mid = req.member_id or ctx.state.new_member_id(req.client_id)
        check_not_full(ctx, group, req.member_id)
        self.begin(group)
        if req.instance_id is None:
            member = self._dynamic_member(group, mid, joining)
        else:
            member = self._static_member(group, mid, joining)

        # 1. The member as it asks to be now; the group epoch.
        updated = _as_asked(member, req)
        bump, has_subscription_changed = self.subscribe(group, member, updated)
        group_epoch = self.group_epoch(group, bump)
        # 2. Its target; 3. a step towards it.
        target_epoch, target = self.target(group, group_epoch, member, updated)
        reconciled = self.reconcile(group, updated, target_epoch, target, req.topic_partitions, has_subscription_changed)
        self.write(updated, reconciled)
        ctx.schedule(session_key(gid, mid), ctx.consumer_session_timeout_ms(gid), "expire_consumer_session", gid, mid)

        # The answer: the assignment on a join, a full request, or a change.
        full_request = (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        assignment: Assignment | None = None
        if joining or full_request or reconciled.assigned_partitions != member.assigned_partitions:
            assignment = _as_response(reconciled.assigned_partitions)
        return ConsumerGroupHeartbeatResponse(
            ErrorCode.none,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=ctx.consumer_heartbeat_interval_ms(gid),
            assignment=assignment,
        )

    # -- 1. the group and the member ------------------------------------------------------------------

    def _group(self, create: bool) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup: a new group is materialized by the replay of this
        heartbeat's records. An Empty classic group (offsets only, or every member gone) gives its
        id up: its tombstone comes first (Kafka's maybeDeleteEmptyClassicGroup), its offsets stay.
        A classic group with members is upgraded, if the migration policy allows (migration.py)."""
        gid = self.req.group_id
        group = self.ctx.group(gid)
        if isinstance(group, ConsumerGroup):
            return group
        if group is None:
            if not create:
                raise _Rejected(ErrorCode.group_id_not_found, f"Consumer group {gid} not found.")
            return ConsumerGroup(gid)
        if create and isinstance(group, ClassicGroup) and group.is_empty():
            self.records.append(group_tombstone(gid))
            return ConsumerGroup(gid)
        if create and isinstance(group, ClassicGroup) and migration.can_upgrade(self.ctx, group):
            try:
                converted, records = migration.upgrade(self.ctx, group)
            except migration.MigrationRefused as e:
                raise _Rejected(ErrorCode.group_id_not_found, str(e)) from None
            self.records += records
            return converted
        raise _Rejected(ErrorCode.group_id_not_found, f"Group {gid} is not a consumer group.")

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, create: bool) -> ConsumerGroupMember:
        """Kafka's getOrMaybeSubscribeDynamicConsumerGroupMember."""
        member = group.member(member_id)
        if member is None:
            if not create:
                raise _Rejected(
                    ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
                )
            member = ConsumerGroupMember(member_id)
        self._check_member_epoch(member)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, create: bool) -> ConsumerGroupMember:
        """Kafka's getOrMaybeSubscribeStaticConsumerGroupMember: a static member rejoining with a new
        member id takes the place (and the assignment) of the one its instance left with epoch -2."""
        instance_id = self.req.instance_id
        assert instance_id is not None
        existing = group.static_member(instance_id)
        if not create:
            member = _static_member(group, instance_id, member_id)
            self._check_member_epoch(member)
            return member
        if existing is None:
            return group.member(member_id) or ConsumerGroupMember(member_id)
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _Rejected(
                ErrorCode.unreleased_instance_id,
                f"Static member {member_id} with instance id {instance_id} cannot join the group because "
                f"the instance id is owned by {existing.member_id} member.",
            )
        new_member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        # Kafka's replaceMember: the old member's records go, the new one takes its target.
        gid = group.group_id
        target = group.target_assignment.get(existing.member_id, {})
        self.records += _remove_member_records(gid, existing.member_id)
        self.records.append(r.consumer_member_subscription_record(gid, new_member))
        self.records.append(r.consumer_target_assignment_record(gid, member_id, target))
        self.records.append(r.consumer_current_assignment_record(gid, new_member))
        self.members.pop(existing.member_id, None)
        self.targets.pop(existing.member_id, None)
        self.targets[member_id] = target
        return new_member

    def _check_member_epoch(self, member: ConsumerGroupMember) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid, with KAFKA-19233 (4.2): epoch 0 is a
        member rejoining after it was fenced (it gave up everything), whatever epoch the
        coordinator still holds for it; before, it was fenced again until its session ran out."""
        received = self.req.member_epoch
        if received == JOIN_GROUP_MEMBER_EPOCH:
            return
        if received > member.member_epoch:
            raise _Rejected(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if received < member.member_epoch and (
            received != member.previous_member_epoch or not _is_subset(self.req.topic_partitions, member.assigned_partitions)
        ):
            raise _Rejected(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )



def _as_asked(member: ConsumerGroupMember, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
    """Kafka's ConsumerGroupMember.Builder(member).maybeUpdate...(request): a field the request
    leaves null (or -1) keeps the member's value. The member itself when nothing changes, as on
    most heartbeats (a new member value costs more than the rest of such a heartbeat)."""
    changes: dict = {}
    if req.instance_id is not None and req.instance_id != member.instance_id:
        changes["instance_id"] = req.instance_id
    if req.rack_id is not None and req.rack_id != member.rack_id:
        changes["rack_id"] = req.rack_id
    if req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
    if req.server_assignor is not None and req.server_assignor != member.server_assignor_name:
        changes["server_assignor_name"] = req.server_assignor
    if req.subscribed_topic_names is not None:
        names = frozenset(req.subscribed_topic_names)
        if names != member.subscribed_topic_names:
            changes["subscribed_topic_names"] = names
    if req.subscribed_topic_regex is not None and req.subscribed_topic_regex != member.subscribed_topic_regex:
        changes["subscribed_topic_regex"] = req.subscribed_topic_regex
    if req.client_id != member.client_id:
        changes["client_id"] = req.client_id
    if req.client_host != member.client_host:
        changes["client_host"] = req.client_host
    if member.classic_member_metadata is not None:
        changes["classic_member_metadata"] = None
    return replace(member, **changes) if changes else member


def check_not_full(ctx: OperationContext, group: ConsumerGroup, member_id: str) -> None:
    """Kafka's throwIfConsumerGroupIsFull: a full group takes no new member."""
    max_size = ctx.config.consumer_max_size
    if len(group.members) >= max_size and (not member_id or member_id not in group.members):
        raise _Rejected(
            ErrorCode.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of {max_size} members.",
        )


def _dec(counts: dict[str, int], key: str) -> None:
    value = counts.get(key, 0)
    if value <= 1:
        counts.pop(key, None)
    else:
        counts[key] = value - 1


def _is_subset(owned: Assignment | None, assigned: TopicPartitions) -> bool:
    """Kafka's isSubset: the owned partitions the heartbeat reports are all assigned to the member
    (not reporting them is not a subset)."""
    if owned is None:
        return False
    for topic_id, ps in owned:
        mine = assigned.get(topic_id)
        if mine is None or any(p not in mine for p in ps):
            return False
    return True


def _as_response(partitions: TopicPartitions) -> Assignment:
    return tuple((topic_id, tuple(sorted(ps))) for topic_id, ps in sorted(partitions.items()) if ps)


__all__ = ["GroupChange", "check_not_full", "consumer_group_heartbeat", "expire_rebalance", "expire_session",
           "fence_member", "fence_members", "validate"]
