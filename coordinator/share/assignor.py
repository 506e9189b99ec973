"""The share-group SimpleAssignor (seed 001 §5-2-1-2; SPEC §3; Kafka 4.2 `SimpleAssignor`,
`SimpleHomogeneousAssignmentBuilder`, `SimpleHeterogeneousAssignmentBuilder`).

A share-group partition may be consumed by several members at once, so the assignor decides two
numbers and then fills them in:

- desired sharing D = ceil(members / partitions): how many members each partition gets. While there
  are at least as many partitions as members, D = 1 and nothing is shared.
- desired assignment count of member i = ceil(p·(i+1)) − ceil(p·i) with p = D·partitions/members:
  the D·partitions (member, partition) slots spread so that counts differ by at most one.

Balance comes first, stickiness second: starting from the previous target assignment, revoke what
may no longer be assigned, revoke from members holding more than their count, revoke from partitions
shared by more than D members, then hand the remaining slots to the members still short.

A homogeneous group (every member subscribes to the same topics) balances all its partitions as one
pool. A heterogeneous group balances each topic on its own among the members subscribing to it, so a
member subscribing to several topics gets a fair share of each (Kafka's note on the heterogeneous
builder: M1 on T1, M2 on T2, M3 on both gives M3 half of T1 and half of T2).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicId = uuid.UUID
Assignment = dict[str, dict[TopicId, frozenset[int]]]  # member id -> topic id -> partitions


def desired_sharing(num_members: int, num_partitions: int) -> int:
    """ceil(members / partitions); 0 when there is nothing to assign."""
    if num_partitions == 0:
        return 0
    return (num_members + num_partitions - 1) // num_partitions


def desired_assignment_counts(num_members: int, num_partitions: int) -> list[int]:
    """How many partitions member i (in member order) should hold.

    Kafka computes p = D·P/M as a double and takes Math.ceil of p·i; the rounding error makes
    p·i land just above an integer for about 6% of (M, P) pairs (7 members × 29 partitions gives the
    last member 5 where 4 is right, 30 slots for 29 partitions). Integer ceilings give exactly
    D·P slots, which is what the "every partition gets D members" reasoning below relies on.
    """
    slots = desired_sharing(num_members, num_partitions) * num_partitions
    # ceil(slots·i / M) for i = 0..M; member i gets the difference of neighbours.
    bounds = [-(-slots * i // num_members) for i in range(num_members + 1)]
    return [bounds[i + 1] - bounds[i] for i in range(num_members)]


def simple_assign(
    subscriptions: Mapping[str, frozenset[TopicId]],
    partitions: Mapping[TopicId, frozenset[int]],
    previous: Mapping[str, Mapping[TopicId, Iterable[int]]],
) -> Assignment:
    """The new target assignment of a share group.

    `subscriptions`: member id -> subscribed topic ids (topics that exist); `partitions`: topic id ->
    the partitions that may be assigned (e.g. only those whose share state is initialized; a topic
    missing here has none); `previous`: the current target assignment, kept where balance allows.
    Every member of `subscriptions` is in the result, with an empty dict if it gets nothing; topics a
    member ends up with no partitions of are left out of its dict.
    """
    # Kafka numbers the members in the iteration order of a HashMap of member ids, which is
    # arbitrary; sorted ids make the result (and so the records we write) reproducible everywhere.
    member_ids = sorted(subscriptions)
    if not member_ids:
        return {}
    first = subscriptions[member_ids[0]]
    if all(subscriptions[member_id] == first for member_id in member_ids):
        return _assign_homogeneous(member_ids, first, partitions, previous)
    return _assign_heterogeneous(member_ids, subscriptions, partitions, previous)


def _assign_homogeneous(
    member_ids: list[str],
    topic_ids: frozenset[TopicId],
    partitions: Mapping[TopicId, frozenset[int]],
    previous: Mapping[str, Mapping[TopicId, Iterable[int]]],
) -> Assignment:
    # One pool across all subscribed topics, ordered by topic id then partition (Kafka: a HashMap of
    # TopicIdPartition, i.e. no particular order).
    targets = [(topic_id, p) for topic_id in sorted(topic_ids) for p in sorted(partitions.get(topic_id, ()))]
    index = {target: i for i, target in enumerate(targets)}
    # Revoke what may not be assigned: Kafka's revokeUnassignablePartitions drops only unsubscribed
    # topics and would keep (and even top up to D members) a partition no longer in its target list.
    # Here `partitions` is the caller's definition of assignable, so anything outside it goes.
    held = []
    for member_id in member_ids:
        own = previous.get(member_id, {})
        held.append(
            sorted(
                index[(topic_id, p)]
                for topic_id, ps in own.items()
                if topic_id in topic_ids
                for p in ps
                if (topic_id, p) in index
            )
        )
    owned = _balance(held, len(targets))
    result: Assignment = {}
    for member_id, own_indices in zip(member_ids, owned):
        by_topic: dict[TopicId, set[int]] = {}
        for i in own_indices:
            topic_id, p = targets[i]
            by_topic.setdefault(topic_id, set()).add(p)
        result[member_id] = {topic_id: frozenset(ps) for topic_id, ps in by_topic.items()}
    return result


def _assign_heterogeneous(
    member_ids: list[str],
    subscriptions: Mapping[str, frozenset[TopicId]],
    partitions: Mapping[TopicId, frozenset[int]],
    previous: Mapping[str, Mapping[TopicId, Iterable[int]]],
) -> Assignment:
    subscribers: dict[TopicId, list[str]] = {}
    for member_id in member_ids:  # sorted, so each topic's subscribers are in member order too
        for topic_id in subscriptions[member_id]:
            subscribers.setdefault(topic_id, []).append(member_id)

    # Partitions of a topic a member no longer subscribes to are simply not carried over: Kafka gets
    # the same by giving such a member a desired count of 0 for the topic, except for a topic nobody
    # subscribes to any more, which its per-topic loop never visits and so leaves assigned.
    result: Assignment = {member_id: {} for member_id in member_ids}
    for topic_id in sorted(subscribers):
        topic_members = subscribers[topic_id]
        targets = sorted(partitions.get(topic_id, ()))
        index = {p: i for i, p in enumerate(targets)}
        held = [
            sorted(index[p] for p in previous.get(member_id, {}).get(topic_id, ()) if p in index)
            for member_id in topic_members
        ]
        for member_id, own_indices in zip(topic_members, _balance(held, len(targets))):
            if own_indices:
                result[member_id][topic_id] = frozenset(targets[i] for i in own_indices)
    return result


@dataclass(slots=True)
class _Pool:
    """One balancing problem: members 0..M-1 (in member order) and target partitions 0..P-1."""

    desired_sharing: int
    desired_counts: list[int]
    owned: list[set[int]]  # member -> partitions it holds so far
    # partition -> its members; a dict used as an insertion-ordered set, so "the last holders" is
    # well defined and removal is O(1).
    holders: list[dict[int, None]]


def _balance(held: list[list[int]], num_partitions: int) -> list[list[int]]:
    """Balance one pool. `held[m]`: the target partitions member m still holds from the previous
    assignment (unassignable ones already dropped), ascending. Returns each member's partitions."""
    num_members = len(held)
    pool = _Pool(
        desired_sharing=desired_sharing(num_members, num_partitions),
        desired_counts=desired_assignment_counts(num_members, num_partitions),
        owned=[set(own) for own in held],
        holders=[{} for _ in range(num_partitions)],
    )
    for m, own in enumerate(held):
        for q in own:
            pool.holders[q][m] = None
    # Kafka 4.2's order: overfilled members first, then over-shared partitions, and assigning the
    # remaining slots must come last.
    _revoke_overfilled_members(pool, held)
    _revoke_overshared_partitions(pool)
    _assign_remaining_partitions(pool)
    return [sorted(own) for own in pool.owned]


def _revoke_overfilled_members(pool: _Pool, held: list[list[int]]) -> None:
    for m, own in enumerate(held):
        excess = len(own) - pool.desired_counts[m]
        if excess <= 0:
            continue
        # Kafka drops whichever partitions its HashSet yields first. Dropping a partition that has
        # more than D members first costs nothing extra: it would be revoked from someone in the next
        # step anyway, and this way that someone keeps it.
        dropped = [q for q in own if len(pool.holders[q]) > pool.desired_sharing][:excess]
        dropped_set = set(dropped)
        if len(dropped) < excess:
            remaining = [q for q in own if q not in dropped_set]
            dropped += remaining[len(remaining) - (excess - len(dropped)) :]  # keep the lowest
        for q in dropped:
            pool.owned[m].discard(q)
            del pool.holders[q][m]


def _revoke_overshared_partitions(pool: _Pool) -> None:
    for q, members in enumerate(pool.holders):
        extra = len(members) - pool.desired_sharing
        if extra <= 0:
            continue
        # Every holder is within its count by now, so whoever loses the partition becomes short by
        # one and is refilled below; taking it from the last holders in member order is as good as
        # any other choice and deterministic.
        for m in list(members)[-extra:]:
            pool.owned[m].discard(q)
            del members[m]


def _assign_remaining_partitions(pool: _Pool) -> None:
    """Give partitions short of D members to members short of their count, round-robin.

    Members still short wait in a queue; a member that takes a partition and is still short goes to
    the back, so consecutive partitions go to different members (Kafka keeps one iterator over the
    unfilled members across partitions, to the same effect). A partition that every short member
    already holds is left short, as in Kafka ("harmless tolerating a slight imbalance").

    Kafka stops trying once a full pass over the short members made no assignment and does not
    reset that flag for the next partition, so a later partition that a short member could take is
    left behind (7 members on 3 partitions, the two members due 2 both holding only partition 0:
    Kafka gives partition 1 two members of 3 and leaves one of them at 1). Here a partition gives up
    only after a full pass on that partition, so the result is maximal: no short partition and short
    member that could be paired remain. Hence a second run over our own output changes nothing, and,
    with slots summing to exactly D·P, every target partition gets a member and counts differ by at
    most one (with D > 1 every count is 1 or 2, and only a member due 2 can be stuck at 1).
    """
    short = deque(m for m, own in enumerate(pool.owned) if len(own) < pool.desired_counts[m])
    for q, members in enumerate(pool.holders):
        if not short:
            return
        wanted = pool.desired_sharing - len(members)
        misses = 0  # consecutive short members that already hold q
        while wanted > 0 and short and misses < len(short):
            m = short.popleft()
            if q in pool.owned[m]:
                short.append(m)
                misses += 1
                continue
            pool.owned[m].add(q)
            members[m] = None
            wanted -= 1
            misses = 0
            if len(pool.owned[m]) < pool.desired_counts[m]:
                short.append(m)
