"""A consumer group (KIP-848) as the group coordinator holds it: Kafka's modern/ModernGroup and
modern/consumer/ConsumerGroup for members that speak the consumer protocol.

What it holds mirrors Kafka 4.2's ConsumerGroup: the group epoch, the members by id and the static
ones by instance id, the target assignment (its epoch and each member's part), who owns each
partition now and at which epoch (currentPartitionEpoch, the fence that keeps a partition from two
members at once), how many members subscribe to each topic name and each regular expression, the
regular expressions resolved to topic names, the counts of server assignors the members ask for,
and the group's state and subscription type, both derived from the rest.

As in coordinator/share/group.py, the group is changed only through its update methods, which the
replay of the group's records calls (Kafka's GroupMetadataManager.replay calls the same methods of
its ConsumerGroup); an operation reads the group and writes records. Members are immutable values
(member.py). Everything an update derives (counts, partition epochs, subscription type, state) is
kept up to date by that update, as Kafka does, not recomputed on read.

It also answers the group-kind questions of coordinator/group.py's Group protocol: offset commit and
fetch checks by member epoch, its tombstones, offset expiry, session timers after a load.

Left out for now: members that joined with the classic protocol (Kafka's numClassicProtocolMembers,
classicProtocolMembersSupportedProtocols, fromClassicGroup and the online migration), the inverted
target assignment (the assignors read ownership from GroupSpec), and the metadata refresh deadline
(the heartbeat computes the metadata hash each time: it depends only on the image and the
subscriptions, so it decides the same).

Kafka iterates hash maps; here every walk whose order can show is over sorted keys.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from coordinator.classic.group import CONSUMER_PROTOCOL_TYPE
from coordinator.classic.messages import ListedGroup
from coordinator.classic.records import offset_tombstone
from coordinator.consumer import records
from coordinator.consumer.assignment_spec import GroupSpec, MemberSpec, TopicId
from coordinator.consumer.member import ConsumerGroupMember, TopicPartitions, freeze_partitions
from coordinator.group import OffsetExpirationCondition
from coordinator.member_state import MemberState
from coordinator.topic_partitions import partitions_view
from kernel.codec import Record
from kernel.lifecycle import IllegalTransition, validate_transition

NO_EPOCH = -1  # currentPartitionEpoch's answer for a partition nobody owns


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroup.ConsumerGroupState, named as DescribeGroups and ListGroups answer it.

    The live states are not chosen but derived, after every update, from the members and the epochs
    (ConsumerGroup.maybeUpdateGroupState): EMPTY without members, ASSIGNING while the group epoch is
    ahead of the target assignment epoch, RECONCILING while a member is not STABLE at the target
    epoch, STABLE otherwise. Any live state can follow any other (a member joining, leaving, or
    reporting back moves the group between all four), so the table restricts only DEAD: the group's
    deletion, reached from EMPTY alone (its tombstones remove the members first), and final.
    """

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def validate_transition(self, target: "ConsumerGroupState") -> None:
        """Raise IllegalTransition, changing nothing, unless self -> target is legal (staying is)."""
        validate_transition(_VALID_PREVIOUS, self, target, "consumer group", stay=True)


_S = ConsumerGroupState
_LIVE = frozenset({_S.EMPTY, _S.ASSIGNING, _S.RECONCILING, _S.STABLE})
# target -> the states it may follow
_VALID_PREVIOUS: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    _S.EMPTY: _LIVE,
    _S.ASSIGNING: _LIVE,
    _S.RECONCILING: _LIVE,
    _S.STABLE: _LIVE,
    _S.DEAD: frozenset({_S.EMPTY}),
}


class SubscriptionType(enum.Enum):
    """Kafka's api.assignor.SubscriptionType."""

    HOMOGENEOUS = "Homogeneous"
    HETEROGENEOUS = "Heterogeneous"


class SubscriptionCount(NamedTuple):
    """Kafka's modern/SubscriptionCount: how many members name a topic, and how many resolved
    regular expressions match it (one per regex, however many members subscribe to it)."""

    by_name: int = 0
    by_regex: int = 0


@dataclass(frozen=True, slots=True)
class ResolvedRegularExpression:
    """Kafka's modern/consumer/ResolvedRegularExpression: the topic names a regex matched, the
    metadata image version it was resolved against and when (what ConsumerGroupRegularExpression
    records carry)."""

    topics: frozenset[str]
    version: int = 0
    timestamp: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", frozenset(self.topics))


class PartitionEpochError(RuntimeError):
    """Kafka's IllegalStateException from add/removePartitionEpochs: a partition claimed while
    another member (or the same member at another epoch) still owns it, or released at an epoch it
    is not owned at. The group's records contradict each other; nothing was changed."""


# Kafka's Utils.incValue/decValue and SubscriptionCount's inc/dec helpers, for Map.compute: a count
# that drops to nothing is removed, and decrementing an absent key leaves it absent.


def _inc(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _dec(counts: dict[str, int], key: str) -> None:
    value = counts.get(key)
    if value is None or value == 1:
        counts.pop(key, None)
    else:
        counts[key] = value - 1


def _count(counts: dict[str, SubscriptionCount], topic: str, by_name: int = 0, by_regex: int = 0) -> None:
    """Add to a topic's subscription counts (a negative number takes away): a topic whose counts
    both drop to nothing is removed, and taking from an absent topic leaves it absent."""
    c = counts.get(topic)
    if c is None:
        if by_name < 0 or by_regex < 0:
            return
        c = SubscriptionCount()
    new = SubscriptionCount(c.by_name + by_name, c.by_regex + by_regex)
    if new.by_name <= 0 and new.by_regex <= 0:
        counts.pop(topic, None)
    else:
        counts[topic] = new


def subscription_type(
    subscribed_regular_expressions: Mapping[str, int],
    subscribed_topic_names: Mapping[str, SubscriptionCount],
    num_members: int,
) -> SubscriptionType:
    """Kafka's ConsumerGroup.subscriptionType (4.0+, with regular expressions). Without regexes the
    group is homogeneous when every member names every subscribed topic. With regexes it is
    homogeneous only when all the members subscribe to one and the same regex and name no topic,
    and each subscribed topic comes from exactly one resolved regex."""
    if not subscribed_regular_expressions:
        if all(c.by_name == num_members for c in subscribed_topic_names.values()):
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS
    # Kafka looks at the first regex's count only; since a member has at most one regex, that count
    # equals the number of members exactly when it is the only regex, so the order does not matter.
    if len(subscribed_regular_expressions) == 1 and next(iter(subscribed_regular_expressions.values())) == num_members:
        if all(c.by_regex == 1 and c.by_name == 0 for c in subscribed_topic_names.values()):
            return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


def _regex_of(member: ConsumerGroupMember | None) -> str | None:
    """Kafka's ConsumerGroupMember.subscribedTopicRegexOrNull: the empty regex is no regex."""
    if member is None or not member.subscribed_topic_regex:
        return None
    return member.subscribed_topic_regex


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    group_epoch: int = 0
    metadata_hash: int = 0  # ConsumerGroupMetadataValue.MetadataHash (KIP-1101, Kafka 4.1+)
    target_assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, TopicPartitions] = field(default_factory=dict)
    resolved_regular_expressions: dict[str, ResolvedRegularExpression] = field(default_factory=dict)
    # Derived by the updates below; never set directly.
    static_members: dict[str, str] = field(default_factory=dict, init=False)  # instance id -> member id
    subscribed_topic_names: dict[str, SubscriptionCount] = field(default_factory=dict, init=False)
    subscribed_regular_expressions: dict[str, int] = field(default_factory=dict, init=False)
    server_assignors: dict[str, int] = field(default_factory=dict, init=False)
    subscription_type: SubscriptionType = field(default=SubscriptionType.HOMOGENEOUS, init=False)
    # topic id -> partition -> the epoch of the member that owns it (assigned or pending revocation)
    partition_epochs: dict[TopicId, dict[int, int]] = field(default_factory=dict, init=False)

    group_type = "consumer"

    @property
    def protocol_type(self) -> str:
        return CONSUMER_PROTOCOL_TYPE

    # -- the parts of the Group protocol (coordinator/group.py) that need no records nor offsets ----

    def memory_record(self, group_id: str, group: Any) -> None:
        return None  # a consumer group changes only by its durable records

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, CONSUMER_PROTOCOL_TYPE, self.state.value, self.group_type)

    def validate_delete(self) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateDeleteGroup."""
        return None if self.state is ConsumerGroupState.EMPTY else ErrorCode.non_empty_group

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's ModernGroup.isSubscribedToTopic: by name or through a resolved regex."""
        return topic in self.subscribed_topic_names

    def delete_records(self, offsets: Iterable[tuple[str, int]]) -> list[Record]:
        """Kafka's createGroupTombstoneRecords after the offsets' tombstones, in the order replay
        needs: every member's current assignment, then targets and the target epoch, then the
        members' subscriptions, the resolved regular expressions, and the group epoch last."""
        gid = self.group_id
        members = sorted(self.members)
        return [
            *(offset_tombstone(gid, t, p) for t, p in sorted(offsets)),
            *(records.consumer_current_assignment_tombstone(gid, m) for m in members),
            *(records.consumer_target_assignment_tombstone(gid, m) for m in members),
            records.consumer_target_assignment_epoch_tombstone(gid),
            *(records.consumer_member_subscription_tombstone(gid, m) for m in members),
            *(records.consumer_regular_expression_tombstone(gid, r) for r in sorted(self.resolved_regular_expressions)),
            records.consumer_group_epoch_tombstone(gid),
        ]

    def share_state_deletes(self, image: Any) -> tuple:
        return ()

    def validate_offset_commit(self, req: Any) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit (no transactions here): a commit from outside
        group management (epoch < 0) into a group without members; otherwise a member, at its
        current epoch, with OffsetCommit v9 or later."""
        if req.generation_id < 0 and not self.members:
            return None
        member = self.members.get(req.member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if req.api_version < 9 and not member.use_classic_protocol:
            return ErrorCode.unsupported_version
        return _validate_member_epoch(req.generation_id, member)

    def validate_offset_delete(self) -> ErrorCode | None:
        return None  # Kafka's ConsumerGroup.validateOffsetDelete checks nothing

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetFetch: an admin or a client outside group management
        (no member id, epoch < 0) may fetch; a member must give its current epoch."""
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        return _validate_member_epoch(member_epoch, member)

    def offset_expiration_condition(self) -> OffsetExpirationCondition:
        """Kafka's ConsumerGroup.offsetExpirationCondition: from each offset's commit (for the
        topics the group no longer subscribes to, which the cleanup asks is_subscribed_to_topic)."""
        return OffsetExpirationCondition()

    def is_deletable_without_offsets(self) -> bool:
        return self.is_empty()

    def arm_sessions(self, ctx: Any) -> None:
        """After a load every member's session starts again from now (Kafka's onLoaded), and a
        member still revoking gets its rebalance timeout back."""
        gid = self.group_id
        for member_id in sorted(self.members):
            member = self.members[member_id]
            timeout = ctx.consumer_session_timeout_ms(gid)
            if member.classic_member_metadata is not None:
                timeout = member.classic_member_metadata.session_timeout_ms
            ctx.schedule(session_key(gid, member_id), timeout, "expire_consumer_session", gid, member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                ctx.schedule(rebalance_key(gid, member_id), member.rebalance_timeout_ms,
                             "expire_consumer_rebalance", gid, member_id, member.member_epoch)

    def copy(self) -> "ConsumerGroup":
        """A copy the updates may change without touching this one (members and values are
        immutable; only the maps, and the partition epochs' inner maps, are copied)."""
        clone = replace(self)  # init=False fields are reset by replace: copy them over
        clone.members = dict(self.members)
        clone.target_assignment = dict(self.target_assignment)
        clone.resolved_regular_expressions = dict(self.resolved_regular_expressions)
        clone.static_members = dict(self.static_members)
        clone.subscribed_topic_names = dict(self.subscribed_topic_names)
        clone.subscribed_regular_expressions = dict(self.subscribed_regular_expressions)
        clone.server_assignors = dict(self.server_assignors)
        clone.subscription_type = self.subscription_type
        clone.partition_epochs = {tid: dict(ps) for tid, ps in self.partition_epochs.items()}
        return clone

    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def durable_view(self) -> tuple[Any, ...]:
        """What the log holds about the group, for comparing a live group with a replayed one."""
        return (
            "consumer",
            self.state.value,
            self.group_epoch,
            self.metadata_hash,
            self.target_assignment_epoch,
            tuple(sorted((mid, _member_view(m)) for mid, m in self.members.items())),
            tuple(sorted((mid, partitions_view(p)) for mid, p in self.target_assignment.items())),
            tuple(
                (regex, tuple(sorted(r.topics)), r.version, r.timestamp)
                for regex, r in sorted(self.resolved_regular_expressions.items())
            ),
        )

    # -- reads --------------------------------------------------------------------------------------

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def get_or_create_member(self, member_id: str) -> ConsumerGroupMember:
        """Kafka's getOrMaybeCreateMember(memberId, true): the member, or a new one not yet in the
        group (update_member adds it). The unknown-member case of createIfNotExists=false is
        `member()` answering None: the heartbeat answers UNKNOWN_MEMBER_ID itself."""
        return self.members.get(member_id) or ConsumerGroupMember(member_id)

    def static_member_id(self, instance_id: str | None) -> str | None:
        """Kafka's staticMemberId."""
        return None if instance_id is None else self.static_members.get(instance_id)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        """Kafka's staticMember."""
        member_id = self.static_member_id(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def member_target_assignment(self, member_id: str, instance_id: str | None = None) -> TopicPartitions:
        """Kafka's targetAssignment(memberId[, instanceId]): a static member's is the one its
        instance id holds (the member id it had before rejoining); empty if there is none."""
        if instance_id is not None:
            member_id = self.static_member_id(instance_id)
            if member_id is None:
                return {}
        return self.target_assignment.get(member_id, {})

    def current_partition_epoch(self, topic_id: TopicId, partition: int) -> int:
        """Kafka's currentPartitionEpoch: the epoch of the partition's owner, -1 if none. This is
        the `current_partition_epoch` reconcile() asks for."""
        return self.partition_epochs.get(topic_id, {}).get(partition, NO_EPOCH)

    def num_subscribed_members(self, regex: str) -> int:
        """Kafka's numSubscribedMembers."""
        return self.subscribed_regular_expressions.get(regex, 0)

    def preferred_server_assignor(self) -> str | None:
        """Kafka's preferredServerAssignor: the assignor most members ask for. Kafka breaks a tie
        by hash-map order; here the first name in sorted order wins."""
        if not self.server_assignors:
            return None
        return min(self.server_assignors, key=lambda name: (-self.server_assignors[name], name))

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: the member is UNRELEASED_PARTITIONS and a partition
        of its target that it does not have yet is still owned by someone."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in sorted(self.target_assignment.get(member.member_id, {}).items()):
            assigned = member.assigned_partitions.get(topic_id, frozenset())
            for partition in sorted(partitions - assigned):
                if self.current_partition_epoch(topic_id, partition) != NO_EPOCH:
                    return True
        return False

    def group_spec(self, topic_ids: Mapping[str, TopicId]) -> GroupSpec:
        """What the server assignors are given (Kafka's TargetAssignmentBuilder builds GroupSpecImpl
        from MemberSubscriptionAndAssignmentImpl): each member's subscribed topics, its named ones
        and those its resolved regex matched, as ids through `topic_ids` (topic name -> id; a topic
        the cluster does not have is dropped, as Kafka's TopicIds skips names the image lacks), and
        its current target assignment. A regex not resolved yet contributes nothing."""
        members: dict[str, MemberSpec] = {}
        for member_id in sorted(self.members):
            m = self.members[member_id]
            names: Iterable[str] = m.subscribed_topic_names
            regex = _regex_of(m)
            if regex is not None and regex in self.resolved_regular_expressions:
                names = m.subscribed_topic_names | self.resolved_regular_expressions[regex].topics
            ids = frozenset(topic_ids[name] for name in names if name in topic_ids)
            members[member_id] = MemberSpec(
                subscribed_topic_ids=ids,
                assignment=self.target_assignment.get(member_id, {}),
                rack_id=m.rack_id,
                instance_id=m.instance_id,
            )
        return GroupSpec(members)

    # -- updates (what the replay of the group's records calls) ----------------------------------------

    def set_group_epoch(self, group_epoch: int) -> None:
        """Kafka's ModernGroup.setGroupEpoch."""
        self._require_alive()
        self.group_epoch = group_epoch
        self._update_state()

    def set_metadata_hash(self, metadata_hash: int) -> None:
        """Kafka's ModernGroup.setMetadataHash (4.1+)."""
        self._require_alive()
        self.metadata_hash = metadata_hash

    def set_target_assignment_epoch(self, target_assignment_epoch: int) -> None:
        """Kafka's ModernGroup.setTargetAssignmentEpoch."""
        self._require_alive()
        self.target_assignment_epoch = target_assignment_epoch
        self._update_state()

    def update_target_assignment(self, member_id: str, assignment: Mapping[TopicId, Iterable[int]]) -> None:
        """Kafka's ModernGroup.updateTargetAssignment (the target of a member need not be a member
        yet: the records of a new assignment may come before the member's own)."""
        self._require_alive()
        self.target_assignment[member_id] = freeze_partitions(assignment)

    def remove_target_assignment(self, member_id: str) -> None:
        """Kafka's ModernGroup.removeTargetAssignment."""
        self._require_alive()
        self.target_assignment.pop(member_id, None)

    def update_member(self, new_member: ConsumerGroupMember) -> None:
        """Kafka's ConsumerGroup.updateMember: add or replace the member, and bring what follows from
        the members up to date. Raises PartitionEpochError, changing nothing, if the member claims a
        partition someone else still owns."""
        if new_member is None:
            raise ValueError("new_member cannot be None")
        self._require_alive()
        old_member = self.members.get(new_member.member_id)
        # The partition epochs are the only part that can fail: staged first, so that a conflict
        # leaves the whole group as it was (Kafka would have half-applied the update).
        staged: dict[TopicId, dict[int, int]] = {}
        if old_member is not None:
            self._stage_remove(staged, old_member.assigned_partitions, old_member.member_epoch)
            self._stage_remove(staged, old_member.partitions_pending_revocation, old_member.member_epoch)
        self._stage_add(staged, new_member.assigned_partitions, new_member.member_epoch)
        self._stage_add(staged, new_member.partitions_pending_revocation, new_member.member_epoch)

        self.members[new_member.member_id] = new_member
        self._update_subscribed_topic_names(old_member, new_member)
        self._update_server_assignors(old_member, new_member)
        self._commit_partition_epochs(staged)
        self._update_subscribed_regular_expression(old_member, new_member)
        if new_member.instance_id is not None:
            self.static_members[new_member.instance_id] = new_member.member_id
        self._update_state()
        self._update_subscription_type()

    def remove_member(self, member_id: str) -> None:
        """Kafka's ConsumerGroup.removeMember (removing an unknown member changes nothing). Raises
        PartitionEpochError, changing nothing, if the member's partitions are owned at another
        epoch than its own (which only contradicting records could cause)."""
        self._require_alive()
        old_member = self.members.get(member_id)
        staged: dict[TopicId, dict[int, int]] = {}
        if old_member is not None:
            self._stage_remove(staged, old_member.assigned_partitions, old_member.member_epoch)
            self._stage_remove(staged, old_member.partitions_pending_revocation, old_member.member_epoch)
        self.members.pop(member_id, None)
        self._update_subscribed_topic_names(old_member, None)
        self._update_server_assignors(old_member, None)
        self._commit_partition_epochs(staged)
        self._update_subscribed_regular_expression(old_member, None)
        if old_member is not None and old_member.instance_id is not None:
            self.static_members.pop(old_member.instance_id, None)
        self._update_state()
        self._update_subscription_type()

    def update_resolved_regular_expression(self, regex: str, resolved: ResolvedRegularExpression | None) -> None:
        """Kafka's ConsumerGroup.updateResolvedRegularExpression: replace what the regex resolved to;
        each topic it matches counts once more in the subscribed topic names (by regex)."""
        self._require_alive()
        self._remove_resolved(regex)
        if resolved is not None:
            self.resolved_regular_expressions[regex] = resolved
            for topic in sorted(resolved.topics):
                _count(self.subscribed_topic_names, topic, by_regex=1)
        self._update_subscription_type()

    def remove_resolved_regular_expression(self, regex: str) -> None:
        """Kafka's ConsumerGroup.removeResolvedRegularExpression."""
        self._require_alive()
        self._remove_resolved(regex)
        self._update_subscription_type()

    def mark_dead(self) -> None:
        """The group is deleted (the replay of its ConsumerGroupMetadata tombstone; Kafka then drops
        the group). Raises IllegalTransition, changing nothing, unless the group is EMPTY and its
        target assignment gone: its other tombstones come first."""
        if self.target_assignment:
            raise IllegalTransition(
                f"consumer group {self.group_id} deleted while members still have a target assignment"
            )
        self.state.validate_transition(ConsumerGroupState.DEAD)
        self.state = ConsumerGroupState.DEAD

    # Kafka's package-private add/removePartitionEpochs (its tests call them directly), each as one
    # step: a conflict raises before anything changed.

    def add_partition_epochs(self, assignment: TopicPartitions, epoch: int) -> None:
        """Kafka's ConsumerGroup.addPartitionEpochs: raises PartitionEpochError if a partition
        already has an owner (its owner must release it first)."""
        staged: dict[TopicId, dict[int, int]] = {}
        self._stage_add(staged, assignment, epoch)
        self._commit_partition_epochs(staged)

    def remove_partition_epochs(self, assignment: TopicPartitions, expected_epoch: int) -> None:
        """Kafka's ConsumerGroup.removePartitionEpochs: raises PartitionEpochError if a partition is
        not owned at `expected_epoch`."""
        staged: dict[TopicId, dict[int, int]] = {}
        self._stage_remove(staged, assignment, expected_epoch)
        self._commit_partition_epochs(staged)

    # -- helpers --------------------------------------------------------------------------------------

    def _require_alive(self) -> None:
        # Kafka drops a deleted group, so nothing can update it; here the value may still be held.
        if self.state is ConsumerGroupState.DEAD:
            raise IllegalTransition(f"consumer group {self.group_id} is Dead")

    def _update_state(self) -> None:
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            target = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.target_assignment_epoch:
            target = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.target_assignment_epoch) for m in self.members.values()):
            target = ConsumerGroupState.RECONCILING
        else:
            target = ConsumerGroupState.STABLE
        self.state.validate_transition(target)
        self.state = target

    def _update_subscription_type(self) -> None:
        """Kafka's ConsumerGroup.maybeUpdateGroupSubscriptionType."""
        self.subscription_type = subscription_type(
            self.subscribed_regular_expressions, self.subscribed_topic_names, len(self.members)
        )

    def _update_subscribed_topic_names(
        self, old_member: ConsumerGroupMember | None, new_member: ConsumerGroupMember | None
    ) -> None:
        """Kafka's ModernGroup.maybeUpdateSubscribedTopicNames (the by-name counts)."""
        if old_member is not None:
            for topic in sorted(old_member.subscribed_topic_names):
                _count(self.subscribed_topic_names, topic, by_name=-1)
        if new_member is not None:
            for topic in sorted(new_member.subscribed_topic_names):
                _count(self.subscribed_topic_names, topic, by_name=1)

    def _update_subscribed_regular_expression(
        self, old_member: ConsumerGroupMember | None, new_member: ConsumerGroupMember | None
    ) -> None:
        """Kafka's ConsumerGroup.maybeUpdateSubscribedRegularExpression."""
        old_regex, new_regex = _regex_of(old_member), _regex_of(new_member)
        if old_regex is not None:
            _dec(self.subscribed_regular_expressions, old_regex)
        if new_regex is not None:
            _inc(self.subscribed_regular_expressions, new_regex)

    def _update_server_assignors(
        self, old_member: ConsumerGroupMember | None, new_member: ConsumerGroupMember | None
    ) -> None:
        """Kafka's ConsumerGroup.maybeUpdateServerAssignors."""
        if old_member is not None and old_member.server_assignor_name is not None:
            _dec(self.server_assignors, old_member.server_assignor_name)
        if new_member is not None and new_member.server_assignor_name is not None:
            _inc(self.server_assignors, new_member.server_assignor_name)

    def _remove_resolved(self, regex: str) -> None:
        old = self.resolved_regular_expressions.pop(regex, None)
        if old is not None:
            for topic in sorted(old.topics):
                _count(self.subscribed_topic_names, topic, by_regex=-1)

    def _staged_topic(self, staged: dict[TopicId, dict[int, int]], topic_id: TopicId) -> dict[int, int]:
        partitions = staged.get(topic_id)
        if partitions is None:
            partitions = staged[topic_id] = dict(self.partition_epochs.get(topic_id, {}))
        return partitions

    def _stage_add(self, staged: dict[TopicId, dict[int, int]], assignment: TopicPartitions, epoch: int) -> None:
        for topic_id in sorted(assignment):
            partitions = self._staged_topic(staged, topic_id)
            for partition in sorted(assignment[topic_id]):
                previous = partitions.get(partition)
                if previous is not None:
                    raise PartitionEpochError(
                        f"cannot set the epoch of {topic_id}-{partition} to {epoch}: "
                        f"the partition is still owned at epoch {previous}"
                    )
                partitions[partition] = epoch

    def _stage_remove(
        self, staged: dict[TopicId, dict[int, int]], assignment: TopicPartitions, expected_epoch: int
    ) -> None:
        for topic_id in sorted(assignment):
            partitions = self._staged_topic(staged, topic_id)
            if not partitions:  # an emptied topic is no topic (Kafka removes it from the map)
                raise PartitionEpochError(
                    f"cannot remove the epoch {expected_epoch} from {topic_id}: it has no epoch"
                )
            for partition in sorted(assignment[topic_id]):
                previous = partitions.pop(partition, None)
                if previous != expected_epoch:
                    raise PartitionEpochError(
                        f"cannot remove the epoch {expected_epoch} from {topic_id}-{partition}: "
                        f"the partition is owned at epoch {previous}"
                    )

    def _commit_partition_epochs(self, staged: dict[TopicId, dict[int, int]]) -> None:
        for topic_id, partitions in staged.items():
            if partitions:
                self.partition_epochs[topic_id] = partitions
            else:
                self.partition_epochs.pop(topic_id, None)


def session_key(group_id: str, member_id: str) -> Hashable:
    """The timer of a member's session (Kafka's groupSessionTimeoutKey)."""
    return ("consumer-session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> Hashable:
    """The timer of a member's revocation (Kafka's consumerGroupRebalanceTimeoutKey)."""
    return ("consumer-rebalance", group_id, member_id)


def join_key(group_id: str, member_id: str) -> Hashable:
    """A classic member's time to join again once told to (Kafka's consumerGroupJoinKey)."""
    return ("consumer-classic-join", group_id, member_id)


def sync_key(group_id: str, member_id: str) -> Hashable:
    """A classic member's time to sync after joining (Kafka's consumerGroupSyncKey)."""
    return ("consumer-classic-sync", group_id, member_id)


def _validate_member_epoch(received: int, member: ConsumerGroupMember) -> ErrorCode | None:
    """Kafka's ConsumerGroup.validateMemberEpoch: a classic member's generation is its epoch."""
    if received == member.member_epoch:
        return None
    return ErrorCode.illegal_generation if member.use_classic_protocol else ErrorCode.stale_member_epoch


def _member_view(m: ConsumerGroupMember) -> tuple[Any, ...]:
    return (
        m.member_epoch,
        m.previous_member_epoch,
        int(m.state),
        m.instance_id,
        m.rack_id,
        m.rebalance_timeout_ms,
        m.client_id,
        m.client_host,
        tuple(sorted(m.subscribed_topic_names)),
        m.subscribed_topic_regex,
        m.server_assignor_name,
        partitions_view(m.assigned_partitions),
        partitions_view(m.partitions_pending_revocation),
    )


__all__ = [
    "ConsumerGroup",
    "ConsumerGroupState",
    "NO_EPOCH",
    "PartitionEpochError",
    "ResolvedRegularExpression",
    "SubscriptionCount",
    "SubscriptionType",
    "subscription_type",
]
