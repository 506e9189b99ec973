"""KIP-848's reconciliation engine: one step of a consumer group member towards its target
assignment (Kafka's modern/consumer/CurrentAssignmentBuilder.build() and its helpers
ownsRevokedPartitions and computeNextAssignment), as a pure function.

On every heartbeat the coordinator calls `reconcile` with the member, the group's target assignment
epoch and the member's part of the target, who owns each partition now (the epoch of its owner, -1
for none) and the partitions the member said it owns. It answers the member, unchanged or a step
further:

  * a member must give up (revoke) what the target takes away before anything else happens. It
    stays at its epoch in UNREVOKED_PARTITIONS until a heartbeat reports owned partitions without
    any of those pending revocation; only then does it move on, to the next epoch;
  * a partition the target gives it is assigned only once no member owns it (its epoch is -1): the
    previous owner may not have revoked it yet. Until then the member waits at the target epoch in
    UNRELEASED_PARTITIONS, with whatever else it could get;
  * a member that is neither revoking nor waiting is STABLE at the target epoch.

So a partition is never assigned to two members at once: the coordinator keeps a partition's epoch
(ConsumerGroup.currentPartitionEpoch) from the moment it is assigned until its owner acknowledges
its revocation, partitions pending revocation included.

Kafka iterates hash sets of topic ids; here topics are walked in sorted order and partitions kept
in frozensets, so equal inputs give equal members (and equal records) everywhere.

This is the reconciliation of Kafka's trunk of October 2024 (close to Kafka 4.0). Kafka changed it
since, and those changes are not here: KAFKA-19431 (mid-2025) revokes the partitions of topics the
member no longer subscribes to at once (withHasSubscriptionChanged, updateCurrentAssignment, and a
target filtered by the subscribed topic ids, which needs the metadata image and the resolved
regular expressions); a partition the member itself is still revoking no longer counts as
unreleased when the target gives it back; and KAFKA-19974 (merged to trunk and 4.2) no longer
bumps the epoch when the member leaves UNREVOKED_PARTITIONS (it goes straight to the target epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Union

from coordinator.consumer.assignment_spec import TopicId
from coordinator.consumer.member import ConsumerGroupMember, TopicPartitions, validate_member_transition
from coordinator.member_state import MemberState

# Kafka's BiFunction<Uuid, Integer, Integer>: the epoch of the partition's current owner, -1 if none.
CurrentPartitionEpoch = Callable[[TopicId, int], int]
# What ConsumerGroupHeartbeatRequest.TopicPartitions says the member owns: Kafka's list of
# (topic id, partitions), or the same as a mapping.
OwnedTopicPartitions = Union[Iterable[tuple[TopicId, Iterable[int]]], Mapping[TopicId, Iterable[int]]]
_Owned = tuple[tuple[TopicId, tuple[int, ...]], ...]


class FencedMemberEpochError(Exception):
    """Kafka's FencedMemberEpochException: the heartbeat answers FENCED_MEMBER_EPOCH and the member
    must give up all its partitions and rejoin."""


def reconcile(
    member: ConsumerGroupMember,
    target_assignment_epoch: int,
    target_assignment: TopicPartitions,
    current_partition_epoch: CurrentPartitionEpoch,
    owned_topic_partitions: OwnedTopicPartitions | None = None,
) -> ConsumerGroupMember:
    """Kafka's CurrentAssignmentBuilder.build(): the member's next state, or `member` itself when it
    cannot move forward yet. `owned_topic_partitions` None means the heartbeat did not carry them
    (Kafka's null), which is not the same as an empty list: a member that did not say what it owns
    is assumed to still own everything it was asked to revoke.

    Raises FencedMemberEpochError when the member is in a state this coordinator does not know and
    has not (yet) come back owning nothing."""
    owned = _normalize(owned_topic_partitions)
    state = member.state

    if state is MemberState.STABLE:
        # A newer target assignment (epoch) is there: reconcile towards it. Otherwise nothing to do.
        if member.member_epoch != target_assignment_epoch:
            nxt = _compute_next_assignment(
                member, member.member_epoch, member.assigned_partitions,
                target_assignment_epoch, target_assignment, current_partition_epoch, owned,
            )
        else:
            return member

    elif state is MemberState.UNREVOKED_PARTITIONS:
        # The member waits here until it has revoked what it was asked to: a partition counts as
        # revoked once the heartbeat's owned partitions no longer list it.
        if _owns_revoked_partitions(owned, member.partitions_pending_revocation):
            return member
        # All revoked: the member moves to the next epoch (current + 1) and reconciles towards the
        # latest target, which may have changed meanwhile (and may ask for more revocations).
        nxt = _compute_next_assignment(
            member, member.member_epoch + 1, member.assigned_partitions,
            target_assignment_epoch, target_assignment, current_partition_epoch, owned,
        )

    elif state is MemberState.UNRELEASED_PARTITIONS:
        # Reconcile towards the latest target: partitions released since the last heartbeat are
        # assigned now (and a newer target may take some away).
        nxt = _compute_next_assignment(
            member, member.member_epoch, member.assigned_partitions,
            target_assignment_epoch, target_assignment, current_partition_epoch, owned,
        )

    else:
        # UNKNOWN: a newer coordinator wrote a state this one does not know, and was downgraded.
        # Fence the member so that it gives up its partitions and rejoins; once it heartbeats owning
        # nothing (an empty list, not a missing one), reconcile it from scratch at the target epoch.
        if owned is None or owned:
            raise FencedMemberEpochError(
                "The consumer group member is in a unknown state. The member must abandon all its "
                "partitions and rejoin."
            )
        nxt = _compute_next_assignment(
            member, target_assignment_epoch, member.assigned_partitions,
            target_assignment_epoch, target_assignment, current_partition_epoch, owned,
        )

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


def _compute_next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    member_assigned_partitions: TopicPartitions,
    target_assignment_epoch: int,
    target_assignment: TopicPartitions,
    current_partition_epoch: CurrentPartitionEpoch,
    owned: _Owned | None,
) -> ConsumerGroupMember:
    """Kafka's computeNextAssignment. `member_epoch` is the epoch the member stays at if it must
    revoke; it may differ from member.member_epoch (UNREVOKED_PARTITIONS moves on to the next one).
    Per topic:
        assigned            = current ∩ target
        pending revocation  = current - assigned
        pending assignment  = target - assigned - partitions another member still owns (unreleased)
    """
    has_unreleased = False
    new_assigned: dict[TopicId, frozenset[int]] = {}
    new_pending_revocation: dict[TopicId, frozenset[int]] = {}
    new_pending_assignment: dict[TopicId, frozenset[int]] = {}

    for topic_id in sorted(target_assignment.keys() | member_assigned_partitions.keys()):
        target = target_assignment.get(topic_id, frozenset())
        current = member_assigned_partitions.get(topic_id, frozenset())

        assigned = current & target
        pending_revocation = current - assigned
        # Kafka asks for the epoch of every partition of the target it does not have yet, whoever
        # owns it; any owner (even the member itself, for a partition it is still revoking) makes
        # the partition unreleased. Walk in order so the calls come in a deterministic order.
        pending_assignment: set[int] = set()
        for partition in sorted(target - assigned):
            if current_partition_epoch(topic_id, partition) != -1:
                has_unreleased = True
            else:
                pending_assignment.add(partition)

        if assigned:
            new_assigned[topic_id] = assigned
        if pending_revocation:
            new_pending_revocation[topic_id] = pending_revocation
        if pending_assignment:
            new_pending_assignment[topic_id] = frozenset(pending_assignment)

    if new_pending_revocation and _owns_revoked_partitions(owned, new_pending_revocation):
        # Partitions to revoke, which the member may still own: it stays at `member_epoch` (nothing
        # new is assigned meanwhile) and waits in UNREVOKED_PARTITIONS for the client to acknowledge
        # the revocation. (If the heartbeat already shows them gone, there is nothing to wait for.)
        return replace(
            member.update_member_epoch(member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=new_assigned,
            partitions_pending_revocation=new_pending_revocation,
        )
    if new_pending_assignment:
        # Partitions to assign: straight into the assigned set, at the target epoch. STABLE unless
        # some others are still unreleased.
        for topic_id, partitions in new_pending_assignment.items():
            new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
        new_state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    elif has_unreleased:
        # Nothing to revoke nor to assign, but some partitions are not free yet: wait at the target
        # epoch.
        new_state = MemberState.UNRELEASED_PARTITIONS
    else:
        new_state = MemberState.STABLE
    return replace(
        member.update_member_epoch(target_assignment_epoch),
        state=new_state,
        assigned_partitions=new_assigned,
        partitions_pending_revocation={},
    )


__all__ = ["CurrentPartitionEpoch", "FencedMemberEpochError", "OwnedTopicPartitions", "reconcile"]
