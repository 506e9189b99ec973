"""The `uniform` assignor for a homogeneous consumer group (Kafka's
`UniformHomogeneousAssignmentBuilder.build()`, KIP-848), which `UniformAssignor` picks when every
member subscribes to the same topics.

Balance comes first, stickiness second. All partitions of the subscribed topics form one pool;
with P partitions and M members every member's quota is P // M, and the first P % M members (in
member order) get one more. Each member keeps what it already holds of the subscribed topics up to
its quota; what is beyond the quota, and whole topics it no longer subscribes to, are revoked.
Partitions nobody holds, then the revoked ones, are dealt out to the members still under quota.

It differs from Kafka only in iteration order. Kafka walks hash sets and maps (member ids,
subscribed topic ids, a member's topics, a topic's partitions), whose order is arbitrary and
decides which members get the extra partition, which partitions a member over quota keeps, and
which member receives which free partition. Here members are walked by sorted id, topics by sorted
id and partitions in ascending order, so the same inputs give the same target assignment
everywhere. One further difference at the edge: when the group subscribes to nothing, Kafka returns
an empty map and we return every member with an empty assignment (what Kafka's target assignment
builder makes of a missing member anyway).
"""

from __future__ import annotations

from coordinator.consumer.assignment_spec import (
    Assignment,
    GroupSpec,
    PartitionAssignorError,
    TopicDescriber,
    TopicId,
)


def assign_homogeneous(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    """The new target assignment of a group whose members all subscribe to the same topics.

    Raises PartitionAssignorError if a subscribed topic is unknown to `topics`, or if the quotas
    could not absorb every free partition (only possible when the current assignment holds
    partitions the topic no longer has, or gives one partition to two members: Kafka trusts its
    input on both counts and so do we).
    """
    member_ids = spec.member_ids
    if not member_ids:
        return {}
    # Homogeneous: any member's subscription is everyone's. The caller dispatches here only when
    # that is so (GroupSpec.homogeneous), as UniformAssignor.assign does; it is not checked again.
    subscribed = sorted(spec.members[member_ids[0]].subscribed_topic_ids)
    if not subscribed:
        return {member_id: {} for member_id in member_ids}

    # The partitions someone already holds (Kafka's inverted target assignment), built once rather
    # than asking GroupSpec.is_partition_assigned per partition, which scans every member.
    held = {
        (topic_id, partition)
        for member in spec.members.values()
        for topic_id, partitions in member.assignment.items()
        for partition in partitions
    }

    unassigned: list[tuple[TopicId, int]] = []
    total_partitions = 0
    for topic_id in subscribed:
        num_partitions = topics.num_partitions(topic_id)
        if num_partitions == -1:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
            )
        unassigned.extend((topic_id, p) for p in range(num_partitions) if (topic_id, p) not in held)
        total_partitions += num_partitions

    min_quota, extra = divmod(total_partitions, len(member_ids))
    subscribed_set = frozenset(subscribed)
    target: Assignment = {}
    unfilled: list[tuple[str, int]] = []  # (member id, partitions it still has room for)

    # Revoke first: what a member no longer subscribes to, and what it holds beyond its quota.
    # Revoked partitions go after the never-held ones, so they are handed out last.
    for member_id in member_ids:
        quota = min_quota
        # Who gets the extra partitions depends only on member order, not on who holds more now:
        # a member holding min_quota + 1 that comes after the first `extra` members gives one up.
        if extra > 0:
            quota += 1
            extra -= 1
        kept: dict[TopicId, frozenset[int]] = {}
        current = spec.members[member_id].assignment
        for topic_id in sorted(current):
            if topic_id not in subscribed_set:
                continue  # the whole topic is revoked; nobody else needs it (not subscribed)
            partitions = sorted(current[topic_id])
            if len(partitions) <= quota:
                keep = partitions
            else:
                # Over quota within this topic: keep the lowest partitions, revoke the rest.
                keep = partitions[:quota]
                unassigned.extend((topic_id, p) for p in partitions[quota:])
            quota -= len(keep)
            if keep:
                kept[topic_id] = frozenset(keep)
        if quota > 0:
            unfilled.append((member_id, quota))
        target[member_id] = kept

    # Then fill: deal the free partitions, in list order, to the unfilled members in member order.
    next_free = 0
    for member_id, room in unfilled:
        taken = unassigned[next_free : next_free + room]
        next_free += len(taken)
        if not taken:
            break
        gained: dict[TopicId, set[int]] = {}
        for topic_id, partition in taken:
            gained.setdefault(topic_id, set()).add(partition)
        member_target = target[member_id]
        for topic_id, partitions in gained.items():
            member_target[topic_id] = member_target.get(topic_id, frozenset()) | partitions

    if next_free < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return target
