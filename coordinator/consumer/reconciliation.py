"""KIP-848's reconciliation engine: one step of a consumer group member towards its target
assignment (Kafka's modern/consumer/CurrentAssignmentBuilder.build() and its helpers
ownsRevokedPartitions, updateCurrentAssignment, computeNextAssignment and subscribedTopicIds), as a
pure function.

On every heartbeat the coordinator calls `reconcile` with the member, the group's target assignment
epoch and the member's part of the target, who owns each partition now (the epoch of its owner, -1
for none), the partitions the member said it owns, whether this heartbeat changed the member's
subscription, and how to tell the topics it subscribes to. It answers the member, unchanged or a
step further:

  * a member must give up (revoke) what the target takes away before anything else happens. It
    stays at its epoch in UNREVOKED_PARTITIONS until a heartbeat reports owned partitions without
    any of those pending revocation; then it reconciles towards the latest target, and leaves
    UNREVOKED_PARTITIONS only for the target epoch (it stays at its epoch if it must revoke more);
  * a partition of a topic the member no longer subscribes to is never kept nor given, whatever
    the target says (the target may predate the subscription change). On the heartbeat that
    changes the subscription such partitions are taken away at once, without waiting for a new
    target: to revoke (UNREVOKED_PARTITIONS, same epoch) if the member may still own them, or
    simply dropped if its heartbeat shows them gone;
  * a partition the target gives it is assigned only once no other member owns it (its epoch is
    -1, or the owner is the member itself, still revoking it). Until then the member waits at the
    target epoch in UNRELEASED_PARTITIONS, with whatever else it could get;
  * a member that is neither revoking nor waiting is STABLE at the target epoch.

So a partition is never assigned to two members at once: the coordinator keeps a partition's epoch
(ConsumerGroup.currentPartitionEpoch) from the moment it is assigned until its owner acknowledges
its revocation, partitions pending revocation included. And, since a member's epoch only ever moves
to a target epoch, a partition is held by one member only at any given epoch.

This follows Kafka 4.2's CurrentAssignmentBuilder: the trunk of October 2024 (close to Kafka 4.0)
plus
  * KAFKA-19431 (apache/kafka PR #20055, mid-2025): withHasSubscriptionChanged,
    updateCurrentAssignment, and the target filtered by the subscribed topic ids (the member's topic
    names and its resolved regular expression, mapped to ids through the metadata image);
  * KAFKA-19449 (PR #20781, October 2025): a partition pending revocation by the member itself is
    not unreleased when the target gives it back;
  * KAFKA-19974 (PR #21107, merged to trunk and 4.2 in December 2025): UNREVOKED_PARTITIONS no
    longer moves to member epoch + 1 (nor to min(epoch + 1, target epoch), as after KAFKA-19431):
    it stays at its epoch while it revokes more, and otherwise goes to the target epoch.
Not here, being after 4.2: MINOR PR #21325 (January 2026, updateCurrentAssignment also bumps the
previous member epoch, to the current one) and KIP-1251's assignment epochs (KAFKA-20066, 2026).

Kafka iterates hash sets of topic ids; here topics are walked in sorted order and partitions kept
in frozensets, so equal inputs give equal members (and equal records) everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Union

from coordinator.consumer.assignment_spec import TopicId
from coordinator.consumer.member import ConsumerGroupMember, TopicPartitions, validate_member_transition
from coordinator.member_state import MemberState

# Kafka's BiFunction<Uuid, Integer, Integer>: the epoch of the partition's current owner, -1 if none.
CurrentPartitionEpoch = Callable[[TopicId, int], int]
# What ConsumerGroupHeartbeatRequest.TopicPartitions says the member owns: Kafka's list of
# (topic id, partitions), or the same as a mapping.
OwnedTopicPartitions = Union[Iterable[tuple[TopicId, Iterable[int]]], Mapping[TopicId, Iterable[int]]]
# The member -> the ids of the topics it subscribes to (Kafka's subscribedTopicIds()).
#
# A function, not a set, so that the common heartbeat pays nothing: a member STABLE at the target
# epoch whose subscription did not change is answered without asking (Kafka resolves its TopicIds
# as lazily). And what it answers only needs `in`: `subscribed_topic_ids_resolver` gives a view
# that maps one topic id to its name when asked, rather than building the set of ids of every
# subscribed topic (a regex may match thousands) on every reconciliation. A caller that already
# has the ids can pass `lambda member: ids`.
SubscribedTopicIds = Callable[[ConsumerGroupMember], Container[TopicId]]
_Owned = tuple[tuple[TopicId, tuple[int, ...]], ...]


class FencedMemberEpochError(Exception):
    """Kafka's FencedMemberEpochException: the heartbeat answers FENCED_MEMBER_EPOCH and the member
    must give up all its partitions and rejoin."""


@dataclass(frozen=True, slots=True)
class _SubscribedTopics:
    """Kafka's TopicIds over the member's subscribed topic names (UnionSet with the resolved
    regular expression's topics): a topic id is in it if the image names it and the name is
    subscribed. A topic the image does not know is subscribed by nobody."""

    names: Container[str]
    regex_topics: Container[str]
    topic_name: Callable[[TopicId], str | None]

    def __contains__(self, topic_id: object) -> bool:
        name = self.topic_name(topic_id)  # type: ignore[arg-type]
        return name is not None and (name in self.names or name in self.regex_topics)


def subscribed_topic_ids_resolver(
    topic_name: Callable[[TopicId], str | None],
    resolved_regular_expressions: Mapping[str, Collection[str]],
) -> SubscribedTopicIds:
    """Kafka's CurrentAssignmentBuilder.subscribedTopicIds() with withMetadataImage and
    withResolvedRegularExpressions, for a coordinator that holds a topics image (`topic_name`: a
    topic id -> its name, None if the cluster has no such topic) and the group's resolved regular
    expressions (regex -> the topic names it matched). A regex not resolved yet matches nothing:
    the member keeps only its named topics until it is (Kafka's conservative choice)."""

    def resolve(member: ConsumerGroupMember) -> Container[TopicId]:
        regex = member.subscribed_topic_regex
        regex_topics: Container[str] = ()
        if regex:
            regex_topics = resolved_regular_expressions.get(regex, ())
        return _SubscribedTopics(member.subscribed_topic_names, regex_topics, topic_name)

    return resolve


def reconcile(
    member: ConsumerGroupMember,
    target_assignment_epoch: int,
    target_assignment: TopicPartitions,
    current_partition_epoch: CurrentPartitionEpoch,
    owned_topic_partitions: OwnedTopicPartitions | None = None,
    *,
    has_subscription_changed: bool = False,
    subscribed_topic_ids: SubscribedTopicIds | None = None,
) -> ConsumerGroupMember:
    """Kafka's CurrentAssignmentBuilder.build(): the member's next state, or `member` itself when it
    cannot move forward yet. `owned_topic_partitions` None means the heartbeat did not carry them
    (Kafka's null), which is not the same as an empty list: a member that did not say what it owns
    is assumed to still own everything it was asked to revoke.

    `has_subscription_changed` is Kafka's withHasSubscriptionChanged: this heartbeat changed the
    member's subscription, so partitions of topics it left are taken away now. `subscribed_topic_ids`
    tells which topics the member subscribes to (see SubscribedTopicIds and
    subscribed_topic_ids_resolver). None keeps the reconciliation of before KAFKA-19431: every
    topic counts as subscribed, the target is taken as it is. (Kafka's default, an empty metadata
    image, would instead count none as subscribed; no caller wants that.)

    Raises FencedMemberEpochError when the member is in a state this coordinator does not know and
    has not (yet) come back owning nothing; ValueError when a subscription change comes without
    the means to tell what the member subscribes to."""
    if has_subscription_changed and subscribed_topic_ids is None:
        raise ValueError("has_subscription_changed needs subscribed_topic_ids")
    owned = _normalize(owned_topic_partitions)
    state = member.state
    step = _Step(member, target_assignment_epoch, target_assignment, current_partition_epoch, owned,
                 subscribed_topic_ids)

    if state is MemberState.STABLE:
        # A newer target assignment (epoch) is there: reconcile towards it. Otherwise only a
        # subscription change can take something away.
        if member.member_epoch != target_assignment_epoch:
            nxt = step.compute_next_assignment(member.member_epoch)
        elif has_subscription_changed:
            nxt = step.update_current_assignment()
        else:
            return member

    elif state is MemberState.UNREVOKED_PARTITIONS:
        # The member waits here until it has revoked what it was asked to: a partition counts as
        # revoked once the heartbeat's owned partitions no longer list it. Meanwhile a subscription
        # change adds the partitions of the topics it left to those it must revoke.
        if _owns_revoked_partitions(owned, member.partitions_pending_revocation):
            if has_subscription_changed:
                nxt = step.update_current_assignment()
            else:
                return member
        else:
            # All revoked: reconcile towards the latest target, which may have changed meanwhile.
            # KAFKA-19974: if that asks for more revocations the member stays at its epoch (Kafka
            # used to move it to epoch + 1, an epoch whose target may have given the same partition
            # to another member); otherwise it goes straight to the target epoch.
            nxt = step.compute_next_assignment(member.member_epoch)

    elif state is MemberState.UNRELEASED_PARTITIONS:
        # Reconcile towards the latest target: partitions released since the last heartbeat are
        # assigned now (and a newer target may take some away).
        nxt = step.compute_next_assignment(member.member_epoch)

    else:
        # UNKNOWN: a newer coordinator wrote a state this one does not know, and was downgraded.
        # Fence the member so that it gives up its partitions and rejoins; once it heartbeats owning
        # nothing (an empty list, not a missing one), reconcile it from scratch at the target epoch.
        if owned is None or owned:
            raise FencedMemberEpochError(
                "The consumer group member is in a unknown state. The member must abandon all its "
                "partitions and rejoin."
            )
        nxt = step.compute_next_assignment(target_assignment_epoch)

    validate_member_transition(state, nxt.state)
    return nxt


def _normalize(owned: OwnedTopicPartitions | None) -> _Owned | None:
    """The owned partitions as a tuple (they are walked more than once), None kept as None."""
    if owned is None:
        return None
    items = owned.items() if isinstance(owned, Mapping) else owned
    return tuple((topic_id, tuple(partitions)) for topic_id, partitions in items)


def _owns_revoked_partitions(owned: _Owned | None, pending_revocation: TopicPartitions) -> bool:
    """Kafka's ownsRevokedPartitions: whether the owned partitions include one pending revocation.
    Unknown owned partitions (None) count as owning them all: the member cannot move on before it
    has said it gave them up."""
    if owned is None:
        return True
    for topic_id, partitions in owned:
        pending = pending_revocation.get(topic_id)
        if pending and any(p in pending for p in partitions):
            return True
    return False


class _AllTopics:
    """Every topic subscribed: what a caller that passes no subscribed_topic_ids gets."""

    def __contains__(self, topic_id: object) -> bool:
        return True


_ALL_TOPICS = _AllTopics()


@dataclass(frozen=True, slots=True)
class _Step:
    """One build(): Kafka's CurrentAssignmentBuilder with its inputs set."""

    member: ConsumerGroupMember
    target_assignment_epoch: int
    target_assignment: TopicPartitions
    current_partition_epoch: CurrentPartitionEpoch
    owned: _Owned | None
    subscribed_topic_ids_of: SubscribedTopicIds | None

    def subscribed_topic_ids(self) -> Container[TopicId]:
        """Kafka's subscribedTopicIds(), asked only when the member is actually reconciled."""
        if self.subscribed_topic_ids_of is None:
            return _ALL_TOPICS
        return self.subscribed_topic_ids_of(self.member)

    def update_current_assignment(self) -> ConsumerGroupMember:
        """Kafka's updateCurrentAssignment: the member's assignment without the topics it no longer
        subscribes to, at the same epoch and against no new target (cheaper than
        compute_next_assignment, and needed when the target epoch has not moved). The partitions
        taken away join those pending revocation if the member may still own them; if its
        heartbeat already shows them gone they are simply dropped, and the member stays as it is."""
        member = self.member
        subscribed = self.subscribed_topic_ids()
        removed = {
            topic_id: partitions
            for topic_id, partitions in sorted(member.assigned_partitions.items())
            if topic_id not in subscribed
        }
        if not removed:
            return member
        new_assigned = {t: ps for t, ps in member.assigned_partitions.items() if t not in removed}
        new_pending = dict(member.partitions_pending_revocation)
        for topic_id, partitions in removed.items():
            new_pending[topic_id] = new_pending.get(topic_id, frozenset()) | partitions
        if _owns_revoked_partitions(self.owned, new_pending):
            # Kafka 4.2 keeps both epochs here (trunk's PR #21325, after 4.2, also sets the previous
            # epoch to the current one).
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned_partitions=new_assigned,
                partitions_pending_revocation=new_pending,
            )
        # Already revoked by the client. Only a STABLE member gets here: an UNREVOKED_PARTITIONS one
        # is asked only while it still owns some of its pending partitions.
        return replace(member, assigned_partitions=new_assigned)

    def compute_next_assignment(self, member_epoch: int) -> ConsumerGroupMember:
        """Kafka's computeNextAssignment. `member_epoch` is the epoch the member stays at if it must
        revoke (its own, except for an UNKNOWN member, which restarts at the target epoch).
        Per topic, with target = nothing for a topic the member does not subscribe to:
            assigned            = current ∩ target
            pending revocation  = current - assigned
            pending assignment  = target - assigned - partitions another member still owns (unreleased)
        """
        member = self.member
        subscribed = self.subscribed_topic_ids()
        own_pending = member.partitions_pending_revocation
        has_unreleased = False
        new_assigned: dict[TopicId, frozenset[int]] = {}
        new_pending_revocation: dict[TopicId, frozenset[int]] = {}
        new_pending_assignment: dict[TopicId, frozenset[int]] = {}

        for topic_id in sorted(self.target_assignment.keys() | member.assigned_partitions.keys()):
            # The target may predate the member's last subscription change (KAFKA-19431).
            target = self.target_assignment.get(topic_id, frozenset())
            if topic_id not in subscribed:
                target = frozenset()
            current = member.assigned_partitions.get(topic_id, frozenset())

            assigned = current & target
            pending_revocation = current - assigned
            # A partition someone owns is unreleased, unless that someone is the member itself,
            # still revoking it (KAFKA-19449): one member owns a partition at a time, so the member
            # may have it back at once. Walk in order so the epoch calls come in a fixed order.
            mine = own_pending.get(topic_id, frozenset())
            pending_assignment: set[int] = set()
            for partition in sorted(target - assigned):
                if self.current_partition_epoch(topic_id, partition) != -1 and partition not in mine:
                    has_unreleased = True
                else:
                    pending_assignment.add(partition)

            if assigned:
                new_assigned[topic_id] = assigned
            if pending_revocation:
                new_pending_revocation[topic_id] = pending_revocation
            if pending_assignment:
                new_pending_assignment[topic_id] = frozenset(pending_assignment)

        if new_pending_revocation and _owns_revoked_partitions(self.owned, new_pending_revocation):
            # Partitions to revoke, which the member may still own: it stays at `member_epoch`
            # (nothing new is assigned meanwhile) and waits in UNREVOKED_PARTITIONS for the client to
            # acknowledge the revocation. (If the heartbeat already shows them gone, there is
            # nothing to wait for.)
            return replace(
                member.update_member_epoch(member_epoch),
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned_partitions=new_assigned,
                partitions_pending_revocation=new_pending_revocation,
            )
        if new_pending_assignment:
            # Partitions to assign: straight into the assigned set, at the target epoch. STABLE
            # unless some others are still unreleased.
            for topic_id, partitions in new_pending_assignment.items():
                new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
            new_state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        elif has_unreleased:
            # Nothing to revoke nor to assign, but some partitions are not free yet: wait at the
            # target epoch.
            new_state = MemberState.UNRELEASED_PARTITIONS
        else:
            new_state = MemberState.STABLE
        return replace(
            member.update_member_epoch(self.target_assignment_epoch),
            state=new_state,
            assigned_partitions=new_assigned,
            partitions_pending_revocation={},
        )


__all__ = [
    "CurrentPartitionEpoch",
    "FencedMemberEpochError",
    "OwnedTopicPartitions",
    "SubscribedTopicIds",
    "reconcile",
    "subscribed_topic_ids_resolver",
]
