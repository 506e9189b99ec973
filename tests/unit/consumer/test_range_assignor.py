"""The server-side range assignor (coordinator/consumer/range_assignor.py): Kafka's
RangeAssignorTest cases (none depends on hash order: Kafka sorts the members and cuts each topic on
its own), then properties (validity, per-topic balance, contiguous ranges, co-partitioning,
static-member stickiness, determinism).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer.assignment_spec import GroupSpec, MemberSpec, PartitionAssignorError, Topics
from coordinator.consumer.range_assignor import assign_range, sorted_member_ids

# Kafka's test draws random topic ids; any fixed ones do.
T1, T2, T3 = (uuid.UUID(int=i) for i in (11, 22, 33))


def member(topics, assignment=None, instance_id=None) -> MemberSpec:
    return MemberSpec(
        subscribed_topic_ids=frozenset(topics),
        assignment={t: frozenset(ps) for t, ps in (assignment or {}).items()},
        instance_id=instance_id,
    )


def assignment(**members):
    return {m: {t: frozenset(ps) for t, ps in topics.items()} for m, topics in members.items()}


# -- Kafka's cases -------------------------------------------------------------------------------


def test_no_members():
    assert assign_range(GroupSpec({}), Topics({T1: 3})) == {}


def test_one_member_no_topic():
    assert assign_range(GroupSpec({"A": member([])}), Topics({T1: 3})) == {"A": {}}


def test_one_member_subscribed_to_nonexistent_topic():
    with pytest.raises(PartitionAssignorError):
        assign_range(GroupSpec({"A": member([T2])}), Topics({T1: 3}))


def test_heterogeneous_member_subscribed_to_nonexistent_topic():
    spec = GroupSpec({"A": member([T1]), "B": member([T1, T2])})
    with pytest.raises(PartitionAssignorError):
        assign_range(spec, Topics({T1: 3}))


def test_first_assignment_two_members_two_topics_same_subscriptions():
    spec = GroupSpec({"A": member([T1, T3]), "B": member([T1, T3])})
    result = assign_range(spec, Topics({T1: 3, T3: 2}))
    assert result == assignment(A={T1: {0, 1}, T3: {0}}, B={T1: {2}, T3: {1}})


def test_first_assignment_three_members_three_topics_different_subscriptions():
    spec = GroupSpec({"A": member([T1, T2]), "B": member([T3]), "C": member([T2, T3])})
    result = assign_range(spec, Topics({T1: 3, T2: 3, T3: 2}))
    assert result == assignment(
        A={T1: {0, 1, 2}, T2: {0, 1}},
        B={T3: {0}},
        C={T2: {2}, T3: {1}},
    )


def test_first_assignment_more_members_than_partitions():
    spec = GroupSpec({m: member([T1, T3]) for m in "ABC"})
    result = assign_range(spec, Topics({T1: 3, T3: 2}))
    # T3 has two partitions for three members: C gets none of it.
    assert result == assignment(A={T1: {0}, T3: {0}}, B={T1: {1}, T3: {1}}, C={T1: {2}})


def test_static_membership():
    topics = Topics({T1: 3})
    members = {"A": member([T1], instance_id="instanceA"), "B": member([T1], instance_id="instanceB")}
    initial = assign_range(GroupSpec(members), topics)

    # A rejoins under a new member id with the same instance id.
    del members["A"]
    members["memberA1"] = member([T1], instance_id="instanceA")
    again = assign_range(GroupSpec(members), topics)

    assert again["memberA1"] == initial["A"]
    assert again["B"] == initial["B"]


def test_mixed_static_membership():
    topics = Topics({T1: 5})
    members = {
        "A": member([T1], instance_id="instanceA"),
        "C": member([T1], instance_id="instanceC"),
        "B": member([T1]),
    }
    initial = assign_range(GroupSpec(members), topics)
    # Static members first by instance id, then B.
    assert initial == assignment(A={T1: {0, 1}}, C={T1: {2, 3}}, B={T1: {4}})

    del members["A"]
    members["memberA1"] = member([T1], instance_id="instanceA")
    again = assign_range(GroupSpec(members), topics)

    assert again["memberA1"] == initial["A"]
    assert again["B"] == initial["B"]
    assert again["C"] == initial["C"]


def test_reassignment_more_members_than_partitions_when_one_member_added():
    spec = GroupSpec(
        {
            "A": member([T1, T2], {T1: {0}, T2: {0}}),
            "B": member([T1, T2], {T1: {1}, T2: {1}}),
            "C": member([T1, T2]),
        }
    )
    result = assign_range(spec, Topics({T1: 2, T2: 2}))
    assert result == assignment(A={T1: {0}, T2: {0}}, B={T1: {1}, T2: {1}}, C={})


def test_reassignment_when_one_partition_added():
    spec = GroupSpec(
        {
            "A": member([T1, T2], {T1: {0, 1}, T2: {0, 1}}),
            "B": member([T1, T2], {T1: {2}, T2: {2}}),
        }
    )
    result = assign_range(spec, Topics({T1: 4, T2: 4}))  # were 3 and 3
    assert result == assignment(A={T1: {0, 1}, T2: {0, 1}}, B={T1: {2, 3}, T2: {2, 3}})


def test_reassignment_when_one_member_added():
    spec = GroupSpec(
        {
            "A": member([T1, T2], {T1: {0, 1}, T2: {0, 1}}),
            "B": member([T1, T2], {T1: {2}, T2: {2}}),
            "C": member([T1, T2]),
        }
    )
    result = assign_range(spec, Topics({T1: 3, T2: 3}))
    assert result == assignment(A={T1: {0}, T2: {0}}, B={T1: {1}, T2: {1}}, C={T1: {2}, T2: {2}})


def test_reassignment_when_one_member_and_one_partition_added():
    spec = GroupSpec(
        {
            "A": member([T1, T2], {T1: {0, 1}, T2: {0, 1}}),
            "B": member([T1, T2], {T1: {2}, T2: {2}}),
            "C": member([T1]),
        }
    )
    result = assign_range(spec, Topics({T1: 4, T2: 3}))  # T1 had 3
    assert result == assignment(A={T1: {0, 1}, T2: {0, 1}}, B={T1: {2}, T2: {2}}, C={T1: {3}})


def test_reassignment_when_one_member_removed():
    spec = GroupSpec({"B": member([T1, T2], {T1: {2}, T2: {2}})})  # A left
    result = assign_range(spec, Topics({T1: 3, T2: 3}))
    assert result == assignment(B={T1: {0, 1, 2}, T2: {0, 1, 2}})


def test_reassignment_when_multiple_subscriptions_change():
    # Were A: T1, T2; B: T2; C: T2, T3. Now A: T1; B: T1, T2, T3; C: T2.
    spec = GroupSpec(
        {
            "A": member([T1], {T1: {0, 1, 2}, T2: {0}}),
            "B": member([T1, T2, T3], {T2: {1}}),
            "C": member([T2], {T2: {2}, T3: {0, 1}}),
        }
    )
    result = assign_range(spec, Topics({T1: 3, T2: 3, T3: 2}))
    assert result == assignment(
        A={T1: {0, 1}},
        B={T1: {2}, T2: {0, 1}, T3: {0, 1}},
        C={T2: {2}},
    )


# -- beyond Kafka's cases ------------------------------------------------------------------------


def test_member_order_static_first_by_instance_id():
    spec = GroupSpec(
        {
            "a": member([T1]),
            "b": member([T1], instance_id="z"),
            "c": member([T1], instance_id="y"),
            "d": member([T1], instance_id="y"),  # same instance id as c: member id breaks the tie
        }
    )
    assert sorted_member_ids(spec) == ["c", "d", "b", "a"]


# -- properties ----------------------------------------------------------------------------------

MEMBER_POOL = [f"m{i}" for i in range(8)]
INSTANCE_POOL = ["i0", "i1", "i2", "i3", "i4"]


@st.composite
def groups(draw):
    """A group of 1-6 members, each subscribing to some of up to 4 topics (homogeneous or not),
    some with instance ids, with an arbitrary current assignment (which range ignores)."""
    counts = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4))
    topic_ids = [uuid.UUID(int=i + 1) for i in range(len(counts))]
    member_ids = draw(st.lists(st.sampled_from(MEMBER_POOL), min_size=1, max_size=6, unique=True))
    homogeneous = draw(st.booleans())
    shared = draw(st.sets(st.sampled_from(topic_ids)))
    instance_ids = draw(st.lists(st.sampled_from(INSTANCE_POOL), unique=True, max_size=len(member_ids)))
    members = {}
    for i, member_id in enumerate(member_ids):
        subscribed = shared if homogeneous else draw(st.sets(st.sampled_from(topic_ids)))
        held_topics = draw(st.sets(st.sampled_from(topic_ids)))
        held = {t: draw(st.sets(st.integers(0, 9), max_size=3)) for t in held_topics}
        instance_id = instance_ids[i] if i < len(instance_ids) and draw(st.booleans()) else None
        members[member_id] = member(subscribed, held, instance_id)
    return GroupSpec(members), Topics(dict(zip(topic_ids, counts, strict=True)))


@settings(max_examples=200, deadline=None)
@given(groups())
def test_property_every_partition_to_exactly_one_subscriber(group):
    spec, topics = group
    result = assign_range(spec, topics)
    assert set(result) == set(spec.members)
    owners = {}
    for member_id, tps in result.items():
        for t, ps in tps.items():
            assert t in spec.members[member_id].subscribed_topic_ids
            assert ps
            for p in ps:
                assert (t, p) not in owners
                owners[(t, p)] = member_id
    subscribed = set().union(*(m.subscribed_topic_ids for m in spec.members.values()))
    assert set(owners) == {(t, p) for t in subscribed for p in range(topics.num_partitions(t))}


@settings(max_examples=200, deadline=None)
@given(groups())
def test_property_per_topic_balance_and_contiguous_ranges_in_member_order(group):
    spec, topics = group
    result = assign_range(spec, topics)
    order = sorted_member_ids(spec)
    for t in set().union(*(m.subscribed_topic_ids for m in spec.members.values())):
        subscribers = [m for m in order if t in spec.members[m].subscribed_topic_ids]
        counts = [len(result[m].get(t, ())) for m in subscribers]
        assert max(counts) - min(counts) <= 1
        # Concatenated in member order, the ranges are 0..n-1: contiguous, ascending, larger first.
        laid_out = [p for m in subscribers for p in sorted(result[m].get(t, ()))]
        assert laid_out == list(range(topics.num_partitions(t)))
        assert counts == sorted(counts, reverse=True)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(0, 9))
def test_property_co_partitioned_when_possible(num_members, num_topics, num_partitions):
    # Same subscriptions and the same partition count everywhere: member i gets the same partition
    # numbers of every topic.
    topic_ids = [uuid.UUID(int=i + 1) for i in range(num_topics)]
    spec = GroupSpec({f"m{i}": member(topic_ids) for i in range(num_members)})
    result = assign_range(spec, Topics({t: num_partitions for t in topic_ids}))
    for tps in result.values():
        assert set(tps) in (set(), set(topic_ids))
        assert len(set(tps.values())) <= 1


@settings(max_examples=200, deadline=None)
@given(groups(), st.data())
def test_property_static_member_rejoining_keeps_its_ranges(group, data):
    spec, topics = group
    static = sorted(m for m, s in spec.members.items() if s.instance_id is not None)
    if not static:
        return
    rejoining = data.draw(st.sampled_from(static))
    new_id = data.draw(st.sampled_from(["0", "new", "zzz"]))
    before = assign_range(spec, topics)
    members = dict(spec.members)
    members[new_id] = members.pop(rejoining)
    after = assign_range(GroupSpec(members), topics)
    assert after[new_id] == before[rejoining]
    for member_id in spec.members:
        if member_id != rejoining:
            assert after[member_id] == before[member_id]


@settings(max_examples=200, deadline=None)
@given(groups())
def test_property_deterministic_and_blind_to_current_assignment(group):
    spec, topics = group
    result = assign_range(spec, topics)
    assert assign_range(spec, topics) == result
    assert assign_range(GroupSpec(dict(reversed(list(spec.members.items())))), topics) == result
    # This version of the assignor never looks at the current assignment.
    cleared = GroupSpec(
        {m: MemberSpec(s.subscribed_topic_ids, {}, s.rack_id, s.instance_id) for m, s in spec.members.items()}
    )
    assert assign_range(cleared, topics) == result
