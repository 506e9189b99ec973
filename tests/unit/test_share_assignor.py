"""SimpleAssignor for share groups (coordinator/share/assignor.py).

Three kinds of test: the worked examples of seed 001 §5-2-1-2 and SPEC §3; ports of Kafka's
group-coordinator/src/test/.../assignor/SimpleAssignorTest.java (Kafka 4.x, the version whose
fixtures use MetadataImageBuilder; Kafka has no separate test class for the two builders, the
builders are exercised through SimpleAssignorTest); and hypothesis properties.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.share.assignor import (
    Assignment,
    desired_assignment_counts,
    desired_sharing,
    simple_assign,
)

T1, T2, T3, T4 = (uuid.UUID(int=i) for i in range(1, 5))


def pairs(assignment: Assignment) -> set[tuple[str, uuid.UUID, int]]:
    return {(m, t, p) for m, topics in assignment.items() for t, ps in topics.items() for p in ps}


def assigned_partitions(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for _, t, p in pairs(assignment)}


def count(assignment: Assignment, member_id: str, topic_id: uuid.UUID | None = None) -> int:
    topics = assignment[member_id]
    if topic_id is not None:
        return len(topics.get(topic_id, ()))
    return sum(len(ps) for ps in topics.values())


def sharers(assignment: Assignment) -> dict[tuple[uuid.UUID, int], int]:
    result: dict[tuple[uuid.UUID, int], int] = {}
    for _, t, p in pairs(assignment):
        result[(t, p)] = result.get((t, p), 0) + 1
    return result


def one_topic(members: int, partitions: int) -> tuple[dict, dict]:
    member_ids = [f"m{i}" for i in range(members)]
    return {m: frozenset({T1}) for m in member_ids}, {T1: frozenset(range(partitions))}


# --- seed 001 §5-2-1-2 and SPEC §3 -------------------------------------------------------------


def test_seed_3_members_7_partitions_no_sharing():
    subs, parts = one_topic(3, 7)
    out = simple_assign(subs, parts, {})
    assert desired_sharing(3, 7) == 1
    # p = 7/3: ceil(7/3)=3, ceil(14/3)-3=2, 7-5=2; the first member in member order gets the extra.
    assert desired_assignment_counts(3, 7) == [3, 2, 2]
    assert [count(out, m) for m in ("m0", "m1", "m2")] == [3, 2, 2]
    assert set(sharers(out).values()) == {1}
    assert assigned_partitions(out) == {(T1, p) for p in range(7)}
    # From scratch the partitions go round-robin over the members in member order.
    assert out == {
        "m0": {T1: frozenset({0, 3, 6})},
        "m1": {T1: frozenset({1, 4})},
        "m2": {T1: frozenset({2, 5})},
    }


def test_seed_6_members_4_partitions_sharing_2():
    subs, parts = one_topic(6, 4)
    out = simple_assign(subs, parts, {})
    assert desired_sharing(6, 4) == 2
    # p = 2·4/6 = 4/3: ceil(4/3)=2, 3-2=1, 4-3=1, 6-4=2, 7-6=1, 8-7=1 (the seed's 2,1,1,2,1,1).
    assert desired_assignment_counts(6, 4) == [2, 1, 1, 2, 1, 1]
    assert [count(out, f"m{i}") for i in range(6)] == [2, 1, 1, 2, 1, 1]
    assert sharers(out) == {(T1, p): 2 for p in range(4)}


def test_seed_7_members_3_partitions_sharing_3():
    subs, parts = one_topic(7, 3)
    out = simple_assign(subs, parts, {})
    assert desired_sharing(7, 3) == 3
    # p = 3·3/7 = 9/7: two members get 2, five get 1 (9 slots = 3 partitions × 3 members).
    assert desired_assignment_counts(7, 3) == [2, 1, 1, 2, 1, 1, 1]
    counts = [count(out, f"m{i}") for i in range(7)]
    assert counts == [2, 1, 1, 2, 1, 1, 1]
    assert sorted(counts).count(2) == 2 and sorted(counts).count(1) == 5
    assert sharers(out) == {(T1, p): 3 for p in range(3)}


def test_desired_counts_are_exact_where_kafkas_doubles_are_not():
    # Kafka's double arithmetic gives [5, 4, 4, 4, 4, 4, 5] here: 30 slots for 29 partitions.
    assert desired_assignment_counts(7, 29) == [5, 4, 4, 4, 4, 4, 4]
    for members in range(1, 60):
        for partitions in range(1, 60):
            counts = desired_assignment_counts(members, partitions)
            assert sum(counts) == desired_sharing(members, partitions) * partitions
            assert max(counts) - min(counts) <= 1


# --- ports of Kafka's SimpleAssignorTest ---------------------------------------------------------


def test_assign_with_empty_members():  # testAssignWithEmptyMembers
    assert simple_assign({}, {}, {}) == {}
    assert simple_assign({}, {T1: frozenset({0, 1})}, {"gone": {T1: frozenset({0})}}) == {}


def test_assign_with_no_subscribed_topic():  # testAssignWithNoSubscribedTopic
    # Kafka answers an empty GroupAssignment (no members at all); we list every member, empty.
    out = simple_assign({"A": frozenset()}, {T1: frozenset(range(3))}, {})
    assert out == {"A": {}}


def test_assign_with_subscribed_to_topic_without_partitions():  # testAssignWithSubscribedToNonExistentTopic
    # Kafka throws PartitionAssignorException for a topic missing from the metadata. Our callers pass
    # only existing topics, and a topic missing from `partitions` has no assignable partitions yet.
    out = simple_assign({"A": frozenset({T2})}, {T1: frozenset(range(3))}, {})
    assert out == {"A": {}}


def test_two_members_two_topics_homogeneous():  # testAssignWithTwoMembersAndTwoTopicsHomogeneous
    subs = {"A": frozenset({T1, T3}), "B": frozenset({T1, T3})}
    out = simple_assign(subs, {T1: frozenset(range(3)), T3: frozenset(range(2))}, {})
    assert len(assigned_partitions(out)) == 5
    assert sorted(count(out, m) for m in subs) == [2, 3]  # one pool of 5 across both topics


def test_two_members_two_topics_homogeneous_with_allowed_map():  # ...HomogeneousWithAllowedMap
    subs = {"A": frozenset({T1, T3}), "B": frozenset({T1, T3})}
    # T3 has 3 partitions but only 0 and 1 are assignable (share state initialized).
    out = simple_assign(subs, {T1: frozenset({0, 1, 2}), T3: frozenset({0, 1})}, {})
    assert assigned_partitions(out) == {(T1, 0), (T1, 1), (T1, 2), (T3, 0), (T3, 1)}


def test_two_members_two_topics_homogeneous_with_non_assignable_topic():  # ...WithNonAssignableTopic
    subs = {"A": frozenset({T1, T3}), "B": frozenset({T1, T3})}
    out = simple_assign(subs, {T1: frozenset({0, 1, 2})}, {})
    assert assigned_partitions(out) == {(T1, 0), (T1, 1), (T1, 2)}


HETERO_SUBS = {"A": frozenset({T1, T2}), "B": frozenset({T3}), "C": frozenset({T2, T3})}


def test_three_members_three_topics_heterogeneous():  # testAssignWithThreeMembersThreeTopicsHeterogeneous
    parts = {T1: frozenset(range(3)), T2: frozenset(range(3)), T3: frozenset(range(2))}
    out = simple_assign(HETERO_SUBS, parts, {})
    assert len(assigned_partitions(out)) == 8
    # Balanced per topic among its subscribers: T1 all to A; T2 2/1 between A and C; T3 1/1.
    assert count(out, "A", T1) == 3
    assert (count(out, "A", T2), count(out, "C", T2)) == (2, 1)
    assert (count(out, "B", T3), count(out, "C", T3)) == (1, 1)


def test_three_members_three_topics_heterogeneous_with_allowed_map():  # ...HeterogeneousWithAllowedMap
    parts = {T1: frozenset({0, 1}), T2: frozenset({0, 2}), T3: frozenset({1})}
    out = simple_assign(HETERO_SUBS, parts, {})
    assert assigned_partitions(out) == {(T1, 0), (T1, 1), (T2, 0), (T2, 2), (T3, 1)}


def test_three_members_three_topics_heterogeneous_with_non_assignable_topic():  # ...WithNonAssignableTopic
    parts = {T1: frozenset(range(3)), T2: frozenset(range(3))}
    out = simple_assign(HETERO_SUBS, parts, {})
    # Kafka's expected assignment, exactly (A before C in member order, as in Kafka's run).
    assert out == {
        "A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 2})},
        "B": {},
        "C": {T2: frozenset({1})},
    }


def test_one_member_no_assigned_topic_heterogeneous():  # testAssignWithOneMemberNoAssignedTopicHeterogeneous
    subs = {"A": frozenset({T1, T2}), "B": frozenset()}
    out = simple_assign(subs, {T1: frozenset(range(3)), T2: frozenset(range(2))}, {})
    assert out == {"A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1})}, "B": {}}


def test_assign_with_current_assignment_heterogeneous():  # testAssignWithCurrentAssignmentHeterogeneous
    parts1 = {T1: frozenset(range(3)), T2: frozenset(range(3)), T3: frozenset(range(2))}
    first = simple_assign(HETERO_SUBS, parts1, {})
    assert len(assigned_partitions(first)) == 8
    # New setup: A - {T1, T2, T3}, B - {T3, T4}; C left; T4 created with one partition.
    parts2 = {**parts1, T4: frozenset({0})}
    subs2 = {"A": frozenset({T1, T2, T3}), "B": frozenset({T3, T4})}
    previous = {
        "A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 2})},
        "B": {T3: frozenset({0, 1})},
    }
    second = simple_assign(subs2, parts2, previous)
    assert len(assigned_partitions(second)) == 9
    assert second["A"][T1] == frozenset({0, 1, 2})  # nothing forced T1 to move
    assert count(second, "A", T3) == count(second, "B", T3) == 1


SUBSCRIPTION_PATTERNS = [frozenset({T1, T2, T3}), frozenset({T2}), frozenset({T3}), frozenset({T1, T2})]
KAFKA_24 = {T1: frozenset(range(12)), T2: frozenset(range(8)), T3: frozenset(range(4))}


def _member_subscription(i: int, homogeneous: bool) -> frozenset[uuid.UUID]:
    return frozenset({T1}) if homogeneous else SUBSCRIPTION_PATTERNS[i % 4]


@pytest.mark.parametrize("homogeneous", [True, False], ids=["homogeneous", "heterogeneous"])
def test_incremental_assignment_increasing_members(homogeneous):
    # testIncrementalAssignmentIncreasingMembers{Homogeneous,Heterogeneous}: 24 partitions, members
    # join one at a time up to 101, each round starting from the previous round's output.
    parts = {T1: frozenset(range(24))} if homogeneous else KAFKA_24
    subs: dict[str, frozenset] = {}
    current: Assignment = {}
    for i in range(101):
        subs[f"M{i}"] = _member_subscription(i, homogeneous)
        current = simple_assign(subs, parts, current)
        assert len(assigned_partitions(current)) == 24
        check_invariants(subs, parts, current)


@pytest.mark.parametrize("homogeneous", [True, False], ids=["homogeneous", "heterogeneous"])
def test_incremental_assignment_decreasing_members(homogeneous):
    # testIncrementalAssignmentDecreasingMembers{Homogeneous,Heterogeneous}: 101 members leave one at
    # a time down to 1.
    parts = {T1: frozenset(range(24))} if homogeneous else KAFKA_24
    subs = {f"M{i}": _member_subscription(i, homogeneous) for i in range(101)}
    current = simple_assign(subs, parts, {})
    assert len(assigned_partitions(current)) == 24
    for i in range(100, 0, -1):
        del subs[f"M{i}"]
        current = simple_assign(subs, parts, current)
        assert len(assigned_partitions(current)) == 24
        check_invariants(subs, parts, current)


# --- our own edge cases ----------------------------------------------------------------------------


def test_previous_is_cleaned_of_what_may_not_be_assigned():
    subs = {"A": frozenset({T1}), "B": frozenset({T1})}
    previous = {
        "A": {T1: frozenset({0, 7}), T2: frozenset({0})},  # 7 not assignable, T2 not subscribed
        "B": {T1: frozenset({1})},
        "gone": {T1: frozenset({2})},  # members absent from subscriptions are ignored
    }
    out = simple_assign(subs, {T1: frozenset({0, 1, 2, 3})}, previous)
    assert out["A"][T1] >= {0} and out["B"][T1] >= {1}  # sticky where allowed
    assert assigned_partitions(out) == {(T1, p) for p in range(4)}
    assert T2 not in out["A"]


def test_topic_nobody_subscribes_to_any_more_is_revoked():
    # Kafka's heterogeneous builder only visits subscribed topics and would keep A's T3 partitions.
    subs = {"A": frozenset({T1}), "B": frozenset({T2})}
    previous = {"A": {T1: frozenset({0}), T3: frozenset({0, 1})}}
    out = simple_assign(subs, {T1: frozenset({0}), T2: frozenset({0}), T3: frozenset({0, 1})}, previous)
    assert out == {"A": {T1: frozenset({0})}, "B": {T2: frozenset({0})}}


def test_no_assignable_partitions_revokes_everything():
    subs, _ = one_topic(3, 0)
    out = simple_assign(subs, {T1: frozenset()}, {"m0": {T1: frozenset({0, 1})}})
    assert out == {"m0": {}, "m1": {}, "m2": {}}


def test_short_partition_is_not_left_behind():
    # 7 members on 3 partitions (D = 3, counts 2,1,1,2,1,1,1): m0 and m3 are due 2 and both hold
    # only partition 0, which is short. Kafka's assignRemainingPartitions, having found no taker for
    # partition 0, also skips partition 1; we give partition 1 its third member.
    subs, parts = one_topic(7, 3)
    previous = {
        "m0": {T1: {0}}, "m3": {T1: {0}},
        "m1": {T1: {1}}, "m2": {T1: {1}},
        "m4": {T1: {2}}, "m5": {T1: {2}}, "m6": {T1: {2}},
    }
    out = simple_assign(subs, parts, previous)
    assert sharers(out) == {(T1, 0): 2, (T1, 1): 3, (T1, 2): 3}
    assert out["m0"] == {T1: frozenset({0, 1})}
    assert pairs(out) >= pairs({m: {t: frozenset(ps) for t, ps in a.items()} for m, a in previous.items()})


def test_rebalance_from_shared_to_exclusive_moves_only_what_it_must():
    # 4 members on 2 partitions share them 2-2; with 4 partitions nobody needs to share: every member
    # keeps one of its partitions and each partition loses one member.
    subs, parts2 = one_topic(4, 2)
    shared = simple_assign(subs, parts2, {})
    assert set(sharers(shared).values()) == {2}
    exclusive = simple_assign(subs, {T1: frozenset(range(4))}, shared)
    assert set(sharers(exclusive).values()) == {1}
    assert all(count(exclusive, m) == 1 for m in subs)
    kept = pairs(shared) & pairs(exclusive)
    assert len(kept) == 2  # one holder keeps each old partition; the other two take the new ones


# --- hypothesis ------------------------------------------------------------------------------------

TOPICS = [T1, T2, T3]
member_ids = st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=3), unique=True, max_size=12)
topic_sets = st.frozensets(st.sampled_from(TOPICS))


@st.composite
def group_inputs(draw, homogeneous: bool | None = None):
    members = draw(member_ids)
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    if homogeneous:
        subscription = draw(topic_sets)
        subscriptions = {m: subscription for m in members}
    else:
        subscriptions = {m: draw(topic_sets) for m in members}
    # Partitions that may be assigned: any subset (uninitialized ones missing); a topic may be absent.
    partitions = {
        t: draw(st.frozensets(st.integers(0, 7), max_size=8)) for t in TOPICS if draw(st.integers(0, 5)) > 0
    }
    # Whatever the previous target held: stale members, unsubscribed topics, unassignable partitions.
    previous_members = members + draw(st.lists(st.sampled_from(["old1", "old2"]), unique=True))
    previous = {
        m: {t: draw(st.frozensets(st.integers(0, 9), max_size=6)) for t in draw(topic_sets)}
        for m in previous_members
        if draw(st.booleans())
    }
    return subscriptions, partitions, previous


def check_invariants(subscriptions, partitions, out):
    assert set(out) == set(subscriptions)
    for m, topics in out.items():
        for t, ps in topics.items():
            assert t in subscriptions[m], "a member only gets partitions of topics it subscribes to"
            assert ps and ps <= partitions.get(t, frozenset()), "only assignable partitions"
    sharing = sharers(out)
    for t in set().union(*subscriptions.values()):
        for p in partitions.get(t, ()):
            assert sharing.get((t, p), 0) >= 1, "every assignable partition is assigned"
    homogeneous = len(set(subscriptions.values())) <= 1
    if homogeneous and subscriptions:
        topics = next(iter(subscriptions.values()))
        total = sum(len(partitions.get(t, ())) for t in topics)
        limit = desired_sharing(len(subscriptions), total)
        assert all(n <= limit for n in sharing.values()), "no partition shared by more than D"
        counts = [count(out, m) for m in subscriptions]
        assert max(counts) - min(counts) <= 1, "member partition counts differ by at most one"
    else:
        # Heterogeneous: the same guarantees per topic, among the members subscribing to it.
        for t in set().union(*subscriptions.values()):
            subscribers = [m for m in subscriptions if t in subscriptions[m]]
            limit = desired_sharing(len(subscribers), len(partitions.get(t, ())))
            assert all(n <= limit for (tt, _), n in sharing.items() if tt == t)
            counts = [count(out, m, t) for m in subscribers]
            assert max(counts) - min(counts) <= 1


@settings(max_examples=400, deadline=None)
@given(group_inputs(homogeneous=True))
def test_properties_homogeneous(inputs):
    subscriptions, partitions, previous = inputs
    check_invariants(subscriptions, partitions, simple_assign(subscriptions, partitions, previous))


@settings(max_examples=400, deadline=None)
@given(group_inputs(homogeneous=False))
def test_properties_heterogeneous(inputs):
    subscriptions, partitions, previous = inputs
    check_invariants(subscriptions, partitions, simple_assign(subscriptions, partitions, previous))


@settings(max_examples=400, deadline=None)
@given(group_inputs())
def test_own_output_is_a_fixed_point(inputs):
    subscriptions, partitions, previous = inputs
    out = simple_assign(subscriptions, partitions, previous)
    assert simple_assign(subscriptions, partitions, out) == out


def _kept(before: Assignment, after: Assignment) -> int:
    return len(pairs(before) & pairs(after))


@settings(max_examples=400, deadline=None)
@given(group_inputs(homogeneous=True), st.text(alphabet="abcdefgh", min_size=1, max_size=3))
def test_adding_a_member_moves_only_what_balance_requires_homogeneous(inputs, newcomer):
    subscriptions, partitions, previous = inputs
    if newcomer in subscriptions:
        return
    before = simple_assign(subscriptions, partitions, previous)
    topics = next(iter(subscriptions.values()), frozenset({T1}))
    grown = {**subscriptions, newcomer: topics}
    sticky = simple_assign(grown, partitions, before)
    scratch = simple_assign(grown, partitions, {})
    assert _kept(before, sticky) >= _kept(before, scratch)
    # With one more member nothing is over-shared (D only grows), so the only forced revocations are
    # those taking each member down to its new count: no member both loses and gains.
    total = sum(len(partitions.get(t, ())) for t in topics)
    desired = dict(zip(sorted(grown), desired_assignment_counts(len(grown), total)))
    assert _kept(before, sticky) == sum(min(count(before, m), desired[m]) for m in subscriptions)
    for m in subscriptions:
        old, new = pairs({m: before[m]}), pairs({m: sticky[m]})
        assert old <= new or new <= old


@settings(max_examples=400, deadline=None)
@given(group_inputs(homogeneous=False), st.text(alphabet="abcdefgh", min_size=1, max_size=3), st.data())
def test_adding_a_member_moves_only_what_balance_requires_heterogeneous(inputs, newcomer, data):
    subscriptions, partitions, previous = inputs
    if newcomer in subscriptions or len(set(subscriptions.values())) < 2:
        return
    before = simple_assign(subscriptions, partitions, previous)
    # The newcomer copies an existing member's subscription, so the group stays heterogeneous and
    # each topic is balanced the same way as before, among one more member or the same ones.
    twin = data.draw(st.sampled_from(sorted(subscriptions)))
    grown = {**subscriptions, newcomer: subscriptions[twin]}
    sticky = simple_assign(grown, partitions, before)
    scratch = simple_assign(grown, partitions, {})
    assert _kept(before, sticky) >= _kept(before, scratch)
    for m in subscriptions:
        for t in subscriptions[m]:
            old, new = set(before[m].get(t, ())), set(sticky[m].get(t, ()))
            assert old <= new or new <= old


# --- size (correctness at scale; speed is measured by `python -m loadtest.bench share-assign`) ---


@pytest.mark.parametrize("members,partitions", [(1000, 1000), (1000, 10), (10, 1000), (1000, 999)])
def test_thousand_members_thousand_partitions(members, partitions):
    subs, parts = one_topic(members, partitions)
    out = simple_assign(subs, parts, {})
    assert simple_assign(subs, parts, out) == out
    del subs[f"m{members // 2}"]
    subs["new"] = frozenset({T1})
    moved = simple_assign(subs, parts, out)
    assert len(assigned_partitions(moved)) == partitions


def test_thousand_members_heterogeneous():
    subs = {f"m{i:04}": SUBSCRIPTION_PATTERNS[i % 4] for i in range(1000)}
    parts = {T1: frozenset(range(500)), T2: frozenset(range(300)), T3: frozenset(range(200))}
    out = simple_assign(subs, parts, {})
    assert simple_assign(subs, parts, out) == out
