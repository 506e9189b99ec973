"""The heterogeneous uniform assignor: Kafka's UniformHeterogeneousAssignmentBuilderTest cases (whose
GroupSpec numbers the members in sorted order, as ours does, so their expected assignments carry
over unchanged), then properties over random groups."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer.assignment_spec import (
    Assignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    Topics,
)
from coordinator.consumer.uniform_heterogeneous import assign_heterogeneous, kafka_uuid_order


def kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString: 16 bytes in url-safe base64 without padding."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")


def member(subscribed, assignment: Mapping[uuid.UUID, tuple[int, ...]] | None = None) -> MemberSpec:
    return MemberSpec(
        subscribed_topic_ids=frozenset(subscribed),
        assignment={t: frozenset(ps) for t, ps in (assignment or {}).items()},
    )


def expected(**members: Mapping[uuid.UUID, tuple[int, ...]]) -> Assignment:
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in members.items()}


def assign(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> Assignment:
    return assign_heterogeneous(GroupSpec(members=members), Topics(partitions=partitions))


# -- Kafka's test cases --------------------------------------------------------------------------------


def test_two_members_no_topic_subscription() -> None:
    # Kafka answers an empty map; we list every member with nothing.
    result = assign({"A": member([]), "B": member([])}, {T1: 3})
    assert result == {"A": {}, "B": {}}


def test_two_members_subscribed_to_nonexistent_topics() -> None:
    with pytest.raises(PartitionAssignorError):
        assign({"A": member([T3]), "B": member([T2])}, {T1: 3})


def test_first_assignment_two_members_two_topics() -> None:
    result = assign({"A": member([T1, T3]), "B": member([T3])}, {T1: 3, T3: 6})
    assert result == expected(A={T1: (0, 1, 2), T3: (4,)}, B={T3: (0, 1, 2, 3, 5)})


def test_first_assignment_num_members_greater_than_total_num_partitions() -> None:
    result = assign({"A": member([T3]), "B": member([T3]), "C": member([T1])}, {T3: 1, T1: 2})
    assert result == expected(A={T3: (0,)}, B={}, C={T1: (0, 1)})


def test_reassignment_for_two_members_three_topics_given_unbalanced_prev_assignment() -> None:
    members = {
        "A": member([T1], {T1: (0, 1, 2)}),
        "B": member([T1, T2], {T1: (3,), T2: (0,)}),
        "C": member([T1, T2, T3], {T1: (4, 5), T2: (1, 2, 3), T3: (0, 1, 2, 3)}),
    }
    result = assign(members, {T1: 6, T2: 4, T3: 4})
    assert result == expected(
        A={T1: (0, 1, 2, 5)},
        B={T1: (3,), T2: (0, 1, 2, 3)},
        C={T1: (4,), T3: (0, 1, 2, 3)},
    )


def test_reassignment_when_partitions_are_added_for_two_members() -> None:
    # Before: T1 had 4 partitions, T2 3, T3 2, T4 3.
    members = {
        "A": member([T1, T3], {T1: (0, 1, 2, 3), T3: (0, 1)}),
        "B": member([T1, T2, T3, T4], {T2: (0, 1, 2), T4: (0, 1, 2)}),
    }
    result = assign(members, {T1: 6, T2: 5, T3: 3, T4: 3})
    assert result == expected(
        A={T1: (0, 1, 2, 3, 4, 5), T3: (0, 1, 2)},
        B={T2: (0, 1, 2, 3, 4), T4: (0, 1, 2)},
    )


def test_reassignment_when_one_member_added_and_partitions_added_two_members_two_topics() -> None:
    # Before: T1 and T2 had 3 partitions each; C just joined.
    members = {
        "A": member([T1], {T1: (0, 2), T2: (0,)}),
        "B": member([T1, T2], {T1: (1,), T2: (1, 2)}),
        "C": member([T1, T2]),
    }
    result = assign(members, {T1: 6, T2: 7})
    assert result == expected(
        A={T1: (0, 2, 3, 4, 5)},
        B={T1: (1,), T2: (1, 2, 6)},
        C={T2: (0, 3, 4, 5)},
    )


def test_reassignment_when_one_member_removed_after_initial_assignment_three_members_three_topics() -> None:
    members = {
        "A": member([T1, T3], {T1: (0, 1, 2), T3: (0, 1)}),
        "B": member([T2], {T2: (3, 4, 5, 6)}),
    }
    result = assign(members, {T1: 3, T2: 8, T3: 3})
    assert result == expected(A={T1: (0, 1, 2), T3: (0, 1, 2)}, B={T2: (0, 1, 2, 3, 4, 5, 6, 7)})


def test_reassignment_when_one_subscription_removed_after_initial_assignment_two_members() -> None:
    # A used to subscribe to T1 and T2.
    members = {
        "A": member([T1], {T1: (0, 2), T2: (1, 3)}),
        "B": member([T1, T2], {T1: (1,), T2: (0, 2, 4)}),
    }
    result = assign(members, {T1: 3, T2: 5})
    assert result == expected(A={T1: (0, 1, 2)}, B={T2: (0, 1, 2, 3, 4)})


def test_reassignment_when_topic_partitions_run_out_and_members_have_no_partitions() -> None:
    # B starts with nothing and T1's least loaded subscriber holds none of T1: balancing a topic
    # stops when the loaded subscribers have no partition of it left to give.
    members = {
        "A": member([T1, T2, T3], {T1: (0, 1), T2: (0, 1), T3: (0, 1)}),
        "B": member([T1, T2, T3]),
    }
    result = assign(members, {T1: 2, T2: 2, T3: 2})
    assert result == expected(A={T2: (0,), T3: (0, 1)}, B={T1: (0, 1), T2: (1,)})


def test_first_assignment_with_two_members_including_one_without_subscriptions() -> None:
    result = assign({"A": member([T1]), "B": member([])}, {T1: 3})
    assert result == expected(A={T1: (0, 1, 2)}, B={})


# -- our own cases ------------------------------------------------------------------------------------


def test_topic_ids_ordered_as_kafka_compares_them() -> None:
    # Kafka compares the two halves as signed longs: a high first bit sorts first.
    high = uuid.UUID(int=1 << 127)
    low = uuid.UUID(int=1)
    assert sorted([low, high], key=kafka_uuid_order) == [high, low]
    assert sorted([uuid.UUID(int=(1 << 63)), uuid.UUID(int=1)], key=kafka_uuid_order) == [
        uuid.UUID(int=1 << 63),
        uuid.UUID(int=1),
    ]


def test_topic_id_breaks_ties_in_assignment_order() -> None:
    # Two topics, same partitions per subscriber and subscriber count: the one Kafka orders first
    # (high bit set) is assigned first, so A (member index 0) gets its partition.
    high, low = uuid.UUID(int=1 << 127), uuid.UUID(int=5)
    result = assign({"A": member([high, low]), "B": member([high, low])}, {high: 1, low: 1})
    assert result == expected(A={high: (0,)}, B={low: (0,)})


def test_unknown_unsubscribed_topic_in_previous_assignment_is_dropped() -> None:
    gone = uuid.UUID(int=99)
    result = assign({"A": member([T1], {gone: (0, 1)}), "B": member([T2])}, {T1: 2, T2: 1})
    assert result == expected(A={T1: (0, 1)}, B={T2: (0,)})


def test_partition_beyond_topic_count_fails() -> None:
    # Kafka fails with an index error (its topics never shrink); we fail plainly.
    with pytest.raises(PartitionAssignorError):
        assign({"A": member([T1], {T1: (0, 3)}), "B": member([T2])}, {T1: 2, T2: 1})


def test_topic_without_partitions() -> None:
    result = assign({"A": member([T1, T2]), "B": member([T2])}, {T1: 0, T2: 2})
    assert result == expected(A={T2: (0,)}, B={T2: (1,)})


def test_overlapping_subscriptions_stay_nearly_balanced() -> None:
    # A on T1, B on T1+T2, C on T2 (the shape of Kafka's own example). Each topic ends balanced among
    # its subscribers (A 3 / B 4 on T1's side, B 4 / C 5 on T2's), so nothing moves further, though
    # moving one partition of T2 from C to B and one of T1 from B to A would level all three.
    members = {
        "A": member([T1]),
        "B": member([T1, T2], {T1: tuple(range(6))}),
        "C": member([T2], {T2: tuple(range(6))}),
    }
    result = assign(members, {T1: 6, T2: 6})
    assert result == expected(A={T1: (3, 4, 5)}, B={T1: (0, 1, 2), T2: (5,)}, C={T2: (0, 1, 2, 3, 4)})


# -- properties --------------------------------------------------------------------------------------

TOPIC_POOL = (
    uuid.UUID(int=1),
    uuid.UUID(int=(1 << 127) | 7),  # sorts first in Kafka's order, last in Python's
    uuid.UUID(int=(1 << 63) | 3),
    uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
)
GONE_TOPIC = uuid.UUID(int=42)  # deleted: held in previous assignments, unknown to the describer
MEMBER_POOL = ("A", "B", "C", "D", "E", "F")


@st.composite
def groups(draw, homogeneous: bool = False) -> tuple[GroupSpec, Topics]:
    topic_ids = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=len(TOPIC_POOL), unique=True))
    partitions = {t: draw(st.integers(0, 9)) for t in topic_ids}
    member_ids = draw(st.lists(st.sampled_from(MEMBER_POOL), min_size=1, max_size=5, unique=True))
    topic_sets = st.frozensets(st.sampled_from(topic_ids))
    if homogeneous:
        shared = draw(topic_sets)
        subscriptions = {m: shared for m in member_ids}
    else:
        subscriptions = {m: draw(topic_sets) for m in member_ids}
    # A previous target assignment that gives each partition to at most one member (as Kafka's
    # always does), not necessarily to a subscriber: members may have dropped topics since.
    previous: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
    owner = st.none() | st.sampled_from(member_ids)
    for t in [*topic_ids, GONE_TOPIC]:
        for p in range(partitions.get(t, 3)):
            m = draw(owner)
            if m is not None:
                previous[m].setdefault(t, set()).add(p)
    members = {
        m: MemberSpec(subscriptions[m], {t: frozenset(ps) for t, ps in previous[m].items()})
        for m in member_ids
    }
    return GroupSpec(members=members), Topics(partitions=partitions)


def loads(result: Assignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def assert_valid(spec: GroupSpec, topics: Topics, result: Assignment) -> None:
    assert set(result) == set(spec.members)
    holders: dict[uuid.UUID, dict[int, str]] = {}
    for m, assignment in result.items():
        for t, ps in assignment.items():
            assert ps, "topics without partitions are left out"
            assert t in spec.members[m].subscribed_topic_ids, f"{m} got {t} it does not subscribe to"
            for p in ps:
                assert p not in holders.setdefault(t, {}), f"{t}-{p} given twice"
                holders[t][p] = m
    subscribed = set().union(*(s.subscribed_topic_ids for s in spec.members.values()))
    for t in subscribed:
        assert set(holders.get(t, {})) == set(range(topics.num_partitions(t)))
    assert set(holders) <= subscribed


def with_previous(spec: GroupSpec, result: Assignment) -> GroupSpec:
    return GroupSpec(
        members={m: MemberSpec(s.subscribed_topic_ids, result[m]) for m, s in spec.members.items()}
    )


@settings(max_examples=200, deadline=None)
@given(groups())
def test_every_partition_goes_to_exactly_one_subscriber(group: tuple[GroupSpec, Topics]) -> None:
    spec, topics = group
    assert_valid(spec, topics, assign_heterogeneous(spec, topics))


@settings(max_examples=200, deadline=None)
@given(groups())
def test_running_again_on_its_own_output_changes_nothing(group: tuple[GroupSpec, Topics]) -> None:
    spec, topics = group
    result = assign_heterogeneous(spec, topics)
    assert assign_heterogeneous(with_previous(spec, result), topics) == result


@settings(max_examples=200, deadline=None)
@given(groups())
def test_deterministic_whatever_the_member_order(group: tuple[GroupSpec, Topics]) -> None:
    spec, topics = group
    result = assign_heterogeneous(spec, topics)
    reversed_spec = GroupSpec(members=dict(reversed(list(spec.members.items()))))
    assert assign_heterogeneous(spec, topics) == result
    assert assign_heterogeneous(reversed_spec, topics) == result


@settings(max_examples=200, deadline=None)
@given(groups())
def test_no_subscriber_could_take_a_partition_from_one_with_two_more(group: tuple[GroupSpec, Topics]) -> None:
    # What the final balancing step guarantees once it has settled (well within its 16 loops for
    # groups this small): for each topic, a subscriber holding a partition of it has at most one
    # partition more in all than any other subscriber of it.
    spec, topics = group
    result = assign_heterogeneous(spec, topics)
    load = loads(result)
    for t in {t for s in spec.members.values() for t in s.subscribed_topic_ids}:
        subscribers = [m for m, s in spec.members.items() if t in s.subscribed_topic_ids]
        least = min(load[m] for m in subscribers)
        for m in subscribers:
            if t in result[m]:
                assert load[m] - least <= 1, (t, m, load)


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True))
def test_same_subscriptions_balance_within_one(group: tuple[GroupSpec, Topics]) -> None:
    spec, topics = group
    result = assign_heterogeneous(spec, topics)
    assert_valid(spec, topics, result)
    if any(s.subscribed_topic_ids for s in spec.members.values()):
        assert max(loads(result).values()) - min(loads(result).values()) <= 1


@settings(max_examples=100, deadline=None)
@given(groups(), st.sampled_from(MEMBER_POOL))
def test_subscribing_to_an_unknown_topic_fails(group: tuple[GroupSpec, Topics], member_id: str) -> None:
    spec, topics = group
    unknown = uuid.UUID(int=7777)
    target = spec.members.get(member_id) or MemberSpec(frozenset())
    widened = MemberSpec(target.subscribed_topic_ids | {unknown}, target.assignment)
    members = {**spec.members, member_id: widened}
    with pytest.raises(PartitionAssignorError):
        assign_heterogeneous(GroupSpec(members=members), topics)
