"""The leader's assignors (seeds 002/003): range and round-robin, as Kafka's clients compute them."""

from __future__ import annotations

from collections.abc import Callable

Subscriptions = dict[str, list[str]]  # member id -> subscribed topics
Assignment = dict[str, dict[str, list[int]]]  # member id -> topic -> partitions


def range_assign(subscriptions: Subscriptions, partitions_per_topic: dict[str, int]) -> Assignment:
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


def round_robin_assign(subscriptions: Subscriptions, partitions_per_topic: dict[str, int]) -> Assignment:
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


ASSIGNORS: dict[str, Callable[[Subscriptions, dict[str, int]], Assignment]] = {
    "range": range_assign,
    "roundrobin": round_robin_assign,
}
