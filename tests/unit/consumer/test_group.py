"""The consumer group's state model (coordinator/consumer/group.py): the cases of Kafka's
ConsumerGroupTest that concern consumer-protocol members (members, static members, partition epochs
and their double-claim error, subscribed topic and regex counts, the state, the subscription type),
then our own (the transition table, a failed update changing nothing, copies, the GroupSpec), and a
property over random sequences of updates: everything the group derives from its members equals a
recount from them.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st
from kio.schema.errors import ErrorCode

from coordinator.consumer.assignment_spec import GroupSpec, MemberSpec
from coordinator.consumer.group import (
    NO_EPOCH,
    ConsumerGroup,
    ConsumerGroupState,
    PartitionEpochError,
    ResolvedRegularExpression,
    SubscriptionCount,
    SubscriptionType,
    subscription_type,
)
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.member_state import MemberState
from kernel.lifecycle import IllegalTransition

HOMOGENEOUS, HETEROGENEOUS = SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS
S = ConsumerGroupState
# Kafka draws random topic ids; fixed ones keep the runs identical.
FOO_ID, BAR_ID, ZAR_ID = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def mk_assignment(*topic_assignments):
    """Kafka's AssignmentTestUtil.mkAssignment(mkTopicAssignment(id, p...), ...)."""
    return {topic_id: frozenset(partitions) for topic_id, *partitions in topic_assignments}


def member(member_id, **fields):
    """new ConsumerGroupMember.Builder(memberId).set...().build()."""
    return ConsumerGroupMember(member_id, **fields)


def snapshot(group):
    """Everything the group holds, derived parts included."""
    return (
        group.durable_view(),
        dict(group.static_members),
        dict(group.subscribed_topic_names),
        dict(group.subscribed_regular_expressions),
        dict(group.server_assignors),
        group.subscription_type,
        {tid: dict(ps) for tid, ps in group.partition_epochs.items()},
    )


# -- members (ConsumerGroupTest) --------------------------------------------------------------------


def test_get_or_create_member():
    group = ConsumerGroup("foo")
    m = group.get_or_create_member("member-id")
    assert m.member_id == "member-id"
    assert group.member("member-id") is None  # created, not added
    group.update_member(m)
    assert group.get_or_create_member("member-id") is m
    assert group.member("member-id") is m
    assert group.member("does-not-exist") is None


def test_update_member():
    group = ConsumerGroup("foo")
    m = member("member", subscribed_topic_names=["foo", "bar"])
    group.update_member(m)
    assert group.member("member") == m


def test_no_static_member():
    group = ConsumerGroup("foo")
    group.update_member(group.get_or_create_member("member"))
    assert group.static_member("instance-id") is None
    assert group.static_member(None) is None
    assert not group.has_static_member(None)


def test_get_static_member_by_instance_id():
    group = ConsumerGroup("foo")
    m = member("member", subscribed_topic_names=["foo", "bar"], instance_id="instance")
    group.update_member(m)
    assert group.static_member("instance") == m
    assert group.member("member") == m
    assert group.static_member_id("instance") == "member"
    assert group.has_static_member("instance")


def test_remove_member():
    group = ConsumerGroup("foo")
    group.update_member(member("member"))
    assert "member" in group.members
    group.remove_member("member")
    assert "member" not in group.members
    group.remove_member("never-there")  # Kafka: a no-op
    assert group.state is S.EMPTY


def test_remove_static_member():
    group = ConsumerGroup("foo")
    group.update_member(member("member", subscribed_topic_names=["foo", "bar"], instance_id="instance"))
    group.remove_member("member")
    assert "member" not in group.members
    assert group.static_member("instance") is None
    assert group.static_member_id("instance") is None


def test_target_assignment_of_a_static_member_is_the_one_its_instance_id_holds():
    # Kafka's targetAssignment(memberId, instanceId), used when a static member rejoins.
    group = ConsumerGroup("foo")
    group.update_member(member("old", instance_id="instance"))
    group.update_target_assignment("old", mk_assignment((FOO_ID, 1)))
    assert group.member_target_assignment("new", "instance") == mk_assignment((FOO_ID, 1))
    assert group.member_target_assignment("old") == mk_assignment((FOO_ID, 1))
    assert group.member_target_assignment("old", "unknown-instance") == {}
    assert group.member_target_assignment("new") == {}


# -- partition epochs (ConsumerGroupTest) -------------------------------------------------------------


def test_updating_member_updates_partition_epoch():
    group = ConsumerGroup("foo")
    m = member(
        "member",
        member_epoch=10,
        assigned_partitions=mk_assignment((FOO_ID, 1, 2, 3)),
        partitions_pending_revocation=mk_assignment((BAR_ID, 4, 5, 6)),
    )
    group.update_member(m)
    assert [group.current_partition_epoch(FOO_ID, p) for p in (1, 2, 3)] == [10, 10, 10]
    assert [group.current_partition_epoch(BAR_ID, p) for p in (4, 5, 6)] == [10, 10, 10]
    assert [group.current_partition_epoch(ZAR_ID, p) for p in (7, 8, 9)] == [-1, -1, -1]

    m = member(
        "member",
        member_epoch=11,
        assigned_partitions=mk_assignment((BAR_ID, 1, 2, 3)),
        partitions_pending_revocation=mk_assignment((ZAR_ID, 4, 5, 6)),
    )
    group.update_member(m)
    assert [group.current_partition_epoch(BAR_ID, p) for p in (1, 2, 3)] == [11, 11, 11]
    assert [group.current_partition_epoch(ZAR_ID, p) for p in (4, 5, 6)] == [11, 11, 11]
    assert [group.current_partition_epoch(FOO_ID, p) for p in (1, 2, 3, 7, 8, 9)] == [-1] * 6
    assert FOO_ID not in group.partition_epochs  # an emptied topic goes, as in Kafka


def test_updating_member_updates_partition_epoch_when_partition_is_reassigned_before_being_revoked():
    group = ConsumerGroup("foo")
    m = member("member", member_epoch=10, partitions_pending_revocation=mk_assignment((FOO_ID, 1)))
    group.update_member(m)
    assert group.current_partition_epoch(FOO_ID, 1) == 10
    group.update_member(member("member", member_epoch=11, assigned_partitions=mk_assignment((FOO_ID, 1))))
    assert group.current_partition_epoch(FOO_ID, 1) == 11


def test_updating_member_updates_partition_epoch_when_partition_is_not_released():
    group = ConsumerGroup("foo")
    group.update_member(member("m1", member_epoch=10, assigned_partitions=mk_assignment((FOO_ID, 1))))
    before = snapshot(group)
    m2 = member(
        "m2",
        member_epoch=10,
        subscribed_topic_names=["foo"],
        instance_id="i2",
        assigned_partitions=mk_assignment((BAR_ID, 0), (FOO_ID, 1)),
    )
    # m2 cannot take foo-1: m1 still owns it.
    with pytest.raises(PartitionEpochError):
        group.update_member(m2)
    # Ours: and nothing of m2 got in (Kafka would have added it to the members already).
    assert snapshot(group) == before


def test_a_member_cannot_hold_a_partition_both_assigned_and_pending_revocation():
    group = ConsumerGroup("foo")
    with pytest.raises(PartitionEpochError):
        group.update_member(
            member(
                "m1",
                member_epoch=3,
                assigned_partitions=mk_assignment((FOO_ID, 1)),
                partitions_pending_revocation=mk_assignment((FOO_ID, 1)),
            )
        )
    assert group.members == {} and group.partition_epochs == {}


def test_remove_partition_epochs():
    group = ConsumerGroup("foo")
    # No epoch set at all.
    with pytest.raises(PartitionEpochError):
        group.remove_partition_epochs(mk_assignment((FOO_ID, 1)), 10)
    group.update_member(member("m1", member_epoch=10, assigned_partitions=mk_assignment((FOO_ID, 1))))
    # The expected epoch is not the owner's.
    with pytest.raises(PartitionEpochError):
        group.remove_partition_epochs(mk_assignment((FOO_ID, 1)), 11)
    assert group.current_partition_epoch(FOO_ID, 1) == 10  # ours: the failed removal changed nothing
    # A partition of the topic nobody owns.
    with pytest.raises(PartitionEpochError):
        group.remove_partition_epochs(mk_assignment((FOO_ID, 1, 2)), 10)
    assert group.current_partition_epoch(FOO_ID, 1) == 10
    group.remove_partition_epochs(mk_assignment((FOO_ID, 1)), 10)
    assert group.current_partition_epoch(FOO_ID, 1) == NO_EPOCH


def test_add_partition_epochs():
    group = ConsumerGroup("foo")
    group.add_partition_epochs(mk_assignment((FOO_ID, 1)), 10)
    # Changing the epoch fails: the owner must release the partition first.
    with pytest.raises(PartitionEpochError):
        group.add_partition_epochs(mk_assignment((FOO_ID, 1)), 11)
    with pytest.raises(PartitionEpochError):
        group.add_partition_epochs(mk_assignment((BAR_ID, 1), (FOO_ID, 1)), 11)
    assert group.partition_epochs == {FOO_ID: {1: 10}}  # ours: bar-1 was not added either


def test_deleting_member_removes_partition_epoch():
    group = ConsumerGroup("foo")
    m = member(
        "member",
        member_epoch=10,
        assigned_partitions=mk_assignment((FOO_ID, 1, 2, 3)),
        partitions_pending_revocation=mk_assignment((BAR_ID, 4, 5, 6)),
    )
    group.update_member(m)
    assert group.current_partition_epoch(BAR_ID, 5) == 10
    group.remove_member("member")
    for topic_id in (FOO_ID, BAR_ID, ZAR_ID):
        assert all(group.current_partition_epoch(topic_id, p) == -1 for p in range(10))
    assert group.partition_epochs == {}


def test_waiting_on_unreleased_partition():
    group = ConsumerGroup("foo")
    group.update_target_assignment("m1", mk_assignment((FOO_ID, 1, 2, 3), (ZAR_ID, 7, 8, 9)))
    m1 = member(
        "m1",
        member_epoch=10,
        state=MemberState.UNRELEASED_PARTITIONS,
        assigned_partitions=mk_assignment((FOO_ID, 1, 2, 3)),
        partitions_pending_revocation=mk_assignment((BAR_ID, 4, 5, 6)),
    )
    group.update_member(m1)
    assert not group.waiting_on_unreleased_partition(m1)
    group.update_member(member("m2", member_epoch=10, partitions_pending_revocation=mk_assignment((ZAR_ID, 7))))
    assert group.waiting_on_unreleased_partition(m1)
    # Only an UNRELEASED_PARTITIONS member waits.
    assert not group.waiting_on_unreleased_partition(member("m1", member_epoch=10))


def test_current_partition_epoch_is_what_reconcile_asks_for():
    # The group is the reconciliation's currentPartitionEpoch: a partition another member still
    # revokes is not given, and is once released.
    from coordinator.consumer.reconciliation import reconcile

    group = ConsumerGroup("foo")
    group.update_member(member("m2", member_epoch=1, partitions_pending_revocation=mk_assignment((FOO_ID, 0))))
    m1 = member("m1", member_epoch=1)
    step = reconcile(m1, 2, mk_assignment((FOO_ID, 0)), group.current_partition_epoch, [])
    assert step.state is MemberState.UNRELEASED_PARTITIONS and step.assigned_partitions == {}
    group.update_member(member("m2", member_epoch=2))
    step = reconcile(step, 2, mk_assignment((FOO_ID, 0)), group.current_partition_epoch, [])
    assert step.state is MemberState.STABLE and step.assigned_partitions == mk_assignment((FOO_ID, 0))
    group.update_member(step)
    assert group.current_partition_epoch(FOO_ID, 0) == 2


# -- state (ConsumerGroupTest) ------------------------------------------------------------------------


def test_group_state():
    group = ConsumerGroup("foo")
    assert group.state is S.EMPTY

    member1 = member("member1", state=MemberState.STABLE, member_epoch=1, previous_member_epoch=0)
    group.update_member(member1)
    group.set_group_epoch(1)
    assert group.state is S.ASSIGNING

    member2 = member("member2", state=MemberState.STABLE, member_epoch=1, previous_member_epoch=0)
    group.update_member(member2)
    group.set_group_epoch(2)
    assert group.state is S.ASSIGNING

    group.set_target_assignment_epoch(2)
    assert group.state is S.RECONCILING

    group.update_member(member("member1", state=MemberState.STABLE, member_epoch=2, previous_member_epoch=1))
    assert group.state is S.RECONCILING

    # member2 is not STABLE: the group keeps reconciling.
    group.update_member(
        member("member2", state=MemberState.UNREVOKED_PARTITIONS, member_epoch=2, previous_member_epoch=1)
    )
    assert group.state is S.RECONCILING

    group.update_member(member("member2", state=MemberState.STABLE, member_epoch=2, previous_member_epoch=1))
    assert group.state is S.STABLE

    group.remove_member("member1")
    group.remove_member("member2")
    assert group.state is S.EMPTY


def test_validate_delete_group():
    group = ConsumerGroup("foo")
    assert group.state is S.EMPTY and group.validate_delete() is None

    group.update_member(member("member1", member_epoch=1, previous_member_epoch=0))
    assert group.state is S.RECONCILING and group.validate_delete() is ErrorCode.non_empty_group

    group.set_group_epoch(1)
    assert group.state is S.ASSIGNING and group.validate_delete() is ErrorCode.non_empty_group

    group.set_target_assignment_epoch(1)
    assert group.state is S.STABLE and group.validate_delete() is ErrorCode.non_empty_group


def test_as_listed_group():
    group = ConsumerGroup("group-id-1")
    group.set_group_epoch(1)
    group.set_target_assignment_epoch(1)
    listed = group.listed()
    assert (listed.group_id, listed.protocol_type, listed.state, listed.group_type) == (
        "group-id-1",
        "consumer",
        "Empty",
        "consumer",
    )
    group.update_member(member("member1", subscribed_topic_names=["foo"]))
    assert group.listed().state == "Reconciling"


def test_a_new_member_at_the_target_epoch_makes_the_group_stable_at_once():
    # Epochs 0 and a new member's default (STABLE at epoch 0) are reconciled: EMPTY -> STABLE.
    group = ConsumerGroup("foo")
    group.update_member(member("m"))
    assert group.state is S.STABLE


def test_every_live_state_may_follow_every_other_and_dead_only_empty():
    live = [S.EMPTY, S.ASSIGNING, S.RECONCILING, S.STABLE]
    for current in live:
        for target in live:
            current.validate_transition(target)
    for current in (S.ASSIGNING, S.RECONCILING, S.STABLE):
        with pytest.raises(IllegalTransition):
            current.validate_transition(S.DEAD)
    S.EMPTY.validate_transition(S.DEAD)
    for target in live:
        with pytest.raises(IllegalTransition):
            S.DEAD.validate_transition(target)


def test_mark_dead_only_once_members_and_target_assignment_are_gone():
    group = ConsumerGroup("foo")
    group.update_member(member("m", member_epoch=1))
    group.update_target_assignment("m", mk_assignment((FOO_ID, 0)))
    with pytest.raises(IllegalTransition):
        group.mark_dead()
    group.remove_target_assignment("m")
    with pytest.raises(IllegalTransition):
        group.mark_dead()  # still RECONCILING
    group.remove_member("m")
    group.mark_dead()
    assert group.state is S.DEAD and group.listed().state == "Dead"
    # A deleted group takes no more updates.
    for update in (
        lambda: group.update_member(member("m")),
        lambda: group.remove_member("m"),
        lambda: group.set_group_epoch(2),
        lambda: group.set_target_assignment_epoch(2),
        lambda: group.update_target_assignment("m", {}),
        lambda: group.update_resolved_regular_expression("r", ResolvedRegularExpression({"t"})),
    ):
        with pytest.raises(IllegalTransition):
            update()
    assert group.members == {} and group.group_epoch == 0


# -- subscriptions (ConsumerGroupTest) ----------------------------------------------------------------


def test_update_subscribed_topic_names_and_subscription_type():
    member1 = member("member1", subscribed_topic_names=["foo"])
    member2 = member("member2", subscribed_topic_names=["bar", "foo"])
    member3 = member("member3", subscribed_topic_names=["bar", "foo"])
    group = ConsumerGroup("group-foo")

    assert group.subscribed_topic_names == {}
    assert group.subscription_type is HOMOGENEOUS

    group.update_member(member1)
    assert group.subscription_type is HOMOGENEOUS  # one member
    group.update_member(member2)
    assert group.subscription_type is HETEROGENEOUS
    group.update_member(member3)
    assert group.subscription_type is HETEROGENEOUS
    assert group.subscribed_topic_names == {"foo": SubscriptionCount(3, 0), "bar": SubscriptionCount(2, 0)}

    group.remove_member("member1")
    assert group.subscription_type is HOMOGENEOUS

    group.update_member(member("member2", subscribed_topic_names=["bar", "foo", "zar"]))
    assert group.subscription_type is HETEROGENEOUS
    assert group.subscribed_topic_names == {
        "foo": SubscriptionCount(2, 0),
        "bar": SubscriptionCount(2, 0),
        "zar": SubscriptionCount(1, 0),
    }


def test_is_subscribed_to_topic():
    group = ConsumerGroup("group-foo")
    group.update_member(member("member1", subscribed_topic_names=["foo"]))
    group.update_member(member("member2", subscribed_topic_names=["bar"]))
    assert group.is_subscribed_to_topic("foo") and group.is_subscribed_to_topic("bar")
    group.remove_member("member1")
    assert not group.is_subscribed_to_topic("foo")
    group.remove_member("member2")
    assert not group.is_subscribed_to_topic("bar")
    # Ours: a topic matched by a resolved regex counts too (Kafka's map holds both counts).
    group.update_resolved_regular_expression("b.*", ResolvedRegularExpression({"bar"}, 1, 2))
    assert group.is_subscribed_to_topic("bar")


def test_subscribed_regular_expression_count():
    group = ConsumerGroup("foo")
    member1 = member("member1", subscribed_topic_regex="regex1")
    member2 = member("member2", subscribed_topic_regex="regex2")
    member3 = member("member3", subscribed_topic_regex="regex1")
    member4 = member("member4")

    def counts():
        return [group.num_subscribed_members(r) for r in ("", "regex1", "regex2", "regex3")]

    assert counts() == [0, 0, 0, 0]
    group.update_member(member1)
    assert counts() == [0, 1, 0, 0]
    group.update_member(member2)
    assert counts() == [0, 1, 1, 0]
    group.update_member(member3)
    assert counts() == [0, 2, 1, 0]
    group.update_member(member4)
    assert counts() == [0, 2, 1, 0]
    group.update_member(member("member3", subscribed_topic_regex="regex2"))
    assert counts() == [0, 1, 2, 0]
    group.remove_member("member1")
    assert counts() == [0, 0, 2, 0]
    group.remove_member("member2")
    assert counts() == [0, 0, 1, 0]
    group.remove_member("member3")
    assert counts() == [0, 0, 0, 0]
    assert group.subscribed_regular_expressions == {}


def test_update_and_remove_regular_expression():
    group = ConsumerGroup("foo")
    group.update_member(member("member1", subscribed_topic_names=["foo", "bar", "zar"]))
    group.update_member(member("member2", subscribed_topic_names=["foo", "bar"]))
    C = SubscriptionCount
    assert group.subscribed_topic_names == {"foo": C(2, 0), "bar": C(2, 0), "zar": C(1, 0)}

    group.update_resolved_regular_expression("foo|bar", ResolvedRegularExpression({"foo", "bar"}, 10, 12345))
    assert group.subscribed_topic_names == {"foo": C(2, 1), "bar": C(2, 1), "zar": C(1, 0)}

    group.update_resolved_regular_expression("foobar", ResolvedRegularExpression({"foobar"}, 10, 12345))
    assert group.subscribed_topic_names == {"foo": C(2, 1), "bar": C(2, 1), "zar": C(1, 0), "foobar": C(0, 1)}

    group.update_resolved_regular_expression("foo|bar", ResolvedRegularExpression({"foo"}, 10, 12345))
    assert group.subscribed_topic_names == {"foo": C(2, 1), "bar": C(2, 0), "zar": C(1, 0), "foobar": C(0, 1)}

    group.remove_resolved_regular_expression("foo|bar")
    assert group.subscribed_topic_names == {"foo": C(2, 0), "bar": C(2, 0), "zar": C(1, 0), "foobar": C(0, 1)}

    group.remove_resolved_regular_expression("foobar")
    assert group.subscribed_topic_names == {"foo": C(2, 0), "bar": C(2, 0), "zar": C(1, 0)}
    assert group.resolved_regular_expressions == {}


def test_subscription_type_with_regular_expressions():
    C = SubscriptionCount
    # Kafka's ConsumerGroup.subscriptionType(regexes, topic names, members), case by case.
    assert subscription_type({}, {}, 0) is HOMOGENEOUS
    assert subscription_type({}, {"foo": C(2, 0)}, 2) is HOMOGENEOUS
    assert subscription_type({}, {"foo": C(2, 0), "bar": C(1, 0)}, 2) is HETEROGENEOUS
    # Every member on one regex, every topic from that regex alone.
    assert subscription_type({"foo.*": 2}, {"foo1": C(0, 1), "foo2": C(0, 1)}, 2) is HOMOGENEOUS
    assert subscription_type({"foo.*": 2}, {}, 2) is HOMOGENEOUS  # not resolved yet
    # A topic named by a member as well.
    assert subscription_type({"foo.*": 2}, {"foo1": C(1, 1)}, 2) is HETEROGENEOUS
    # A topic matched by two resolved regexes (one no longer subscribed).
    assert subscription_type({"foo.*": 2}, {"foo1": C(0, 2)}, 2) is HETEROGENEOUS
    # Not every member on the regex, or two regexes.
    assert subscription_type({"foo.*": 1}, {"foo1": C(0, 1)}, 2) is HETEROGENEOUS
    assert subscription_type({"foo.*": 1, "bar.*": 1}, {"foo1": C(0, 1), "bar1": C(0, 1)}, 2) is HETEROGENEOUS


def test_subscription_type_follows_members_and_resolved_regexes():
    group = ConsumerGroup("foo")
    group.update_member(member("m1", subscribed_topic_regex="foo.*"))
    group.update_member(member("m2", subscribed_topic_regex="foo.*"))
    assert group.subscription_type is HOMOGENEOUS
    group.update_resolved_regular_expression("foo.*", ResolvedRegularExpression({"foo1", "foo2"}))
    assert group.subscription_type is HOMOGENEOUS
    group.update_member(member("m2", subscribed_topic_regex="foo.*", subscribed_topic_names=["foo1"]))
    assert group.subscription_type is HETEROGENEOUS
    group.update_member(member("m2", subscribed_topic_regex="bar.*"))
    assert group.subscription_type is HETEROGENEOUS
    group.remove_member("m2")
    assert group.subscription_type is HOMOGENEOUS


def test_preferred_server_assignor():
    group = ConsumerGroup("foo")
    assert group.preferred_server_assignor() is None
    group.update_member(member("m1", server_assignor_name="range"))
    group.update_member(member("m2", server_assignor_name="uniform"))
    assert group.preferred_server_assignor() == "range"  # a tie: the first name, ours
    group.update_member(member("m3", server_assignor_name="uniform"))
    assert group.preferred_server_assignor() == "uniform"
    group.update_member(member("m3", server_assignor_name="range"))
    assert group.preferred_server_assignor() == "range"
    group.update_member(member("m3"))
    group.remove_member("m1")
    assert group.preferred_server_assignor() == "uniform"
    group.remove_member("m2")
    assert group.server_assignors == {} and group.preferred_server_assignor() is None


# -- ours -----------------------------------------------------------------------------------------------


def test_group_spec_resolves_names_and_regexes_to_ids_and_carries_the_target():
    group = ConsumerGroup("foo")
    group.update_member(member("b", subscribed_topic_names=["foo", "gone"], rack_id="r1", instance_id="i"))
    group.update_member(member("a", subscribed_topic_regex="ba.*"))
    group.update_member(member("c", subscribed_topic_regex="unresolved", subscribed_topic_names=["zar"]))
    group.update_resolved_regular_expression("ba.*", ResolvedRegularExpression({"bar", "baz-deleted"}))
    group.update_target_assignment("b", mk_assignment((FOO_ID, 0, 1)))
    spec = group.group_spec({"foo": FOO_ID, "bar": BAR_ID, "zar": ZAR_ID})
    assert spec == GroupSpec(
        {
            "a": MemberSpec(frozenset({BAR_ID})),
            "b": MemberSpec(frozenset({FOO_ID}), mk_assignment((FOO_ID, 0, 1)), "r1", "i"),
            "c": MemberSpec(frozenset({ZAR_ID})),
        }
    )
    assert list(spec.members) == ["a", "b", "c"]
    assert spec.is_partition_assigned(FOO_ID, 1) and not spec.is_partition_assigned(FOO_ID, 2)


def test_copy_is_independent():
    group = ConsumerGroup("foo")
    group.update_member(
        member(
            "m1",
            member_epoch=1,
            instance_id="i",
            subscribed_topic_names=["foo"],
            subscribed_topic_regex="r",
            server_assignor_name="range",
            assigned_partitions=mk_assignment((FOO_ID, 0)),
        )
    )
    group.update_resolved_regular_expression("r", ResolvedRegularExpression({"bar"}))
    group.update_target_assignment("m1", mk_assignment((FOO_ID, 0)))
    before = snapshot(group)
    clone = group.copy()
    assert snapshot(clone) == before
    clone.update_member(member("m1", member_epoch=2, assigned_partitions=mk_assignment((FOO_ID, 0, 1))))
    clone.update_member(member("m2", instance_id="j", server_assignor_name="uniform", subscribed_topic_regex="s"))
    clone.remove_resolved_regular_expression("r")
    clone.update_target_assignment("m2", mk_assignment((BAR_ID, 0)))
    clone.set_group_epoch(5)
    assert snapshot(group) == before
    assert snapshot(clone) != before


# -- property: what the group derives always equals a recount from its members --------------------------

TOPIC_IDS = (FOO_ID, BAR_ID, ZAR_ID)
NAMES = ("foo", "bar", "zar", "qux")
REGEXES = ("", "f.*", "b.*")
partitions_st = st.dictionaries(st.sampled_from(TOPIC_IDS), st.frozensets(st.integers(0, 3), min_size=1), max_size=3)
update_st = st.tuples(
    st.just("update"),
    st.integers(0, 3),  # which member
    st.integers(0, 6),  # its epoch
    st.sampled_from([MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS]),
    partitions_st,  # assigned
    partitions_st,  # pending revocation
    st.frozensets(st.sampled_from(NAMES), max_size=3),
    st.sampled_from(REGEXES),
    st.booleans(),  # static
    st.sampled_from([None, "uniform", "range"]),
    st.booleans(),  # claim as drawn, conflicts included
)
op_st = st.one_of(
    update_st,
    st.tuples(st.just("remove"), st.integers(0, 3)),
    st.tuples(st.just("resolve"), st.sampled_from(REGEXES[1:]), st.none() | st.frozensets(st.sampled_from(NAMES))),
    st.tuples(st.just("group_epoch"), st.integers(0, 6)),
    st.tuples(st.just("target_epoch"), st.integers(0, 6)),
)


def owned_by_others(group, member_id):
    out = set()
    for mid, m in group.members.items():
        if mid != member_id:
            for parts in (m.assigned_partitions, m.partitions_pending_revocation):
                out |= {(t, p) for t, ps in parts.items() for p in ps}
    return out


def without(partitions, taken):
    return {t: frozenset(p for p in ps if (t, p) not in taken) for t, ps in partitions.items()}


def check_recount(group):
    # Partition epochs: each partition owned by at most one member, at that member's epoch.
    expected_epochs: dict = {}
    for m in group.members.values():
        for parts in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    assert (t, p) not in expected_epochs, "a partition held twice"
                    expected_epochs[(t, p)] = m.member_epoch
    actual = {(t, p): e for t, ps in group.partition_epochs.items() for p, e in ps.items()}
    assert actual == expected_epochs
    assert all(group.partition_epochs.values()), "an empty topic kept"
    for (t, p), e in expected_epochs.items():
        assert group.current_partition_epoch(t, p) == e
    # Topic-name counts: by name from the members, by regex from the resolved regexes.
    by_name: dict = {}
    by_regex: dict = {}
    for m in group.members.values():
        for name in m.subscribed_topic_names:
            by_name[name] = by_name.get(name, 0) + 1
    for resolved in group.resolved_regular_expressions.values():
        for name in resolved.topics:
            by_regex[name] = by_regex.get(name, 0) + 1
    counts = {n: SubscriptionCount(by_name.get(n, 0), by_regex.get(n, 0)) for n in by_name.keys() | by_regex.keys()}
    assert group.subscribed_topic_names == counts
    regexes: dict = {}
    for m in group.members.values():
        if m.subscribed_topic_regex:
            regexes[m.subscribed_topic_regex] = regexes.get(m.subscribed_topic_regex, 0) + 1
    assert group.subscribed_regular_expressions == regexes
    assignors: dict = {}
    for m in group.members.values():
        if m.server_assignor_name:
            assignors[m.server_assignor_name] = assignors.get(m.server_assignor_name, 0) + 1
    assert group.server_assignors == assignors
    assert group.static_members == {m.instance_id: mid for mid, m in group.members.items() if m.instance_id}
    assert group.subscription_type is subscription_type(regexes, counts, len(group.members))
    if not group.members:
        assert group.state is S.EMPTY
    elif group.group_epoch > group.target_assignment_epoch:
        assert group.state is S.ASSIGNING
    elif all(
        m.state is MemberState.STABLE and m.member_epoch == group.target_assignment_epoch
        for m in group.members.values()
    ):
        assert group.state is S.STABLE
    else:
        assert group.state is S.RECONCILING


@settings(max_examples=300, deadline=None)
@given(st.lists(op_st, max_size=40))
def test_derived_state_always_equals_a_recount_from_the_members(ops):
    group = ConsumerGroup("g")
    for op in ops:
        kind = op[0]
        if kind == "update":
            _, idx, epoch, state, assigned, pending, names, regex, static, assignor, as_drawn = op
            member_id = f"m{idx}"
            if not as_drawn:  # claim only what nobody else holds, and nothing twice
                taken = owned_by_others(group, member_id)
                assigned = without(assigned, taken)
                pending = without(pending, taken | {(t, p) for t, ps in assigned.items() for p in ps})
            new = member(
                member_id,
                member_epoch=epoch,
                state=state,
                assigned_partitions=assigned,
                partitions_pending_revocation=pending,
                subscribed_topic_names=names,
                subscribed_topic_regex=regex,
                instance_id=f"i{idx}" if static else None,
                server_assignor_name=assignor,
            )
            claimed = [
                (t, p)
                for parts in (new.assigned_partitions, new.partitions_pending_revocation)
                for t, ps in parts.items()
                for p in ps
            ]
            conflict = len(claimed) != len(set(claimed)) or bool(set(claimed) & owned_by_others(group, member_id))
            # A static member that changes its instance id leaves its old one mapped (as Kafka
            # does); keep the recount simple by not drawing such changes.
            old = group.member(member_id)
            if old is not None and old.instance_id != new.instance_id:
                group.remove_member(member_id)
            before = snapshot(group)
            if conflict:
                with pytest.raises(PartitionEpochError):
                    group.update_member(new)
                assert snapshot(group) == before
            else:
                group.update_member(new)
        elif kind == "remove":
            group.remove_member(f"m{op[1]}")
        elif kind == "resolve":
            _, regex, topics = op
            if topics is None:
                group.remove_resolved_regular_expression(regex)
            else:
                group.update_resolved_regular_expression(regex, ResolvedRegularExpression(topics))
        elif kind == "group_epoch":
            group.set_group_epoch(op[1])
        else:
            group.set_target_assignment_epoch(op[1])
        check_recount(group)
        assert snapshot(group.copy()) == snapshot(group)
