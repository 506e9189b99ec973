"""The homogeneous uniform assignor (coordinator/consumer/uniform_homogeneous.py): Kafka's
OptimizedUniformAssignmentBuilderTest cases, then properties (validity, balance, stickiness,
determinism).

Where Kafka's expected assignment follows from the iteration order of a HashSet of topic ids, the
case is run twice: with Kafka's topic ids and the assignment sorted order gives, and with ids
relabelled so that sorted order is the order Kafka's expectation implies, against Kafka's own
expected assignment (which shows the port differs from Kafka in nothing but that order).
"""

from __future__ import annotations

import base64
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer.assignment_spec import GroupSpec, MemberSpec, PartitionAssignorError, Topics
from coordinator.consumer.uniform_homogeneous import assign_homogeneous


def kafka_uuid(text: str) -> uuid.UUID:
    """A Kafka Uuid from its base64url string form."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
assert T1 < T2 < T3  # sorted order is T1, T2, T3

# Ids whose sorted order is the one Kafka's HashSet gave in the cases below: T2 and T3 before T1.
K1, K2, K3 = uuid.UUID(int=3), uuid.UUID(int=1), uuid.UUID(int=2)


def member(topics, assignment=None) -> MemberSpec:
    return MemberSpec(
        subscribed_topic_ids=frozenset(topics),
        assignment={t: frozenset(ps) for t, ps in (assignment or {}).items()},
    )


def assignment(**members):
    """member id -> {topic: partitions} with partitions as frozensets."""
    return {m: {t: frozenset(ps) for t, ps in topics.items()} for m, topics in members.items()}


def check_valid_and_balanced(spec: GroupSpec, topics: Topics, result) -> None:
    """Kafka's checkValidityAndBalance, plus: every subscribed partition is assigned."""
    assert set(result) == set(spec.members)
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, topic_partitions in result.items():
        for topic_id, partitions in topic_partitions.items():
            assert topic_id in spec.members[member_id].subscribed_topic_ids
            assert partitions, "empty partition sets are left out"
            for p in partitions:
                assert 0 <= p < topics.num_partitions(topic_id)
                assert (topic_id, p) not in owners, f"{topic_id}-{p} assigned twice"
                owners[(topic_id, p)] = member_id
    subscribed = set().union(*(m.subscribed_topic_ids for m in spec.members.values()))
    expected = {(t, p) for t in subscribed for p in range(topics.num_partitions(t))}
    assert set(owners) == expected
    sizes = [size(result[m]) for m in result]
    assert max(sizes) - min(sizes) <= 1


def size(topic_partitions) -> int:
    return sum(len(ps) for ps in topic_partitions.values())


# -- Kafka's cases -------------------------------------------------------------------------------


def test_one_member_no_topic_subscription():
    # Kafka returns an empty map here; we name every member (see the module docstring).
    spec = GroupSpec({"A": member([])})
    assert assign_homogeneous(spec, Topics({T1: 3})) == {"A": {}}


def test_no_members():
    assert assign_homogeneous(GroupSpec({}), Topics({T1: 3})) == {}


def test_one_member_subscribed_to_nonexistent_topic():
    spec = GroupSpec({"A": member([T2])})
    with pytest.raises(PartitionAssignorError):
        assign_homogeneous(spec, Topics({T1: 3}))


@pytest.mark.parametrize(
    ("t1", "t3", "expected"),
    [
        # Sorted order walks T1 first, so A's quota of 3 is all of T1.
        (T1, T3, {"A": {T1: {0, 1, 2}}, "B": {T3: {0, 1}}}),
        # Kafka's expectation: its HashSet walked T3 first.
        (K1, K3, {"A": {K1: {0}, K3: {0, 1}}, "B": {K1: {1, 2}}}),
    ],
)
def test_first_assignment_two_members_two_topics(t1, t3, expected):
    topics = Topics({t1: 3, t3: 2})
    spec = GroupSpec({"A": member([t1, t3]), "B": member([t1, t3])})
    result = assign_homogeneous(spec, topics)
    assert result == assignment(**expected)
    check_valid_and_balanced(spec, topics, result)


def test_first_assignment_more_members_than_partitions():
    topics = Topics({T3: 2})
    spec = GroupSpec({m: member([T3]) for m in "ABC"})
    result = assign_homogeneous(spec, topics)
    # The first two members in order get the two extra partitions; C gets nothing.
    assert result == assignment(A={T3: {0}}, B={T3: {1}}, C={})
    check_valid_and_balanced(spec, topics, result)


def test_validity_and_balance_for_large_sample_set():
    topic_ids = [uuid.UUID(int=i) for i in range(1, 100)]
    topics = Topics({t: 3 for t in topic_ids})
    spec = GroupSpec({f"member{i}": member(topic_ids) for i in range(1, 50)})
    check_valid_and_balanced(spec, topics, assign_homogeneous(spec, topics))


def test_reassignment_given_unbalanced_previous_assignment():
    # Kafka gives A's assignment in T1, T2 order, which sorted order keeps.
    topics = Topics({T1: 3, T2: 3})
    spec = GroupSpec(
        {
            "A": member([T1, T2], {T1: {0, 1}, T2: {0, 1}}),
            "B": member([T1, T2], {T1: {2}, T2: {2}}),
        }
    )
    result = assign_homogeneous(spec, topics)
    # Quota 3 each: A keeps T1 0,1 and T2 0, gives up T2 1, which B takes.
    assert result == assignment(A={T1: {0, 1}, T2: {0}}, B={T1: {2}, T2: {1, 2}})
    check_valid_and_balanced(spec, topics, result)


@pytest.mark.parametrize(
    ("t1", "t2", "expected"),
    [
        # Free partitions in sorted order: T1 3,4,5 then T2 3,4; A (quota 6) takes three of them.
        (T1, T2, {"A": {T1: {0, 2, 3, 4, 5}, T2: {0}}, "B": {T1: {1}, T2: {1, 2, 3, 4}}}),
        # Kafka's expectation: its HashSet listed T2's new partitions first.
        (K1, K2, {"A": {K1: {0, 2, 3}, K2: {0, 3, 4}}, "B": {K1: {1, 4, 5}, K2: {1, 2}}}),
    ],
)
def test_reassignment_when_partitions_are_added(t1, t2, expected):
    topics = Topics({t1: 6, t2: 5})  # were 3 and 3
    spec = GroupSpec(
        {
            "A": member([t1, t2], {t1: {0, 2}, t2: {0}}),
            "B": member([t1, t2], {t1: {1}, t2: {1, 2}}),
        }
    )
    result = assign_homogeneous(spec, topics)
    assert result == assignment(**expected)
    check_valid_and_balanced(spec, topics, result)


def test_reassignment_when_one_member_added():
    topics = Topics({T1: 3, T2: 3})
    spec = GroupSpec(
        {
            "A": member([T1, T2], {T1: {0, 2}, T2: {0}}),
            "B": member([T1, T2], {T1: {1}, T2: {1, 2}}),
            "C": member([T1, T2]),
        }
    )
    result = assign_homogeneous(spec, topics)
    # Quota 2 each: A gives up T2 0, B gives up T2 2 (its highest), C takes both.
    assert result == assignment(A={T1: {0, 2}}, B={T1: {1}, T2: {1}}, C={T2: {0, 2}})
    check_valid_and_balanced(spec, topics, result)


@pytest.mark.parametrize(
    ("t1", "t2", "expected"),
    [
        # C's partitions are free, T1's first: A takes T1 2, B takes T2 2.
        (T1, T2, {"A": {T1: {0, 2}, T2: {0}}, "B": {T1: {1}, T2: {1, 2}}}),
        # Kafka's expectation: its HashSet listed T2 2 first.
        (K1, K2, {"A": {K1: {0}, K2: {0, 2}}, "B": {K1: {1, 2}, K2: {1}}}),
    ],
)
def test_reassignment_when_one_member_removed(t1, t2, expected):
    topics = Topics({t1: 3, t2: 3})
    spec = GroupSpec(
        {
            "A": member([t1, t2], {t1: {0}, t2: {0}}),
            "B": member([t1, t2], {t1: {1}, t2: {1}}),
            # C, which held T1 2 and T2 2, left
        }
    )
    result = assign_homogeneous(spec, topics)
    assert result == assignment(**expected)
    check_valid_and_balanced(spec, topics, result)


def test_reassignment_when_one_subscription_removed():
    topics = Topics({T1: 2, T2: 2})
    # Both subscribed to T1 and T2 before; now only to T2.
    spec = GroupSpec(
        {
            "A": member([T2], {T1: {0}, T2: {0}}),
            "B": member([T2], {T1: {1}, T2: {1}}),
        }
    )
    result = assign_homogeneous(spec, topics)
    assert result == assignment(A={T2: {0}}, B={T2: {1}})
    check_valid_and_balanced(spec, topics, result)


# -- beyond Kafka's cases ------------------------------------------------------------------------


def test_extra_partition_goes_by_member_order_not_by_holding():
    # 3 partitions, 2 members: A (first) gets quota 2 even though B holds 2 now, so B gives one up.
    topics = Topics({T1: 3})
    spec = GroupSpec({"A": member([T1], {T1: {0}}), "B": member([T1], {T1: {1, 2}})})
    assert assign_homogeneous(spec, topics) == assignment(A={T1: {0, 2}}, B={T1: {1}})


def test_partitions_left_unassigned_raises():
    # Two members hold the same partition, which Kafka's input never does: the quotas then fall
    # one short of the free partitions and Kafka throws.
    topics = Topics({T1: 2})
    spec = GroupSpec({"A": member([T1], {T1: {0}}), "B": member([T1], {T1: {0}})})
    with pytest.raises(PartitionAssignorError):
        assign_homogeneous(spec, topics)


def test_current_assignment_is_not_mutated():
    topics = Topics({T1: 4})
    spec = GroupSpec({"A": member([T1], {T1: {0, 1, 2, 3}}), "B": member([T1])})
    before = {m: dict(s.assignment) for m, s in spec.members.items()}
    assign_homogeneous(spec, topics)
    assert {m: dict(s.assignment) for m, s in spec.members.items()} == before


# -- properties ----------------------------------------------------------------------------------

MEMBER_POOL = [f"m{i}" for i in range(8)]


@st.composite
def groups(draw, min_members: int = 1):
    """A homogeneous group with a valid current assignment: every partition held by at most one
    member (possibly one that has left), of topics the group may no longer subscribe to."""
    counts = draw(st.lists(st.integers(0, 9), min_size=1, max_size=5))
    all_topics = {uuid.UUID(int=i + 1): n for i, n in enumerate(counts)}
    subscribed = draw(st.sets(st.sampled_from(sorted(all_topics)), min_size=1))
    member_ids = draw(st.lists(st.sampled_from(MEMBER_POOL), min_size=min_members, max_size=6, unique=True))
    holders = [None, "gone", *member_ids]
    held: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
    for topic_id, n in all_topics.items():
        for p in range(n):
            holder = draw(st.sampled_from(holders))
            if holder in held:
                held[holder].setdefault(topic_id, set()).add(p)
    spec = GroupSpec({m: member(subscribed, held[m]) for m in member_ids})
    # Partitions of unsubscribed topics still exist; the describer knows only subscribed ones.
    return spec, Topics({t: all_topics[t] for t in subscribed})


def with_assignment(spec: GroupSpec, result) -> GroupSpec:
    return GroupSpec({m: MemberSpec(s.subscribed_topic_ids, result[m]) for m, s in spec.members.items()})


@settings(max_examples=200, deadline=None)
@given(groups())
def test_property_valid_and_balanced(group):
    spec, topics = group
    check_valid_and_balanced(spec, topics, assign_homogeneous(spec, topics))


@settings(max_examples=200, deadline=None)
@given(groups())
def test_property_each_member_keeps_what_its_quota_allows(group):
    spec, topics = group
    result = assign_homogeneous(spec, topics)
    for member_id, current in spec.members.items():
        still_valid = {(t, p) for t, ps in current.assignment.items() if t in topics.partitions for p in ps}
        now = {(t, p) for t, ps in result[member_id].items() for p in ps}
        # Every member ends exactly at its quota, so len(now) is the quota.
        assert len(still_valid & now) == min(len(still_valid), len(now))


@settings(max_examples=200, deadline=None)
@given(groups())
def test_property_rerun_on_own_output_changes_nothing(group):
    spec, topics = group
    result = assign_homogeneous(spec, topics)
    assert assign_homogeneous(with_assignment(spec, result), topics) == result


@settings(max_examples=200, deadline=None)
@given(groups(), st.sampled_from(["a", "m35", "zz"]))
def test_property_joiner_takes_only_from_members_over_quota(group, joiner):
    spec, topics = group
    settled = assign_homogeneous(spec, topics)
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    members = dict(with_assignment(spec, settled).members)
    members[joiner] = member(subscribed)
    after = assign_homogeneous(GroupSpec(members), topics)

    owner_before = {(t, p): m for m, tps in settled.items() for t, ps in tps.items() for p in ps}
    for new_owner, tps in after.items():
        for t, ps in tps.items():
            for p in ps:
                old_owner = owner_before[(t, p)]  # all were assigned before the join
                if old_owner != new_owner:
                    # Only a member that had more than its new quota gives anything up.
                    assert size(settled[old_owner]) > size(after[old_owner])


@settings(max_examples=200, deadline=None)
@given(groups())
def test_property_deterministic(group):
    spec, topics = group
    result = assign_homogeneous(spec, topics)
    assert assign_homogeneous(spec, topics) == result
    # The members' insertion order does not matter either.
    reordered = GroupSpec(dict(reversed(list(spec.members.items()))))
    assert assign_homogeneous(reordered, topics) == result
