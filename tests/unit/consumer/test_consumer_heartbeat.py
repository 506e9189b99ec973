"""ConsumerGroupHeartbeat on the shard (KIP-848; Kafka 4.2's GroupMetadataManagerTest consumer-group
tests): join, the group and member epochs, revocation before assignment, leave, static members,
session and rebalance timeouts, regex subscriptions, validation, and a failover's replay."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.classic.messages import OffsetCommitRequest, OffsetFetchRequest
from coordinator.classic.messages import CommitPartition
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from coordinator.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
)
from coordinator.member_state import MemberState
from tests.unit.consumer.context import BAR, FOO, ConsumerContext, assignment_of, topic

NONE = ErrorCode.none


def owners(ctx: ConsumerContext, group_id: str = "g") -> dict:
    """(topic id, partition) -> the members holding it (assigned or still revoking)."""
    out: dict = {}
    for m in ctx.group(group_id).members.values():
        for parts in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    out.setdefault((t, p), set()).add(m.member_id)
    return out


def assert_owned_once(ctx: ConsumerContext, group_id: str = "g") -> None:
    doubled = {tp: ms for tp, ms in owners(ctx, group_id).items() if len(ms) > 1}
    assert not doubled, f"partitions owned twice: {doubled}"


def test_first_member_joins_and_gets_every_partition():
    ctx = ConsumerContext(topic("foo", 3))
    r = ctx.join("m1", ["foo"])
    assert r.error_code == NONE and r.member_id == "m1" and r.member_epoch == 1
    assert assignment_of(r) == {FOO: {0, 1, 2}}
    assert r.heartbeat_interval_ms == 5000
    group = ctx.group()
    assert isinstance(group, ConsumerGroup)
    assert group.state is ConsumerGroupState.STABLE and group.group_epoch == 1 and group.target_assignment_epoch == 1
    # A heartbeat with nothing new answers no assignment.
    r = ctx.heartbeat("m1", 1)
    assert r.error_code == NONE and r.member_epoch == 1 and r.assignment is None


def test_second_member_waits_until_the_first_revokes():
    ctx = ConsumerContext(topic("foo", 4))
    ctx.join("m1", ["foo"])
    r2 = ctx.join("m2", ["foo"])
    # m2 is at the new epoch, but the partitions its target gives it are still m1's.
    assert r2.member_epoch == 2 and assignment_of(r2) == {}
    assert ctx.member("m2").state is MemberState.UNRELEASED_PARTITIONS
    # m1 is asked to revoke half; it stays at its epoch until it has.
    r1 = ctx.heartbeat("m1", 1)
    assert r1.member_epoch == 1 and len(assignment_of(r1)[FOO]) == 2
    assert ctx.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    assert_owned_once(ctx)
    # Still owning the revoked ones: nothing moves.
    r1 = ctx.heartbeat("m1", 1, owned_partitions={FOO: range(4)})
    assert r1.member_epoch == 1
    assert ctx.heartbeat("m2", 2).assignment is None
    # Revoked: m1 moves to epoch 2, and m2 gets the released partitions.
    kept = ctx.member("m1").assigned_partitions[FOO]
    r1 = ctx.heartbeat("m1", 1, owned_partitions={FOO: kept})
    assert r1.member_epoch == 2 and ctx.member("m1").state is MemberState.STABLE
    r2 = ctx.heartbeat("m2", 2)
    assert assignment_of(r2) == {FOO: set(range(4)) - set(kept)}
    assert ctx.group().state is ConsumerGroupState.STABLE
    assert_owned_once(ctx)


def test_previous_epoch_is_accepted_with_owned_partitions_it_still_has():
    ctx = ConsumerContext(topic("foo", 2))
    ctx.join("m1", ["foo"])
    ctx.run(ctx.shard.update_topics((topic("foo", 4),)))  # more partitions: a new epoch
    r = ctx.heartbeat("m1", 1)
    assert r.member_epoch == 2
    # The answer was lost: the member heartbeats with epoch 1 and what it owns.
    r = ctx.heartbeat("m1", 1, owned_partitions={FOO: [0, 1]})
    assert r.error_code == NONE and r.member_epoch == 2
    # Without saying what it owns, the previous epoch is fenced (Kafka's isSubset of null).
    r = ctx.heartbeat("m1", 1)
    assert r.error_code == ErrorCode.fenced_member_epoch
    r = ctx.heartbeat("m1", 3)
    assert r.error_code == ErrorCode.fenced_member_epoch and "greater member epoch (3)" in r.error_message


def test_leave_removes_the_member_and_bumps_the_epoch():
    ctx = ConsumerContext(topic("foo", 2))
    ctx.join("m1", ["foo"])
    ctx.join("m2", ["foo"])
    ctx.take_written()
    r = ctx.leave("m2")
    assert r.error_code == NONE and r.member_id == "m2" and r.member_epoch == -1
    written = ctx.take_written()
    assert [type(w.key).__name__ for w in written][-1] == "ConsumerGroupMetadataKey"
    assert "m2" not in ctx.group().members and ctx.group().group_epoch == 3
    # m1, which never had to give anything up, keeps everything at the next epoch.
    r = ctx.heartbeat("m1", 1, owned_partitions={FOO: ctx.member("m1").assigned_partitions.get(FOO, ())})
    assert r.member_epoch == 3 and r.assignment is None and ctx.member("m1").assigned_partitions == {FOO: {0, 1}}
    assert ctx.leave("nobody").error_code == ErrorCode.unknown_member_id


def test_session_expiry_fences_and_a_member_left_revoking_is_fenced_after_its_rebalance_timeout():
    ctx = ConsumerContext(topic("foo", 2), consumer_session_timeout_ms=45_000)
    ctx.join("m1", ["foo"], rebalance_timeout_ms=10_000)
    ctx.join("m2", ["foo"])
    ctx.heartbeat("m1", 1)  # asked to revoke one partition
    assert ctx.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    ctx.heartbeat("m2", 2)  # keeps m2's session alive
    ctx.advance(10_000)
    assert "m1" not in ctx.group().members  # fenced: it did not revoke within 10 s
    ctx.advance(34_999)
    assert "m2" in ctx.group().members
    ctx.advance(1)
    assert ctx.group().members == {}
    assert ctx.group().state is ConsumerGroupState.EMPTY


def test_static_member_leaves_for_now_and_a_new_instance_takes_its_place():
    ctx = ConsumerContext(topic("foo", 2))
    ctx.join("a", ["foo"], instance_id="i1")
    r = ctx.leave("a", epoch=-2, instance_id="i1")
    assert r.error_code == NONE and r.member_epoch == -2
    assert ctx.member("a").member_epoch == -2 and ctx.group().group_epoch == 1  # no rebalance
    # Another member id with the same instance id takes the place and the partitions.
    r = ctx.join("b", ["foo"], instance_id="i1")
    assert r.error_code == NONE and assignment_of(r) == {FOO: {0, 1}}
    assert set(ctx.group().members) == {"b"} and ctx.group().group_epoch == 1
    # While "b" holds it, a third cannot join with the instance id.
    r = ctx.join("c", ["foo"], instance_id="i1")
    assert r.error_code == ErrorCode.unreleased_instance_id
    r = ctx.heartbeat("a", 1, instance_id="i1")
    assert r.error_code == ErrorCode.fenced_instance_id


def test_validation_answers_invalid_request_and_writes_nothing():
    ctx = ConsumerContext(topic("foo", 1))
    cases = [
        (dict(member_id="", epoch=0), "MemberId can't be empty."),
        (dict(member_id="m", epoch=0, rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
        (dict(member_id="m", epoch=0, owned_partitions=None), "TopicPartitions must be empty when (re-)joining."),
        (dict(member_id="m", epoch=0, topics=None), "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null"),
        (dict(member_id="m", epoch=-3), "MemberEpoch is invalid."),
        (dict(member_id="m", epoch=-2), "InstanceId can't be null."),
    ]
    for kw, message in cases:
        member_id, epoch = kw.pop("member_id"), kw.pop("epoch")
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("owned_partitions", {})
        topics = kw.pop("topics", ["foo"])
        r = ctx.heartbeat(member_id, epoch, topics, **kw)
        assert r.error_code == ErrorCode.invalid_request and r.error_message.startswith(message), (kw, r)
    r = ctx.join("m", ["foo"], assignor="sticky")
    assert r.error_code == ErrorCode.unsupported_assignor
    assert r.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    r = ctx.join("m", regex="foo(")
    assert r.error_code == ErrorCode.invalid_regular_expression
    assert ctx.take_written() == [] and ctx.group() is None
    # v0: the coordinator names the member.
    r = ctx.heartbeat("", 0, ["foo"], rebalance_timeout_ms=30_000, owned_partitions={}, api_version=0)
    assert r.error_code == NONE and r.member_id


def test_unknown_group_and_other_group_types():
    ctx = ConsumerContext(topic("foo", 1))
    r = ctx.heartbeat("m", 3, ["foo"])
    assert r.error_code == ErrorCode.group_id_not_found and r.error_message == "Consumer group g not found."
    ctx.run(ctx.shard.share_group_heartbeat(__import__("coordinator.share.messages", fromlist=["x"]).ShareGroupHeartbeatRequest("s", "m", 0, None, ("foo",), "c", "/h")))
    r = ctx.join("m", ["foo"], group_id="s")
    assert r.error_code == ErrorCode.group_id_not_found and r.error_message == "Group s is not a consumer group."


def test_an_empty_classic_group_of_offsets_becomes_a_consumer_group_and_keeps_them():
    ctx = ConsumerContext(topic("foo", 1))
    commit = OffsetCommitRequest("g", -1, "", None, (("foo", (CommitPartition(0, 42, -1, ""),)),))
    ctx.run(ctx.shard.commit_offsets(commit))
    r = ctx.join("m1", ["foo"])
    assert r.error_code == NONE and isinstance(ctx.group(), ConsumerGroup)
    fetched = ctx.run(ctx.shard.fetch_offsets(OffsetFetchRequest("g", (("foo", (0,)),), member_id="m1", member_epoch=1)))
    assert fetched.error_code == NONE and fetched.topics[0][1][0].offset == 42


def test_offset_commit_and_fetch_check_the_member_epoch():
    ctx = ConsumerContext(topic("foo", 1))
    ctx.join("m1", ["foo"])

    def commit(member_id, epoch, version=9):
        req = OffsetCommitRequest("g", epoch, member_id, None, (("foo", (CommitPartition(0, 5, -1, ""),)),), api_version=version)
        return ctx.run(ctx.shard.commit_offsets(req)).topics[0][1][0][1]

    assert commit("m1", 1) == NONE
    assert commit("m1", 0) == ErrorCode.stale_member_epoch
    assert commit("m9", 1) == ErrorCode.unknown_member_id
    assert commit("m1", 1, version=8) == ErrorCode.unsupported_version
    assert commit("", -1) == ErrorCode.unknown_member_id  # outside group management, but members exist

    def fetch(member_id, epoch):
        return ctx.run(ctx.shard.fetch_offsets(OffsetFetchRequest("g", (("foo", (0,)),), member_id=member_id, member_epoch=epoch)))

    assert fetch("m1", 1).error_code == NONE and fetch("m1", 1).topics[0][1][0].offset == 5
    assert fetch("m1", 2).error_code == ErrorCode.stale_member_epoch
    assert fetch("zz", 1).error_code == ErrorCode.unknown_member_id
    assert fetch(None, -1).error_code == NONE  # an admin


def test_regex_subscription_resolves_and_picks_up_a_later_topic():
    ctx = ConsumerContext(topic("orders-a", 1), topic("payments", 1))
    r = ctx.join("m1", regex="orders-.*")
    assert r.error_code == NONE
    assert {ctx.shard.topics_image.by_id[t].name for t in assignment_of(r)} == {"orders-a"}
    assert any(isinstance(w.key, ConsumerGroupRegularExpressionKey) for w in ctx.log)
    epoch = r.member_epoch
    # A topic created later: found at the first heartbeat at least 10 s after the last resolution.
    ctx.advance(5_000)
    ctx.run(ctx.shard.update_topics((topic("orders-a", 1), topic("payments", 1), topic("orders-b", 2))))
    r = ctx.heartbeat("m1", epoch)
    assert r.member_epoch == epoch and r.assignment is None
    ctx.advance(5_001)
    r = ctx.heartbeat("m1", epoch)
    assert r.member_epoch == epoch + 1
    assert {ctx.shard.topics_image.by_id[t].name for t in assignment_of(r)} == {"orders-a", "orders-b"}
    # Leaving, the last member of the regex tombstones it.
    ctx.leave("m1")
    assert ctx.group().resolved_regular_expressions == {}


def test_describe_list_and_delete():
    ctx = ConsumerContext(topic("foo", 2))
    ctx.join("m1", ["foo"], assignor="range")
    [d] = ctx.describe("g")
    assert d.error_code == NONE and d.group_state == "Stable" and d.assignor_name == "range"
    assert d.group_epoch == 1 and d.assignment_epoch == 1
    [m] = d.members
    assert m.member_id == "m1" and m.assignment == ((FOO, "foo", (0, 1)),) and m.target_assignment == m.assignment
    [missing] = ctx.describe("nope")
    assert missing.error_code == ErrorCode.group_id_not_found
    listed = ctx.run(ctx.shard.list_groups((), ("consumer",)))
    assert [(x.group_id, x.group_type, x.state) for x in listed] == [("g", "consumer", "Stable")]
    [deleted] = ctx.run(ctx.shard.delete_groups(("g",)))
    assert deleted.error_code == ErrorCode.non_empty_group
    ctx.leave("m1")
    [deleted] = ctx.run(ctx.shard.delete_groups(("g",)))
    assert deleted.error_code == NONE and ctx.group() is None
    assert isinstance(ctx.log[-1].key, ConsumerGroupMetadataKey) and ctx.log[-1].value is None


def test_replay_rebuilds_every_group_and_load_keeps_epochs():
    ctx = ConsumerContext(topic("foo", 4), topic("bar", 2))
    ctx.join("m1", ["foo", "bar"])
    ctx.join("m2", ["foo"])
    ctx.heartbeat("m1", 1)
    ctx.join("s", ["bar"], instance_id="i", group_id="h")
    fresh = ctx.replayed(load=True)
    assert fresh.durable_view() == ctx.shard.durable_view()
    for gid in ("g", "h"):
        assert fresh.groups[gid].partition_epochs == ctx.shard.groups[gid].partition_epochs
    assert any(isinstance(w.key, ConsumerGroupCurrentMemberAssignmentKey) for w in ctx.log)


@pytest.mark.parametrize("assignor_name", ["uniform", "range"])
def test_churn_never_owns_a_partition_twice(assignor_name):
    """Members join, heartbeat and leave in a fixed pseudo-random order, each reporting exactly
    what it was last told it owns: at no point do two members hold one partition."""
    import random

    rnd = random.Random(7)
    ctx = ConsumerContext(topic("foo", 6), topic("bar", 3))
    epochs: dict[str, int] = {}
    owned: dict[str, dict] = {}
    for step in range(300):
        choice = rnd.random()
        if choice < 0.15 and len(epochs) < 6:
            mid = f"m{step}"
            r = ctx.join(mid, rnd.choice([["foo"], ["bar"], ["foo", "bar"]]), assignor=assignor_name)
        elif choice < 0.22 and epochs:
            mid = rnd.choice(sorted(epochs))
            ctx.leave(mid)
            epochs.pop(mid), owned.pop(mid)
            continue
        elif epochs:
            mid = rnd.choice(sorted(epochs))
            r = ctx.heartbeat(mid, epochs[mid], owned_partitions=owned[mid])
        else:
            continue
        assert r.error_code == NONE, r
        epochs[mid] = r.member_epoch
        if r.assignment is not None:
            owned[mid] = {t: list(ps) for t, ps in r.assignment}
        owned.setdefault(mid, {})
        assert_owned_once(ctx)
        ctx.advance(100)


def test_offset_delete_of_a_consumer_group_spares_the_topics_it_subscribes_to():
    from coordinator.classic.offset_delete import OffsetDeleteRequest

    ctx = ConsumerContext(topic("foo", 1), topic("bar", 1))
    ctx.join("m1", ["foo"])
    for name in ("foo", "bar"):
        req = OffsetCommitRequest("g", 1, "m1", None, ((name, (CommitPartition(0, 5, -1, ""),)),), api_version=9)
        assert ctx.run(ctx.shard.commit_offsets(req)).topics[0][1][0][1] == NONE
    answer = ctx.run(ctx.shard.delete_offsets(OffsetDeleteRequest("g", (("foo", (0,)), ("bar", (0,))))))
    assert answer.error_code == NONE
    assert dict(answer.topics) == {"foo": ((0, ErrorCode.group_subscribed_to_topic),), "bar": ((0, NONE),)}
    assert set(ctx.shard.offsets["g"]) == {("foo", 0)}


def test_a_groups_own_session_timeout_and_heartbeat_interval_apply_from_its_next_heartbeat():
    from coordinator.config import GroupConfig

    ctx = ConsumerContext(topic("foo", 1))
    assert ctx.join("m1", ["foo"]).heartbeat_interval_ms == 5000
    ctx.shard.group_config_manager.update({"g": GroupConfig(consumer_session_timeout_ms=50_000, consumer_heartbeat_interval_ms=6_000)})
    assert ctx.heartbeat("m1", 1).heartbeat_interval_ms == 6_000
    ctx.advance(49_999)
    assert "m1" in ctx.group().members
    ctx.advance(1)
    assert "m1" not in ctx.group().members


def test_a_fenced_member_rejoins_with_epoch_zero_and_keeps_its_place():
    """KAFKA-19233: epoch 0 from a member the coordinator still holds is a rejoin, not a fencing."""
    ctx = ConsumerContext(topic("foo", 2))
    ctx.join("m1", ["foo"])
    ctx.join("m2", ["foo"])
    ctx.heartbeat("m1", 1)  # asked to revoke one partition, still at epoch 1
    assert ctx.heartbeat("m1", 7).error_code == ErrorCode.fenced_member_epoch
    r = ctx.join("m1", ["foo"])  # it gave everything up and comes back at epoch 0, same id
    assert r.error_code == NONE and r.member_id == "m1" and r.assignment is not None
    assert set(ctx.group().members) == {"m1", "m2"}
    assert_owned_once(ctx)


def test_dropping_a_regex_bumps_the_group_epoch():
    """KAFKA-19899: a member that goes from a regex to none loses the regex's topics at once, even
    when another member still names them (so the subscribed topics' metadata hash is the same)."""
    ctx = ConsumerContext(topic("orders-a", 2), topic("foo", 1))
    ctx.join("m1", ["foo"], regex="orders-.*")
    ctx.join("m2", ["orders-a"])
    group_epoch = ctx.group().group_epoch
    r = ctx.heartbeat("m1", ctx.member("m1").member_epoch, regex="")
    assert ctx.group().group_epoch == group_epoch + 1 and ctx.group().resolved_regular_expressions == {}
    assert {ctx.shard.topics_image.by_id[t].name for t in assignment_of(r)} <= {"foo"}
    assert_owned_once(ctx)
