"""What a consumer-group assignor is given and what it answers (Kafka 4.2's `GroupSpec`,
`MemberSubscription`, `MemberAssignment`, `SubscribedTopicDescriber` and `GroupAssignment`), as
plain values.

Kafka hands its server-side assignors (`uniform`, `range`) the members' subscriptions and their
current target assignment, the partitions that assignment already gives someone (its inverted
form), and a describer of the subscribed topics. Kafka iterates hash maps of member ids, whose
order is arbitrary; ours are walked in sorted order wherever order matters, so the same inputs give
the same target assignment (and the same records) on every machine, as the share group's assignor
does (coordinator/share/assignor.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

TopicId = uuid.UUID
# member id -> topic id -> partitions: a target assignment (what GroupAssignment holds)
Assignment = dict[str, dict[TopicId, frozenset[int]]]


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: the assignor cannot compute an assignment (a subscribed
    topic the describer does not know, for one)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it (MemberSubscriptionAndAssignmentImpl)."""

    subscribed_topic_ids: frozenset[TopicId]
    assignment: Mapping[TopicId, frozenset[int]] = field(default_factory=dict)  # its current target
    rack_id: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The group as the assignor sees it (GroupSpecImpl). `homogeneous` is Kafka's
    SubscriptionType.HOMOGENEOUS: every member subscribes to the same topics."""

    members: Mapping[str, MemberSpec]

    @property
    def member_ids(self) -> list[str]:
        return sorted(self.members)

    @property
    def homogeneous(self) -> bool:
        subscriptions = {m.subscribed_topic_ids for m in self.members.values()}
        return len(subscriptions) <= 1

    def is_partition_assigned(self, topic_id: TopicId, partition: int) -> bool:
        """Whether the current target assignment gives the partition to some member (Kafka's
        invertedMemberAssignment)."""
        return any(partition in m.assignment.get(topic_id, ()) for m in self.members.values())

    def member_assignment(self, member_id: str) -> Mapping[TopicId, frozenset[int]]:
        member = self.members.get(member_id)
        return {} if member is None else member.assignment


class TopicDescriber(Protocol):
    """Kafka's SubscribedTopicDescriber."""

    def num_partitions(self, topic_id: TopicId) -> int:
        """The topic's partition count, or -1 if the topic is unknown."""
        ...

    def racks_for_partition(self, topic_id: TopicId, partition: int) -> frozenset[str]:
        """The racks of the partition's replicas (empty: none known)."""
        ...


@dataclass(frozen=True, slots=True)
class Topics:
    """A TopicDescriber over a map of topic id -> partition count (no racks: raygroups places one
    replica per partition on actors, not on racks)."""

    partitions: Mapping[TopicId, int]

    def num_partitions(self, topic_id: TopicId) -> int:
        return self.partitions.get(topic_id, -1)

    def racks_for_partition(self, topic_id: TopicId, partition: int) -> frozenset[str]:
        return frozenset()
