"""KIP-848's reconciliation (coordinator/consumer/reconciliation.py) as in Kafka 4.2: every case of
Kafka's CurrentAssignmentBuilderTest as of late 2025 (with KAFKA-19431's subscription cases and
KAFKA-19449's), KAFKA-19974's expectations applied to it, then cases of our own for each of the
three changes, the member's lifecycle, and properties of a small group driven through random target
assignments and subscription changes by clients that acknowledge revocations late: no partition is
ever held by two members, nor by two members at the same epoch over a whole run, epochs never go
back, a member never keeps a topic it left, and once the target stops changing and the clients
report what they own, every member ends STABLE at the target epoch with exactly its target (less
the topics it does not subscribe to).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer.member import ConsumerGroupMember, validate_member_transition
from coordinator.member_state import MemberState
from coordinator.consumer.reconciliation import FencedMemberEpochError, reconcile, subscribed_topic_ids_resolver
from kernel.lifecycle import IllegalTransition

# Kafka draws random topic ids; fixed ones keep the runs identical.
TOPIC_ID_1 = uuid.UUID(int=1)
TOPIC_ID_2 = uuid.UUID(int=2)
TOPIC_1, TOPIC_2 = "topic1", "topic2"
FOO_ID, BAR_ID = uuid.UUID(int=3), uuid.UUID(int=4)


def mk_topic_assignment(topic_id, *partitions):
    """Kafka's AssignmentTestUtil.mkTopicAssignment."""
    return topic_id, frozenset(partitions)


def mk_assignment(*topic_assignments):
    """Kafka's AssignmentTestUtil.mkAssignment."""
    return dict(topic_assignments)


def owned(*topic_partitions):
    """A heartbeat's owned partitions: Kafka's list of ConsumerGroupHeartbeatRequestData.TopicPartitions."""
    return [(topic_id, list(partitions)) for topic_id, partitions in topic_partitions]


def epoch(value):
    """withCurrentPartitionEpoch((topicId, partitionId) -> value)."""
    return lambda topic_id, partition: value


def image(topics, resolved_regexes=None):
    """withMetadataImage(new MetadataImageBuilder().addTopic(id, name, 10)...) and
    withResolvedRegularExpressions: topic id -> name, regex -> topic names."""
    return subscribed_topic_ids_resolver(dict(topics).get, resolved_regexes or {})


IMAGE = image({TOPIC_ID_1: TOPIC_1, TOPIC_ID_2: TOPIC_2})


def member(state, member_epoch, previous_member_epoch, assigned, pending=None,
           topics=(TOPIC_1, TOPIC_2), regex=""):
    return ConsumerGroupMember(
        "member",
        state=state,
        member_epoch=member_epoch,
        previous_member_epoch=previous_member_epoch,
        subscribed_topic_names=frozenset(topics),
        subscribed_topic_regex=regex,
        assigned_partitions=assigned,
        partitions_pending_revocation=pending or {},
    )


def build(m, target_epoch, target, partition_epoch, owned_partitions=None, *, changed=False, ids=IMAGE):
    """new CurrentAssignmentBuilder(m).withMetadataImage(..).withTargetAssignment(..)
    .withHasSubscriptionChanged(..).withCurrentPartitionEpoch(..).withOwnedTopicPartitions(..).build()"""
    return reconcile(m, target_epoch, target, partition_epoch, owned_partitions,
                     has_subscription_changed=changed, subscribed_topic_ids=ids)


def both(a1, a2):
    """Topic 1's and topic 2's partitions (a topic without any left out, as in a member)."""
    return {t: ps for t, ps in mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, *a1), mk_topic_assignment(TOPIC_ID_2, *a2)).items() if ps}


# -- Kafka's CurrentAssignmentBuilderTest -------------------------------------------------------------


def test_stable_to_stable():
    m = member(MemberState.STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    updated = build(m, 11, both((1, 2, 3), (4, 5, 6)), epoch(10))
    assert updated == member(MemberState.STABLE, 11, 10, both((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_partitions():
    m = member(MemberState.STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    updated = build(m, 11, both((1, 2, 3, 4), (4, 5, 6, 7)), epoch(-1))
    assert updated == member(MemberState.STABLE, 11, 10, both((1, 2, 3, 4), (4, 5, 6, 7)))


def test_stable_to_unrevoked_partitions():
    m = member(MemberState.STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    updated = build(m, 11, both((2, 3, 4), (5, 6, 7)), epoch(-1))
    assert updated == member(MemberState.UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)))


def test_stable_to_unreleased_partitions():
    m = member(MemberState.STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    updated = build(m, 11, both((1, 2, 3, 4), (4, 5, 6, 7)), epoch(10))
    assert updated == member(MemberState.UNRELEASED_PARTITIONS, 11, 10, both((1, 2, 3), (4, 5, 6)))


def test_stable_to_unreleased_partitions_with_owned_partitions_not_having_revoked_partitions():
    m = member(MemberState.STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    updated = build(
        m, 11, both((1, 2, 3), (4, 5, 7)), lambda topic_id, _: 10 if topic_id == TOPIC_ID_2 else -1, owned()
    )
    assert updated == member(MemberState.UNRELEASED_PARTITIONS, 11, 10, both((1, 2, 3), (4, 5)))


def test_unrevoked_partitions_to_stable():
    m = member(MemberState.UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)))
    updated = build(m, 11, both((2, 3), (5, 6)), epoch(-1), owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [5, 6])))
    assert updated == member(MemberState.STABLE, 11, 10, both((2, 3), (5, 6)))


def test_remains_in_unrevoked_partitions():
    m = member(MemberState.UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)))
    target = both((3,), (6,))

    assert build(m, 12, target, epoch(-1), None) == m
    assert build(m, 12, target, epoch(-1), owned((TOPIC_ID_1, [1, 2, 3]), (TOPIC_ID_2, [5, 6]))) == m
    assert build(m, 12, target, epoch(-1), owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [4, 5, 6]))) == m


# Kafka's case before KAFKA-19974 was (10, 12) -> 11 and (10, 10) -> 10 (the min(epoch + 1, target)
# of KAFKA-19431); from 4.2 on the member stays at its epoch in both (Kafka's test then keeps only
# the first, expecting 10).
@pytest.mark.parametrize("member_epoch, target_epoch, expected_epoch", [(10, 12, 10), (10, 10, 10)])
def test_unrevoked_partitions_to_unrevoked_partitions(member_epoch, target_epoch, expected_epoch):
    m = member(MemberState.UNREVOKED_PARTITIONS, member_epoch, member_epoch, both((2, 3), (5, 6)), both((1,), (4,)))
    updated = build(
        m, target_epoch, both((3,), (6,)), epoch(-1), owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [5, 6]))
    )
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, expected_epoch, member_epoch, both((3,), (6,)), both((2,), (5,))
    )


def test_unrevoked_partitions_to_unreleased_partitions():
    m = member(MemberState.UNREVOKED_PARTITIONS, 11, 10, both((2, 3), (5, 6)))
    updated = build(
        m, 11, both((2, 3, 4), (5, 6, 7)), epoch(10), owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [5, 6]))
    )
    assert updated == member(MemberState.UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))


def test_unrevoked_partitions_to_stable_with_returned_partitions_pending_revocation():
    # KAFKA-19449: partition 4 of topic 1 is pending revocation by the member itself and back in the
    # latest target; its owner being the member, it is not unreleased.
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 4)),
    )
    owners = {(TOPIC_ID_1, 2): 10, (TOPIC_ID_1, 3): 10, (TOPIC_ID_1, 4): 10, (TOPIC_ID_2, 5): 10, (TOPIC_ID_2, 6): 10}
    updated = build(
        m, 12, both((2, 3, 4), (5, 6, 7)), lambda t, p: owners.get((t, p), -1),
        owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [5, 6])),
    )
    assert updated == member(MemberState.STABLE, 12, 10, both((2, 3, 4), (5, 6, 7)))


def test_unreleased_partitions_to_stable():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    updated = build(m, 12, both((2, 3), (5, 6)), epoch(10))
    assert updated == member(MemberState.STABLE, 12, 11, both((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable_with_new_partitions():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    updated = build(m, 11, both((2, 3, 4), (5, 6, 7)), epoch(-1))
    assert updated == member(MemberState.STABLE, 11, 11, both((2, 3, 4), (5, 6, 7)))


def test_unreleased_partitions_to_unreleased_partitions():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    assert build(m, 11, both((2, 3, 4), (5, 6, 7)), epoch(10)) == m


def test_unreleased_partitions_to_unrevoked_partitions():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    updated = build(m, 12, both((3,), (6,)), epoch(10))
    assert updated == member(MemberState.UNREVOKED_PARTITIONS, 11, 11, both((3,), (6,)), both((2,), (5,)))


def test_unknown_state():
    m = member(MemberState.UNKNOWN, 11, 11, both((3,), (6,)), both((2,), (5,)))
    target = both((3,), (6,))

    # In an unknown state the member is first fenced, to force a reset of its client-side state.
    with pytest.raises(FencedMemberEpochError):
        build(m, 12, target, epoch(10))

    # Then it rejoins owning no partitions.
    updated = build(m, 12, target, epoch(11), owned())
    assert updated == member(MemberState.STABLE, 12, 11, both((3,), (6,)))


@pytest.mark.parametrize("member_epoch, target_epoch, expected_epoch, changed", [
    (10, 11, 11, False),  # a new target always takes the subscription into account
    (10, 11, 11, True),
    (10, 10, 10, True),   # no new target: only the subscription change removes topic 1
])
def test_stable_to_stable_with_assignment_topics_no_longer_in_subscription(
    member_epoch, target_epoch, expected_epoch, changed
):
    m = member(MemberState.STABLE, member_epoch, member_epoch, both((1, 2, 3), (4, 5, 6)), topics=[TOPIC_2])
    updated = build(
        m, target_epoch, both((1, 2, 3), (4, 5, 6)), epoch(-1), owned((TOPIC_ID_2, [4, 5, 6])), changed=changed
    )
    assert updated == member(
        MemberState.STABLE, expected_epoch, member_epoch,
        mk_assignment(mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)), topics=[TOPIC_2],
    )


@pytest.mark.parametrize("member_epoch, target_epoch, expected_epoch, changed", [
    (10, 11, 10, False),
    (10, 11, 10, True),
    (10, 10, 10, True),
])
def test_stable_to_unrevoked_partitions_with_assignment_topics_no_longer_in_subscription(
    member_epoch, target_epoch, expected_epoch, changed
):
    m = member(MemberState.STABLE, member_epoch, member_epoch, both((1, 2, 3), (4, 5, 6)), topics=[TOPIC_2])
    updated = build(
        m, target_epoch, both((1, 2, 3), (4, 5, 6)), epoch(-1),
        owned((TOPIC_ID_1, [1, 2, 3]), (TOPIC_ID_2, [4, 5, 6])), changed=changed,
    )
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, expected_epoch, member_epoch,
        mk_assignment(mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2, 3)), topics=[TOPIC_2],
    )


def test_remains_in_unrevoked_partitions_with_assignment_topics_no_longer_in_subscription():
    m = member(MemberState.UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)), topics=[TOPIC_2])
    updated = build(
        m, 12, both((1, 3, 4), (6, 7)), epoch(-1),
        owned((TOPIC_ID_1, [1, 2, 3]), (TOPIC_ID_2, [4, 5, 6])), changed=True,
    )
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_2, 5, 6)), both((1, 2, 3), (4,)), topics=[TOPIC_2],
    )


FOO_BAR = {FOO_ID: "foo", BAR_ID: "bar"}


def foo_bar(foo, bar):
    return mk_assignment(mk_topic_assignment(FOO_ID, *foo), mk_topic_assignment(BAR_ID, *bar))


def test_subscribed_topic_name_and_unresolved_regular_expression():
    m = member(MemberState.STABLE, 10, 10, foo_bar((1, 2, 3), (4, 5, 6)), topics=["foo"], regex="bar*")
    updated = build(
        m, 10, foo_bar((1, 2, 3), (4, 5, 6)), epoch(-1), owned((FOO_ID, [1, 2, 3]), (BAR_ID, [4, 5, 6])),
        changed=True, ids=image(FOO_BAR, {}),
    )
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10, mk_assignment(mk_topic_assignment(FOO_ID, 1, 2, 3)),
        mk_assignment(mk_topic_assignment(BAR_ID, 4, 5, 6)), topics=["foo"], regex="bar*",
    )


def test_unresolved_regular_expression():
    m = member(MemberState.STABLE, 10, 10, foo_bar((1, 2, 3), (4, 5, 6)), topics=[], regex="bar*")
    updated = build(
        m, 10, foo_bar((1, 2, 3), (4, 5, 6)), epoch(-1), owned((FOO_ID, [1, 2, 3]), (BAR_ID, [4, 5, 6])),
        changed=True, ids=image(FOO_BAR, {}),
    )
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10, {}, foo_bar((1, 2, 3), (4, 5, 6)), topics=[], regex="bar*",
    )


def test_subscribed_topic_name_and_resolved_regular_expression():
    m = member(MemberState.STABLE, 10, 10, foo_bar((1, 2, 3), (4, 5, 6)), topics=["foo"], regex="bar*")
    updated = build(
        m, 10, foo_bar((1, 2, 3), (4, 5, 6)), epoch(-1), owned((FOO_ID, [1, 2, 3]), (BAR_ID, [4, 5, 6])),
        changed=True, ids=image(FOO_BAR, {"bar*": frozenset({"bar"})}),
    )
    assert updated == member(
        MemberState.STABLE, 10, 10, foo_bar((1, 2, 3), (4, 5, 6)), topics=["foo"], regex="bar*",
    )


# -- beyond Kafka's cases ------------------------------------------------------------------------------


def test_unknown_state_fenced_while_it_reports_partitions():
    # Kafka's test only leaves ownedTopicPartitions unset; a non-empty list fences too.
    m = member(MemberState.UNKNOWN, 11, 11, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3)))
    with pytest.raises(FencedMemberEpochError):
        build(m, 12, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3)), epoch(-1), owned((TOPIC_ID_1, [3])))
    with pytest.raises(FencedMemberEpochError):
        build(m, 12, {}, epoch(-1), owned((TOPIC_ID_1, [])))  # a topic with no partitions is not empty


def test_stable_at_target_epoch_is_returned_unchanged():
    m = member(MemberState.STABLE, 11, 10, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1)))
    # Even with a different target: only a new epoch (or a subscription change) moves it.
    assert build(m, 11, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)), epoch(-1)) is m


def test_revocation_already_acknowledged_skips_unrevoked_partitions():
    # The heartbeat that brings the new target already shows the partitions gone: nothing to wait for.
    m = member(MemberState.STABLE, 10, 9, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2)))
    updated = build(m, 11, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)), epoch(-1), owned((TOPIC_ID_1, [2])))
    assert updated == member(MemberState.STABLE, 11, 10, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)))


def test_owned_partitions_as_a_mapping():
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1)),
    )
    target = mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2))
    assert build(m, 11, target, epoch(-1), {TOPIC_ID_1: {1, 2}}) is m
    assert build(m, 11, target, epoch(-1), {TOPIC_ID_1: {2}}).state is MemberState.STABLE


def test_without_subscribed_topic_ids_every_topic_counts_as_subscribed():
    # Callers from before KAFKA-19431 pass no subscription: the target is taken as it is, even for
    # a member whose recorded subscription names neither topic.
    m = member(MemberState.STABLE, 10, 10, both((1,), (4,)), topics=[])
    updated = reconcile(m, 11, both((1, 2), (4,)), epoch(-1))
    assert updated == member(MemberState.STABLE, 11, 10, both((1, 2), (4,)), topics=[])
    with pytest.raises(ValueError):
        reconcile(m, 10, both((1,), (4,)), epoch(-1), has_subscription_changed=True)


# KAFKA-19449 ---------------------------------------------------------------------------------------


def test_own_partition_pending_revocation_given_back_is_assigned_at_once():
    # Before 4.2 a partition the member itself was revoking counted as unreleased when the target
    # gave it back (UNRELEASED_PARTITIONS, one more heartbeat); now it is the member's again at once.
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 9,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1)),
    )
    mine = {(TOPIC_ID_1, 1): 10, (TOPIC_ID_1, 2): 10}
    updated = build(
        m, 12, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2)),
        lambda t, p: mine.get((t, p), -1), owned((TOPIC_ID_1, [2])),
    )
    # (The previous epoch is the one the member had, 10.)
    assert updated == member(MemberState.STABLE, 12, 10, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2)))


def test_partition_another_member_owns_is_still_unreleased():
    # Only the member's own pending revocations are exempt: partition 3, owned by someone else, waits.
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 9,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1)),
    )
    owners = {(TOPIC_ID_1, 1): 10, (TOPIC_ID_1, 2): 10, (TOPIC_ID_1, 3): 7}
    updated = build(
        m, 12, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2, 3)),
        lambda t, p: owners.get((t, p), -1), owned((TOPIC_ID_1, [2])),
    )
    assert updated == member(
        MemberState.UNRELEASED_PARTITIONS, 12, 10, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2))
    )


# KAFKA-19974 ---------------------------------------------------------------------------------------


def test_unrevoked_to_unrevoked_keeps_the_epoch():
    # Revoking in two steps (the target moved twice while the member revoked): the member stays at
    # 10 throughout, not 11 as before 4.2 (an epoch whose target may have given partition 2 to someone
    # else).
    m = member(MemberState.UNREVOKED_PARTITIONS, 10, 9, both((2, 3), ()), both((1,), ()))
    step1 = build(m, 12, both((3,), ()), epoch(-1), owned((TOPIC_ID_1, [2, 3])))
    assert (step1.state, step1.member_epoch, step1.previous_member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 10, 10)
    assert step1.partitions_pending_revocation == mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2))
    # Still owning 2: nothing moves, whatever the target says.
    assert build(step1, 13, both((), ()), epoch(-1), owned((TOPIC_ID_1, [2, 3]))) is step1


@pytest.mark.parametrize("target_epoch", [11, 13])
def test_leaving_unrevoked_goes_to_the_target_epoch(target_epoch):
    # Whatever the gap: to the target epoch, as STABLE or UNRELEASED_PARTITIONS.
    m = member(MemberState.UNREVOKED_PARTITIONS, 10, 9, both((2,), ()), both((1,), ()))
    stable = build(m, target_epoch, both((2,), ()), epoch(-1), owned((TOPIC_ID_1, [2])))
    assert stable == member(MemberState.STABLE, target_epoch, 10, both((2,), ()))
    unreleased = build(m, target_epoch, both((2, 5), ()), epoch(3), owned((TOPIC_ID_1, [2])))
    assert unreleased == member(MemberState.UNRELEASED_PARTITIONS, target_epoch, 10, both((2,), ()))


# KAFKA-19431 ---------------------------------------------------------------------------------------


def test_unsubscribing_a_topic_revokes_its_partitions_at_once():
    # STABLE at the target epoch (no new target yet): topic 1's partitions go pending revocation on
    # the very heartbeat that leaves the topic, at the same epoch; topic 2's are kept.
    m = member(MemberState.STABLE, 10, 9, both((1, 2), (4,)), topics=[TOPIC_2])
    updated = build(m, 10, both((1, 2), (4,)), epoch(-1), owned((TOPIC_ID_1, [1, 2]), (TOPIC_ID_2, [4])), changed=True)
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, 10, 9, both((), (4,)), both((1, 2), ()), topics=[TOPIC_2]
    )
    # Once the client lets them go, the member is STABLE again at the target epoch, with topic 2 only.
    after = build(updated, 10, both((1, 2), (4,)), epoch(-1), owned((TOPIC_ID_2, [4])))
    assert after == member(MemberState.STABLE, 10, 10, both((), (4,)), topics=[TOPIC_2])


def test_unsubscribing_without_owned_partitions_waits_for_them():
    # A heartbeat without owned partitions (null) may still own them all: to revoke, not dropped.
    m = member(MemberState.STABLE, 10, 9, both((1,), (4,)), topics=[TOPIC_2])
    updated = build(m, 10, both((1,), (4,)), epoch(-1), None, changed=True)
    assert updated.state is MemberState.UNREVOKED_PARTITIONS
    assert updated.partitions_pending_revocation == both((1,), ())


def test_without_the_subscription_change_flag_the_stable_member_is_left_alone():
    # Kafka reacts to a subscription only on the heartbeat that changes it, or with a new target.
    m = member(MemberState.STABLE, 10, 9, both((1,), (4,)), topics=[TOPIC_2])
    assert build(m, 10, both((1,), (4,)), epoch(-1), owned((TOPIC_ID_1, [1]), (TOPIC_ID_2, [4]))) is m


def test_subscription_change_that_keeps_every_topic_changes_nothing():
    m = member(MemberState.STABLE, 10, 9, both((1,), (4,)))
    assert build(m, 10, both((1,), (4,)), epoch(-1), None, changed=True) is m


def test_target_partitions_of_unsubscribed_or_unknown_topics_are_never_taken():
    # The target predates the subscription (topic 1 left), and topic 9 is not in the image at all.
    topic_9 = uuid.UUID(int=9)
    m = member(MemberState.STABLE, 10, 9, {}, topics=[TOPIC_2, "topic9"])
    target = {TOPIC_ID_1: frozenset({1}), TOPIC_ID_2: frozenset({4}), topic_9: frozenset({0})}
    updated = build(m, 11, target, epoch(-1), owned())
    assert updated == member(MemberState.STABLE, 11, 10, both((), (4,)), topics=[TOPIC_2, "topic9"])


def test_subscribed_topic_ids_are_asked_only_when_the_member_is_reconciled():
    asked = []

    def ids(m):
        asked.append(m.member_id)
        return frozenset({TOPIC_ID_1})

    m = member(MemberState.STABLE, 10, 9, both((1,), ()))
    assert reconcile(m, 10, both((1,), ()), epoch(-1), subscribed_topic_ids=ids) is m  # the steady heartbeat
    assert asked == []
    assert reconcile(m, 11, both((1, 2), ()), epoch(-1), subscribed_topic_ids=ids).member_epoch == 11
    assert asked == ["member"]  # once per reconciliation, and a plain frozenset will do


def test_resolver_unions_names_and_regex_topics():
    resolve = image(
        {TOPIC_ID_1: TOPIC_1, TOPIC_ID_2: TOPIC_2, FOO_ID: "foo"}, {"topic.*": frozenset({TOPIC_1, TOPIC_2})}
    )
    ids = resolve(member(MemberState.STABLE, 1, 0, {}, topics=["foo", "gone"], regex="topic.*"))
    assert [t in ids for t in (TOPIC_ID_1, TOPIC_ID_2, FOO_ID, BAR_ID)] == [True, True, True, False]
    no_regex = resolve(member(MemberState.STABLE, 1, 0, {}, topics=["foo"]))
    assert [t in no_regex for t in (TOPIC_ID_1, FOO_ID)] == [False, True]
    unresolved = resolve(member(MemberState.STABLE, 1, 0, {}, topics=[], regex="other.*"))
    assert FOO_ID not in unresolved and TOPIC_ID_1 not in unresolved


def test_member_canonical_form_and_builder():
    m = ConsumerGroupMember(
        "m", assigned_partitions={TOPIC_ID_1: [1, 2], TOPIC_ID_2: []}, subscribed_topic_names=["a"], state=2,
    )
    assert m.assigned_partitions == {TOPIC_ID_1: frozenset({1, 2})}
    assert m.subscribed_topic_names == frozenset({"a"})
    assert m.state is MemberState.UNRELEASED_PARTITIONS
    assert (m.member_epoch, m.previous_member_epoch, m.rebalance_timeout_ms) == (0, -1, -1)
    bumped = replace(m, member_epoch=5).update_member_epoch(6)
    assert (bumped.member_epoch, bumped.previous_member_epoch) == (6, 5)
    assert MemberState.from_value(3) is MemberState.UNKNOWN
    assert MemberState.from_value(1) is MemberState.UNREVOKED_PARTITIONS
    assert not m.is_reconciled_to(0)
    assert replace(m, state=MemberState.STABLE).is_reconciled_to(0)


def test_member_lifecycle():
    S = MemberState
    for src in (S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS):
        for dst in (S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS):
            validate_member_transition(src, dst)
    validate_member_transition(S.UNKNOWN, S.STABLE)
    validate_member_transition(S.UNKNOWN, S.UNRELEASED_PARTITIONS)
    for src, dst in [(S.UNKNOWN, S.UNREVOKED_PARTITIONS), (S.STABLE, S.UNKNOWN), (S.UNKNOWN, S.UNKNOWN)]:
        with pytest.raises(IllegalTransition):
            validate_member_transition(src, dst)


# -- properties: a small group, random targets and subscriptions, clients that acknowledge late ----------

TOPICS = (TOPIC_ID_1, TOPIC_ID_2)
TOPIC_NAMES = {TOPIC_ID_1: TOPIC_1, TOPIC_ID_2: TOPIC_2}
SUBSCRIPTIONS = (frozenset(), frozenset({TOPIC_1}), frozenset({TOPIC_2}), frozenset({TOPIC_1, TOPIC_2}))
PARTITIONS_PER_TOPIC = 3
ALL_PARTITIONS = tuple((t, p) for t in TOPICS for p in range(PARTITIONS_PER_TOPIC))
MEMBER_IDS = ("m0", "m1", "m2", "m3")
GROUP_IMAGE = image(TOPIC_NAMES)


class PartitionEpochs:
    """Kafka's ConsumerGroup.currentPartitionEpoch with its checks (addPartitionEpochs and
    removePartitionEpochs throw IllegalStateException): a partition gets an epoch only when it has
    none, and loses it only at the epoch it was given. It also remembers, over the whole run, which
    member held each partition at each epoch: KAFKA-19974's invariant is that it is only ever one."""

    def __init__(self) -> None:
        self.epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.holder_at: dict[tuple[uuid.UUID, int, int], str] = {}

    def __call__(self, topic_id, partition) -> int:
        return self.epochs.get((topic_id, partition), -1)

    def update(self, old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
        for partitions in (old.assigned_partitions, old.partitions_pending_revocation):
            for t, ps in partitions.items():
                for p in ps:
                    assert self.epochs.pop((t, p), None) == old.member_epoch, f"{t}-{p} owned at another epoch"
        for partitions in (new.assigned_partitions, new.partitions_pending_revocation):
            for t, ps in partitions.items():
                for p in ps:
                    assert (t, p) not in self.epochs, f"{t}-{p} given to {new.member_id} but still owned"
                    self.epochs[(t, p)] = new.member_epoch
                    holder = self.holder_at.setdefault((t, p, new.member_epoch), new.member_id)
                    assert holder == new.member_id, f"{t}-{p} held at {new.member_epoch} by {holder}, {new.member_id}"


@dataclass
class Client:
    """The consumer: it owns the assignment it last took, and takes the one the last heartbeat
    response carried only when it acknowledges (late, at random)."""

    owned: frozenset[tuple[uuid.UUID, int]] = frozenset()
    received: frozenset[tuple[uuid.UUID, int]] = frozenset()

    def report(self) -> list[tuple[uuid.UUID, list[int]]]:
        return [(t, sorted(p for tt, p in self.owned if tt == t)) for t in sorted({t for t, _ in self.owned})]


def flat(partitions) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((t, p) for t, ps in partitions.items() for p in ps)


def subscribed_ids(m: ConsumerGroupMember) -> frozenset[uuid.UUID]:
    return frozenset(t for t, name in TOPIC_NAMES.items() if name in m.subscribed_topic_names)


@dataclass
class Group:
    member_ids: tuple[str, ...]
    target_epoch: int = 0
    target: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    clients: dict[str, Client] = field(default_factory=dict)
    epochs: PartitionEpochs = field(default_factory=PartitionEpochs)
    owners: tuple[int | None, ...] = ()
    subscriptions_changed: bool = False  # since the last target

    def __post_init__(self) -> None:
        every_topic = frozenset(TOPIC_NAMES.values())
        self.members = {m: ConsumerGroupMember(m, subscribed_topic_names=every_topic) for m in self.member_ids}
        self.clients = {m: Client() for m in self.member_ids}

    def new_target(self, owners: tuple[int | None, ...]) -> None:
        """A new target assignment (exclusive, as an assignor's is) at the next epoch. It may give a
        member topics it no longer subscribes to: the assignor ran before the change."""
        self.target_epoch += 1
        self.owners, self.subscriptions_changed = owners, False
        self.target = {m: {} for m in self.member_ids}
        for (t, p), owner in zip(ALL_PARTITIONS, owners):
            if owner is not None and owner < len(self.member_ids):
                mid = self.member_ids[owner]
                self.target[mid][t] = self.target[mid].get(t, frozenset()) | {p}

    def heartbeat(self, mid: str, ack: bool, report: bool, subscription: frozenset[str] | None = None) -> None:
        client = self.clients[mid]
        if ack:
            client.owned = client.received
        old = self.members[mid]
        # The heartbeat's subscription first (Kafka updates the member, then reconciles it).
        changed = subscription is not None and subscription != old.subscribed_topic_names
        subscribed = replace(old, subscribed_topic_names=subscription) if changed else old
        self.subscriptions_changed |= changed
        reported = client.report() if report else None
        args = (subscribed, self.target_epoch, self.target.get(mid, {}), self.epochs, reported)
        new = reconcile(*args, has_subscription_changed=changed, subscribed_topic_ids=GROUP_IMAGE)
        assert reconcile(*args, has_subscription_changed=changed, subscribed_topic_ids=GROUP_IMAGE) == new  # pure
        self.epochs.update(old, new)
        self.members[mid] = new
        client.received = flat(new.assigned_partitions)  # the response carries the assigned partitions

        assert new.member_epoch >= old.member_epoch, f"{mid}'s epoch went back"
        assert new.member_epoch <= self.target_epoch
        if new.state is MemberState.UNREVOKED_PARTITIONS and old.state is MemberState.UNREVOKED_PARTITIONS:
            assert new.member_epoch == old.member_epoch  # KAFKA-19974
        # KAFKA-19431: a topic the member left is never kept, from the heartbeat that leaves it on.
        assert {t for t, _ in flat(new.assigned_partitions)} <= subscribed_ids(new), (mid, new)
        self.check_exclusive()

    def check_exclusive(self) -> None:
        held: dict[tuple[uuid.UUID, int], str] = {}
        for mid, m in self.members.items():
            # The coordinator's view: what a member is assigned or still revoking is its own.
            for tp in flat(m.assigned_partitions) | flat(m.partitions_pending_revocation):
                assert tp not in held, f"{tp} held by {held[tp]} and {mid}"
                held[tp] = mid
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for mid, c in self.clients.items():
            # The clients' view: no partition consumed by two clients at once.
            for tp in c.owned:
                assert tp not in owners, f"{tp} owned by clients {owners[tp]} and {mid}"
                owners[tp] = mid
            assert c.owned <= flat(self.members[mid].assigned_partitions) | flat(
                self.members[mid].partitions_pending_revocation
            )


owners_st = st.tuples(*[st.one_of(st.none(), st.integers(0, len(MEMBER_IDS) - 1)) for _ in ALL_PARTITIONS])
step_st = st.one_of(
    st.tuples(st.just("target"), owners_st),
    st.tuples(
        st.just("heartbeat"), st.integers(0, len(MEMBER_IDS) - 1), st.booleans(), st.booleans(),
        st.one_of(st.none(), st.sampled_from(SUBSCRIPTIONS)),
    ),
)

# Once the target and the subscriptions are fixed and every heartbeat acknowledges and reports,
# three rounds suffice (and are needed: hypothesis finds groups that need the third). In the first,
# a member reconciles towards the last target and may have to revoke. In the second it has
# acknowledged that and holds only partitions of its target (KAFKA-19974 sends it straight to the
# target epoch); partitions another member still held when it heartbeat are unreleased (its own,
# given back, no longer are: KAFKA-19449). In the third nobody holds them any more.
CONVERGENCE_ROUNDS = 3


def run(group: Group, steps, n_members: int) -> None:
    for step in steps:
        if step[0] == "target":
            group.new_target(step[1])
        else:
            _, who, ack, report, subscription = step
            if who < n_members:
                group.heartbeat(MEMBER_IDS[who], ack, report, subscription)


def test_a_partition_is_held_by_one_member_per_epoch_after_leaving_a_topic():
    """KAFKA-19974's scenario, which random runs rarely hit: m0 leaves topic 1 at the target epoch
    (UNREVOKED_PARTITIONS at 1); the next target (2) gives m0's topic-2 partition to m1. Before 4.2
    m0, done revoking topic 1, moved to min(1 + 1, 2) = 2 still holding that partition, which m1 then
    took at epoch 2 too: two members at one epoch. Now m0 stays at 1 until it has let it go."""
    g = Group(("m0", "m1"))
    g.new_target((0, None, None, 0, None, None))  # epoch 1: topic1-0 and topic2-0 to m0
    g.heartbeat("m0", True, True)
    g.heartbeat("m0", True, True)
    g.heartbeat("m0", True, True, frozenset({TOPIC_2}))
    assert g.members["m0"].partitions_pending_revocation == mk_assignment(mk_topic_assignment(TOPIC_ID_1, 0))
    g.new_target((None, None, None, 1, None, None))  # epoch 2: topic2-0 to m1
    g.heartbeat("m0", True, True)
    m0 = g.members["m0"]
    assert (m0.state, m0.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 1)
    for mid in ("m1", "m0", "m1"):
        g.heartbeat(mid, True, True)  # PartitionEpochs checks the holder of each (partition, epoch)
    assert g.members["m1"].assigned_partitions == mk_assignment(mk_topic_assignment(TOPIC_ID_2, 0))
    assert g.epochs.holder_at[(TOPIC_ID_2, 0, 1)] == "m0" and g.epochs.holder_at[(TOPIC_ID_2, 0, 2)] == "m1"


@settings(max_examples=200, deadline=None)
@given(
    n_members=st.integers(1, len(MEMBER_IDS)),
    first_target=owners_st,
    steps=st.lists(step_st, max_size=60),
)
def test_random_targets_keep_partitions_exclusive_and_converge(n_members, first_target, steps):
    group = Group(MEMBER_IDS[:n_members])
    group.new_target(first_target)
    run(group, steps, n_members)
    settle(group)

    for mid in group.member_ids:
        m = group.members[mid]
        expected = {t: ps for t, ps in group.target[mid].items() if t in subscribed_ids(m)}
        assert m.state is MemberState.STABLE, (mid, m)
        assert m.member_epoch == group.target_epoch
        assert m.is_reconciled_to(group.target_epoch)
        assert m.assigned_partitions == expected
        assert m.partitions_pending_revocation == {}
        assert group.clients[mid].received == flat(expected)  # what the last response carried


def settle(group: Group) -> None:
    """The target stops changing (after one last, if subscriptions changed since the last: Kafka
    bumps the group epoch on a subscription change, so a new target follows it, and without one a
    member that took a topic up again would wait for it forever), and every client takes its
    latest assignment and says what it owns, for CONVERGENCE_ROUNDS rounds."""
    if group.subscriptions_changed:
        group.new_target(group.owners)
    for _ in range(CONVERGENCE_ROUNDS):
        for mid in group.member_ids:
            group.heartbeat(mid, ack=True, report=True)


@settings(max_examples=300, deadline=None)
@given(
    n_members=st.integers(1, len(MEMBER_IDS)),
    first_target=owners_st,
    steps=st.lists(step_st, max_size=40),
    settled=st.booleans(),
    later_keeps=st.one_of(st.none(), st.tuples(*[st.booleans() for _ in ALL_PARTITIONS])),
    who=st.integers(0, len(MEMBER_IDS) - 1),
    subscription=st.sampled_from(SUBSCRIPTIONS),
    ack=st.booleans(),
    client_lets_go=st.booleans(),
)
def test_leaving_a_topic_takes_its_partitions_at_once(
    n_members, first_target, steps, settled, later_keeps, who, subscription, ack, client_lets_go
):
    """Whatever state the member is in (random; settled: STABLE at the target with its partitions;
    or then revoking towards a later target), the heartbeat that leaves a topic ends with none of
    its partitions assigned. A member STABLE at the target epoch keeps its epochs: what it left goes
    to revocation if its client may still own some of it, or is simply dropped if the client let it
    go first (as Kafka's consumer does on subscribe()). A member still revoking adds it to what it
    revokes, at the same epoch."""
    group = Group(MEMBER_IDS[:n_members])
    group.new_target(first_target)
    run(group, steps, n_members)
    mid = MEMBER_IDS[who % n_members]
    client = group.clients[mid]
    if settled or later_keeps is not None:
        settle(group)
        if later_keeps is not None:
            # A later target that takes some partitions away from their members.
            group.new_target(tuple(o if keep else None for o, keep in zip(group.owners, later_keeps)))
            group.heartbeat(mid, True, True)  # may have to revoke, and has not yet
            ack = False  # nor will it have on the next heartbeat
    revoking = group.members[mid].partitions_pending_revocation
    left = {t for t, name in TOPIC_NAMES.items() if name not in subscription}
    if client_lets_go:
        client.owned = frozenset(tp for tp in client.owned if tp[0] not in left)
        ack = False
    old = group.members[mid]
    group.heartbeat(mid, ack, True, subscription)
    new = group.members[mid]

    assert not any(t in left for t, _ in flat(new.assigned_partitions))
    if old.state is MemberState.STABLE and old.member_epoch == group.target_epoch:
        assert (new.member_epoch, new.previous_member_epoch) == (old.member_epoch, old.previous_member_epoch)
        gone = {(t, p) for t, p in flat(old.assigned_partitions) if t in left}
        if gone & client.owned:
            assert new.state is MemberState.UNREVOKED_PARTITIONS
            assert flat(new.partitions_pending_revocation) == gone
        else:
            assert new.state is MemberState.STABLE and new.partitions_pending_revocation == {}
        assert flat(new.assigned_partitions) == flat(old.assigned_partitions) - gone
    if old.state is MemberState.UNREVOKED_PARTITIONS and client.owned & flat(revoking):
        # Still revoking (its heartbeat still owns some): what it left joins what it was revoking,
        # at the same epoch.
        gone = {(t, p) for t, p in flat(old.assigned_partitions) if t in left}
        assert new.state is MemberState.UNREVOKED_PARTITIONS and new.member_epoch == old.member_epoch
        assert flat(new.partitions_pending_revocation) == flat(revoking) | gone


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(step_st, min_size=1, max_size=60))
def test_clients_that_never_report_never_lose_partitions_they_were_asked_to_revoke(steps):
    """Without owned partitions in the heartbeat (Kafka's null) a member never leaves
    UNREVOKED_PARTITIONS: a partition it was asked to revoke is never given to anyone else. (The
    subscription stays as it is here: leaving a topic adds to what it must revoke.)"""
    group = Group(MEMBER_IDS)
    group.new_target(tuple(i % len(MEMBER_IDS) for i in range(len(ALL_PARTITIONS))))
    for mid in group.member_ids:
        group.heartbeat(mid, ack=True, report=True)
    stuck: dict[str, ConsumerGroupMember] = {}
    for step in steps:
        if step[0] == "target":
            group.new_target(step[1])
        else:
            mid = MEMBER_IDS[step[1]]
            group.heartbeat(mid, ack=step[2], report=False)
            m = group.members[mid]
            if mid in stuck:
                assert m == stuck[mid]
            elif m.state is MemberState.UNREVOKED_PARTITIONS:
                stuck[mid] = m
