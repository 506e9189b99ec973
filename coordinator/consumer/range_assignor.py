"""The server-side `range` assignor of a consumer group (Kafka's `RangeAssignor`, KIP-848, as
rewritten by KAFKA-16944: `assign`, `assignHomogeneousGroup`, `assignHeterogeneousGroup`,
`sortMemberIds`, `addPartitionsToAssignment`).

Each topic is cut on its own into contiguous ranges, one per member subscribed to it, taken in
member order: with P partitions and M subscribers every member gets P // M and the first P % M get
one more. When all members subscribe to the same topics and those topics have the same partition
count, member i gets the same partition numbers of every topic (co-partitioning, what joins need).

This version of the assignor does not look at the current assignment at all. Its only stickiness
is the member order: members with an instance id (static members) come first, by instance id, and
the others follow by member id, so a static member that rejoins under a new member id lands in the
same place and gets the same ranges, as long as the members, subscriptions and partition counts
are otherwise unchanged.

It differs from Kafka only in iteration order, and only where that could show: Kafka's comparator
leaves two members with the same instance id in hash-map order, and we break that tie by member id.
Topics are independent of each other here, so their (hash) order changes nothing but which unknown
topic the error names.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.consumer.assignment_spec import (
    Assignment,
    GroupSpec,
    PartitionAssignorError,
    TopicDescriber,
    TopicId,
)


@dataclass(slots=True)
class _TopicRanges:
    """How far one topic has been cut (Kafka's RangeAssignor.TopicMetadata)."""

    num_partitions: int
    num_members: int  # members subscribed to the topic
    min_quota: int = -1
    extra_partitions: int = -1  # how many of the next members still get one more
    next_start: int = 0

    def next_range(self) -> range:
        """The next member's range (possibly empty, when there are more members than partitions)."""
        if self.min_quota == -1:
            # Computed lazily, once every subscriber has been counted (the heterogeneous path
            # counts them while walking the members).
            self.min_quota, self.extra_partitions = divmod(self.num_partitions, self.num_members)
        quota = self.min_quota
        if self.extra_partitions > 0:
            quota += 1
            self.extra_partitions -= 1
        start = self.next_start
        end = min(start + quota, self.num_partitions)
        self.next_start = end
        return range(start, end)


def assign_range(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    """The new target assignment of the group. Every member is in the result; a member's dict
    leaves out topics it gets no partition of. Raises PartitionAssignorError if a member subscribes
    to a topic `topics` does not know."""
    if not spec.members:
        return {}
    if spec.homogeneous:
        return _assign_homogeneous(spec, topics)
    return _assign_heterogeneous(spec, topics)


def sorted_member_ids(spec: GroupSpec) -> list[str]:
    """Static members first, by instance id; then the rest, by member id (Kafka's sortMemberIds).

    Putting static members first keeps their place, and so their ranges, across a rejoin with a
    new member id. Kafka's comparator returns 0 for two members with equal instance ids and its
    stable sort then keeps hash order; we fall back to the member id to stay deterministic.
    """

    def key(member_id: str) -> tuple[bool, str, str]:
        instance_id = spec.members[member_id].instance_id
        return (instance_id is None, instance_id or "", member_id)

    return sorted(spec.members, key=key)


def _unknown_topic() -> PartitionAssignorError:
    return PartitionAssignorError("Member is subscribed to a non-existent topic")


def _assign_homogeneous(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    member_ids = sorted_member_ids(spec)
    subscribed = sorted(spec.members[member_ids[0]].subscribed_topic_ids)
    ranges: list[tuple[TopicId, _TopicRanges]] = []
    for topic_id in subscribed:
        num_partitions = topics.num_partitions(topic_id)
        if num_partitions == -1:
            raise _unknown_topic()
        ranges.append((topic_id, _TopicRanges(num_partitions, len(member_ids))))

    target: Assignment = {}
    for member_id in member_ids:
        target[member_id] = _take_ranges(ranges)
    return target


def _assign_heterogeneous(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    member_ids = sorted_member_ids(spec)
    by_topic: dict[TopicId, _TopicRanges] = {}
    # First pass: count each topic's subscribers (and fail on an unknown topic before assigning).
    for member_id in member_ids:
        for topic_id in sorted(spec.members[member_id].subscribed_topic_ids):
            topic = by_topic.get(topic_id)
            if topic is None:
                num_partitions = topics.num_partitions(topic_id)
                if num_partitions == -1:
                    raise _unknown_topic()
                topic = by_topic[topic_id] = _TopicRanges(num_partitions, 0)
            topic.num_members += 1

    target: Assignment = {}
    for member_id in member_ids:
        subscribed = sorted(spec.members[member_id].subscribed_topic_ids)
        target[member_id] = _take_ranges([(topic_id, by_topic[topic_id]) for topic_id in subscribed])
    return target


def _take_ranges(ranges: list[tuple[TopicId, _TopicRanges]]) -> dict[TopicId, frozenset[int]]:
    """One member's next range of each of its topics, leaving out empty ones."""
    out: dict[TopicId, frozenset[int]] = {}
    for topic_id, topic in ranges:
        partitions = topic.next_range()
        if partitions:
            out[topic_id] = frozenset(partitions)
    return out
