"""The uniform assignor for a consumer group whose members subscribe to different topics (Kafka's
`UniformHeterogeneousAssignmentBuilder.build()`, KIP-848).

Balance comes first, stickiness second. In Kafka's order:

1. keep each member's current target partitions of the topics it still subscribes to, drop the rest;
2. hand every partition nobody holds any more to the least loaded subscribers of its topic, topic by
   topic, the topics with the most partitions per subscriber first;
3. move partitions, topic by topic, from a topic's most loaded subscribers to its least loaded ones
   (counting all of a member's partitions, not only the topic's), looping over the topics until a
   whole loop moves nothing or 16 loops have run.

When every subscriber of a topic has the same subscriptions the result is balanced to within one
partition. With overlapping, different subscriptions it is nearly balanced: once step 3 has
settled, no member could take a partition of a topic it subscribes to from a member holding at
least two more partitions in all (e.g. A on T1, B on T1+T2, C on T2 may end 9/10/11).

Differences from Kafka, about order: Kafka numbers the members in the iteration order of a hash
map of member ids and its comparators break ties by that number; we number them in sorted order
(as Kafka's own test does), so the result is the same on every machine. Kafka walks hash sets of
topics where the order does not change the result; we walk sorted ids. Where Kafka sorts topics
(by partitions per subscriber, then subscriber count, then topic id) we sort the same way,
comparing topic ids as Kafka's `Uuid.compareTo` does (two signed 64-bit halves). Kafka returns no
members at all when nobody subscribes to anything; we return every member with an empty
assignment, which is what Kafka's caller makes of a missing member. A current partition beyond its
topic's partition count raises PartitionAssignorError (Kafka, whose topics never shrink, would fail
on an array index there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coordinator.consumer.assignment_spec import (
    Assignment,
    GroupSpec,
    PartitionAssignorError,
    TopicDescriber,
    TopicId,
)

# Loops over the topics in the final balancing step: one loop settles topics whose subscribers all
# share a subscription (plus one to see nothing moves); overlapping subscriptions converge slower,
# roughly halving the imbalance per loop, and Kafka caps the work there.
MAX_ITERATION_COUNT = 16
UNASSIGNED = -1

_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def _signed64(value: int) -> int:
    return value - _U64 if value > _I64_MAX else value


def kafka_uuid_order(topic_id: TopicId) -> tuple[int, int]:
    """Sort key giving Kafka's `Uuid.compareTo` order: most then least significant 64 bits, each
    compared as a signed long (Python's UUID order compares the 128 bits unsigned)."""
    value = topic_id.int
    return _signed64(value >> 64), _signed64(value & (_U64 - 1))


@dataclass(slots=True)
class _Builder:
    """The builder's working state. Members are referred to by their index in `member_ids`."""

    member_ids: list[str]
    num_partitions: dict[TopicId, int]  # of every subscribed topic
    topic_subscribers: dict[TopicId, list[int]]  # member indices, ascending
    sizes: list[int]  # partitions each member holds in the new assignment
    owners: dict[TopicId, list[int]]  # partition -> member index or UNASSIGNED
    target: list[dict[TopicId, set[int]]]  # the new assignment, by member index

    def topic_order(self, topic_id: TopicId) -> tuple[float, int, tuple[int, int]]:
        """Kafka's topicComparator as a key: partitions per subscriber descending (the same double
        division, negated), then subscriber count ascending, then topic id ascending."""
        subscribers = len(self.topic_subscribers[topic_id])
        return -(self.num_partitions[topic_id] / subscribers), subscribers, kafka_uuid_order(topic_id)

    def member_order(self, member_index: int) -> tuple[int, int]:
        """Kafka's memberComparator as a key: fewest partitions first, then member index."""
        return self.sizes[member_index], member_index

    def assign_partition(self, topic_id: TopicId, partition: int, member_index: int) -> None:
        """Give the partition to the member, taking it from its current owner if any."""
        old_owner = self.owners[topic_id][partition]
        if old_owner != UNASSIGNED:
            self._remove_partition(topic_id, partition, old_owner)
        self.target[member_index].setdefault(topic_id, set()).add(partition)
        self.owners[topic_id][partition] = member_index
        self.sizes[member_index] += 1

    def _remove_partition(self, topic_id: TopicId, partition: int, member_index: int) -> None:
        partitions = self.target[member_index].get(topic_id)
        if partitions is not None:
            partitions.discard(partition)
            if not partitions:
                del self.target[member_index][topic_id]
        self.owners[topic_id][partition] = UNASSIGNED
        self.sizes[member_index] -= 1


def assign_heterogeneous(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    """The new target assignment: every member of `spec`, with an empty dict if it gets nothing and
    without topics it gets no partition of. Raises PartitionAssignorError if a member subscribes to a
    topic `topics` does not know."""
    builder = _new_builder(spec, topics)
    if builder.topic_subscribers:
        _revoke_unsubscribed(builder, spec)
        _assign_remaining(builder, _unassigned_partitions(builder))
        _balance(builder)
    return _result(builder)


def _new_builder(spec: GroupSpec, topics: TopicDescriber) -> _Builder:
    member_ids = spec.member_ids  # sorted: Kafka's numbering follows hash order instead
    num_partitions: dict[TopicId, int] = {}
    topic_subscribers: dict[TopicId, list[int]] = {}
    for member_index, member_id in enumerate(member_ids):
        # Sorted so that, of several unknown topics, the same one is named every time.
        for topic_id in sorted(spec.members[member_id].subscribed_topic_ids):
            count = topics.num_partitions(topic_id)
            if count == -1:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
                )
            num_partitions[topic_id] = count
            topic_subscribers.setdefault(topic_id, []).append(member_index)
    return _Builder(
        member_ids=member_ids,
        num_partitions=num_partitions,
        topic_subscribers=topic_subscribers,
        sizes=[0] * len(member_ids),
        owners={t: [UNASSIGNED] * n for t, n in num_partitions.items()},
        target=[{} for _ in member_ids],
    )


def _revoke_unsubscribed(builder: _Builder, spec: GroupSpec) -> None:
    """Kafka's maybeRevokePartitions: a member keeps its current partitions of the topics it still
    subscribes to and loses whole topics it no longer does.

    The current target assignment is assumed to give each partition to one member at most, as
    Kafka's always does; if two members held the same partition, both would keep it and the later
    member (here in sorted order, in Kafka in hash order) would be recorded as its owner.
    """
    for member_index, member_id in enumerate(builder.member_ids):
        member = spec.members[member_id]
        for topic_id, partitions in sorted(member.assignment.items()):
            if topic_id not in member.subscribed_topic_ids:
                continue
            owners = builder.owners[topic_id]
            held = set(partitions)
            for partition in sorted(held):
                # Kafka indexes an array here and fails on a partition the topic no longer has;
                # its topics only grow, so that cannot happen there. Python would silently wrap a
                # negative index, so fail plainly instead.
                if not 0 <= partition < len(owners):
                    raise PartitionAssignorError(
                        f"Member {member_id} holds partition {partition} of topic {topic_id}, "
                        f"which has {len(owners)} partitions."
                    )
                owners[partition] = member_index
            builder.sizes[member_index] += len(held)
            builder.target[member_index][topic_id] = held


def _unassigned_partitions(builder: _Builder) -> dict[TopicId, list[int]]:
    """Kafka's computeUnassignedPartitions: per topic, the partitions nobody holds, ascending;
    topics with none are left out."""
    out: dict[TopicId, list[int]] = {}
    for topic_id in sorted(builder.owners):
        free = [p for p, owner in enumerate(builder.owners[topic_id]) if owner == UNASSIGNED]
        if free:
            out[topic_id] = free
    return out


def _assign_remaining(builder: _Builder, unassigned: dict[TopicId, list[int]]) -> None:
    """Kafka's assignRemainingPartitions: topic by topic in topicComparator order, each free
    partition to the least loaded subscriber (round-robin over those tied for least)."""
    balancer = _MemberBalancer(builder.sizes, builder.member_order)
    for topic_id in sorted(unassigned, key=builder.topic_order):
        balancer.initialize(builder.topic_subscribers[topic_id])
        for partition in unassigned[topic_id]:
            builder.assign_partition(topic_id, partition, balancer.next_least_loaded_member())


def _balance(builder: _Builder) -> None:
    """Kafka's balance: only topics with two or more subscribers can have partitions moved."""
    topic_ids = [t for t, subscribers in builder.topic_subscribers.items() if len(subscribers) >= 2]
    if topic_ids:
        _balance_topics(builder, topic_ids)


def _balance_topics(builder: _Builder, topic_ids: list[TopicId]) -> None:
    """Kafka's balanceTopics: balance topic after topic, in topicComparator order, looping until a
    whole loop moves nothing or MAX_ITERATION_COUNT loops have run."""
    sorted_topic_ids = sorted(topic_ids, key=builder.topic_order)
    balancer = _MemberBalancer(builder.sizes, builder.member_order)
    # The index of the last topic that moved partitions; the first topic counts as one, so a loop
    # that comes back to it without anything moving in between stops.
    last_rebalanced = -1
    for _ in range(MAX_ITERATION_COUNT):
        for topic_index, topic_id in enumerate(sorted_topic_ids):
            if topic_index == last_rebalanced:
                return
            moved = _balance_topic(builder, topic_id, balancer)
            if moved > 0 or last_rebalanced == -1:
                last_rebalanced = topic_index


def _balance_topic(builder: _Builder, topic_id: TopicId, balancer: _MemberBalancer) -> int:
    """Kafka's balanceTopic: move the topic's partitions from its most loaded subscribers (each
    giving up its highest-numbered partition of the topic first) to its least loaded ones, until
    the loads of the two differ by one or less or no loaded subscriber has a partition of the topic
    left to give. Returns how many partitions moved."""
    if balancer.initialize(builder.topic_subscribers[topic_id]) <= 1:
        return 0
    owners = builder.owners[topic_id]
    # The topic's partitions grouped by owner (ascending within a group), and each owner's range
    # [start, end) in that list: its next partition to give up is the one just before `end`.
    partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for i, partition in enumerate(partitions):
        start.setdefault(owners[partition], i)
        end[owners[partition]] = i + 1

    moved = 0
    while not balancer.is_balanced():
        most_loaded = _next_member_with_partitions(balancer, start, end)
        if most_loaded == UNASSIGNED:
            break
        end[most_loaded] -= 1
        partition = partitions[end[most_loaded]]
        least_loaded = balancer.next_least_loaded_member()
        # Taking the partition was only tentative: if the two ranges are now within one of each
        # other, moving it would not improve the balance.
        if balancer.is_balanced():
            break
        builder.assign_partition(topic_id, partition, least_loaded)
        moved += 1
    return moved


def _next_member_with_partitions(
    balancer: _MemberBalancer, start: dict[int, int], end: dict[int, int]
) -> int:
    """The next most loaded subscriber that still holds a partition of the topic (excluding from
    the most loaded range those that hold none), or UNASSIGNED if none is left."""
    while True:
        member_index = balancer.next_most_loaded_member()
        if member_index == UNASSIGNED:
            return UNASSIGNED
        if member_index in end and end[member_index] - start[member_index] > 0:
            return member_index
        balancer.exclude_most_loaded_member()


@dataclass(slots=True)
class _MemberBalancer:
    """Kafka's MemberAssignmentBalancer: a topic's subscribers sorted by load (fewest partitions
    first), with two ranges of equally loaded members that widen as partitions are handed out or
    taken away: the least loaded range [0, least_end) grows rightwards, the most loaded range
    [most_start, most_end) grows leftwards. The loads are read live from `sizes`, but the range
    counts are those the members had before the current round, so a round-robin over a range gives
    each member of it one partition (or takes one) before the range's level moves."""

    sizes: list[int]
    member_order: Callable[[int], tuple[int, int]]
    sorted_members: list[int] | None = None
    least_end: int = 0  # exclusive
    least_count: int = -1  # the load of the least loaded range before this round
    next_least: int = 0
    most_start: int = 0  # inclusive
    most_end: int = 0  # exclusive; shrinks as members with nothing to give are excluded
    most_count: int = 1  # the load of the most loaded range before this round
    next_most: int = -1

    def initialize(self, members: list[int]) -> int:
        """Start over on these members; returns the load difference between the most and least
        loaded."""
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        ordered = sorted(members, key=self.member_order)
        self.sorted_members = ordered
        self.least_end = 0
        self.least_count = self.sizes[ordered[0]] - 1
        self.next_least = 0
        self.most_start = len(ordered)
        self.most_end = len(ordered)
        self.most_count = self.sizes[ordered[-1]] + 1
        self.next_most = len(ordered) - 1
        return self.sizes[ordered[-1]] - self.sizes[ordered[0]]

    def next_least_loaded_member(self) -> int:
        """The member to give the next partition to, as if it had been given one."""
        ordered = self._members()
        if self.next_least >= self.least_end:
            # Every member of the range got one this round: the range's level rises by one and it
            # takes in the members already at that level.
            self.least_count += 1
            while self.least_end < len(ordered) and self.sizes[ordered[self.least_end]] == self.least_count:
                self.least_end += 1
            self.next_least = 0
        member_index = ordered[self.next_least]
        self.next_least += 1
        return member_index

    def next_most_loaded_member(self) -> int:
        """The member to take the next partition from, as if it had given one up; UNASSIGNED when
        every member has been excluded."""
        ordered = self._members()
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Exclusions emptied the range; restart its level at the next member down so the
                # range surely widens below instead of handing out a member outside it.
                self.most_count = self.sizes[ordered[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and self.sizes[ordered[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return UNASSIGNED
        member_index = ordered[self.next_most]
        self.next_most -= 1
        return member_index

    def exclude_most_loaded_member(self) -> None:
        """Drop the member last returned by next_most_loaded_member from the most loaded range (it
        has nothing to give): swap it with the range's last member and shrink the range."""
        ordered = self._members()
        i, last = self.next_most + 1, self.most_end - 1
        ordered[i], ordered[last] = ordered[last], ordered[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1

    def _members(self) -> list[int]:
        if self.sorted_members is None:
            raise ValueError("The balancer has not been initialized.")
        return self.sorted_members


def _result(builder: _Builder) -> Assignment:
    return {
        member_id: {t: frozenset(ps) for t, ps in sorted(builder.target[i].items()) if ps}
        for i, member_id in enumerate(builder.member_ids)
    }
