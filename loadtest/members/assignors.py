"""The leader's assignors (seeds 002/003): range, round-robin and cooperative-sticky.

Each takes the members' subscriptions (member id -> topics), the partition count of each topic,
and what each member owns now (only cooperative-sticky reads it), and returns member id -> topic
-> partitions.

cooperative-sticky follows KIP-429 (Kafka's CooperativeStickyAssignor): start from what members
own (a partition two members claim is kept by neither), give unowned partitions to the least
loaded eligible member, move partitions from the most to the least loaded member until the counts
of members that could share a partition differ by at most one; then withhold every partition
whose target owner is not its current owner. The current owner, not finding it in its new
assignment, revokes it and rejoins, and the next rebalance hands it to its target: a partition
is never owned by two members at once, and partitions that do not move are never revoked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

Subscriptions = dict[str, list[str]]  # member id -> subscribed topics
Owned = dict[str, dict[str, list[int]]]  # member id -> topic -> partitions it owns now
Assignment = dict[str, dict[str, list[int]]]  # member id -> topic -> partitions


def range_assign(subscriptions: Subscriptions, partitions_per_topic: dict[str, int], owned: Owned | None = None) -> Assignment:
    """Per topic: members sorted by id; the first (partitions % members) get one extra partition."""
    assignment: Assignment = {m: {} for m in subscriptions}
    for topic, count in sorted(partitions_per_topic.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        per_member, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per_member + (1 if i < extra else 0)
            if n:
                assignment[member][topic] = list(range(start, start + n))
            start += n
    return assignment


def round_robin_assign(subscriptions: Subscriptions, partitions_per_topic: dict[str, int], owned: Owned | None = None) -> Assignment:
    """All partitions sorted by (topic, partition) dealt round the members sorted by id, skipping
    members that do not subscribe to the partition's topic."""
    assignment: Assignment = {m: {} for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return assignment
    turn = 0
    for topic in sorted(partitions_per_topic):
        for partition in range(partitions_per_topic[topic]):
            for _ in range(len(members)):
                member = members[turn % len(members)]
                turn += 1
                if topic in subscriptions[member]:
                    assignment[member].setdefault(topic, []).append(partition)
                    break
    return assignment


def sticky_target(subscriptions: Subscriptions, partitions_per_topic: dict[str, int], owned: Owned) -> dict[str, set[tuple[str, int]]]:
    """The balanced assignment that keeps as much of what members own as balance allows."""
    members = sorted(subscriptions)
    eligible = {m: set(subscriptions[m]) for m in members}
    every = {(t, p) for t, n in partitions_per_topic.items() for p in range(n) if any(t in eligible[m] for m in members)}
    claims: Counter[tuple[str, int]] = Counter(
        (t, p) for m in members for t, ps in (owned.get(m) or {}).items() for p in set(ps)
    )
    target: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    for m in members:
        for t, ps in (owned.get(m) or {}).items():
            for p in set(ps):
                if (t, p) in every and t in eligible[m] and claims[(t, p)] == 1:
                    target[m].add((t, p))
    taken = {tp for tps in target.values() for tp in tps}
    for tp in sorted(every - taken):
        candidates = [m for m in members if tp[0] in eligible[m]]
        target[min(candidates, key=lambda m: (len(target[m]), m))].add(tp)
    # Move from the most to the least loaded member while some eligible pair differs by two or more:
    # each move lowers the sum of squared counts, so this ends.
    while True:
        moved = False
        for giver in sorted(members, key=lambda m: (-len(target[m]), m)):
            for taker in sorted(members, key=lambda m: (len(target[m]), m)):
                if len(target[giver]) - len(target[taker]) < 2:
                    break
                movable = sorted(tp for tp in target[giver] if tp[0] in eligible[taker])
                if movable:
                    tp = movable[-1]
                    target[giver].remove(tp)
                    target[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return target


def cooperative_sticky_assign(subscriptions: Subscriptions, partitions_per_topic: dict[str, int], owned: Owned | None = None) -> Assignment:
    owned = owned or {}
    target = sticky_target(subscriptions, partitions_per_topic, owned)
    current_owner = {(t, p): m for m in subscriptions for t, ps in (owned.get(m) or {}).items() for p in ps}
    assignment: Assignment = {m: {} for m in subscriptions}
    for member, tps in target.items():
        for topic, partition in sorted(tps):
            holder = current_owner.get((topic, partition))
            if holder is not None and holder != member and holder in subscriptions:
                continue  # withheld this round: its owner revokes it first (KIP-429)
            assignment[member].setdefault(topic, []).append(partition)
    return assignment


ASSIGNORS: dict[str, Callable[[Subscriptions, dict[str, int], Owned | None], Assignment]] = {
    "range": range_assign,
    "roundrobin": round_robin_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}
COOPERATIVE = frozenset({"cooperative-sticky"})
