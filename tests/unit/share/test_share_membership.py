"""Share-group membership through ShareGroupHeartbeat: join, heartbeat, leave, epochs and fencing, group
size, session expiry, the assignment in the response, and share-state initialization (SPEC §3, seed 001
§5; Kafka 4.x GroupMetadataManagerTest's share-group tests)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kernel.codec import Record
from coordinator.records import (
    share_current_assignment_record,
    share_current_assignment_tombstone,
    share_group_epoch_record,
    share_member_subscription_record,
    share_member_subscription_tombstone,
    share_state_partition_metadata_record,
    share_target_assignment_epoch_record,
    share_target_assignment_record,
    share_target_assignment_tombstone,
)
from coordinator.share.group import InitMapValue, ShareGroupMember, ShareGroupState
from coordinator.share.heartbeat import session_key
from coordinator.share.messages import ShareStateInit
from coordinator.share.metadata import TopicsImage, metadata_hash
from tests.unit.share.context import BAR, FOO, ShareContext, classic_group, topic

NONE = ErrorCode.none
NOW = 1_000_000
HOST = "/127.0.0.1"


def hash_of(ctx: ShareContext, *names: str) -> int:
    return metadata_hash(names, ctx.shard.topics_image)


def member(member_id: str, epoch: int, previous: int, topics=("foo",), assigned=None) -> ShareGroupMember:
    return ShareGroupMember(
        member_id,
        member_epoch=epoch,
        previous_member_epoch=previous,
        client_id="client",
        client_host=HOST,
        subscribed_topic_names=frozenset(topics),
        assigned_partitions={t: frozenset(ps) for t, ps in (assigned or {}).items()},
    )


def initializing(name, topic_id, partitions, ts=NOW) -> dict:
    return {topic_id: InitMapValue(name, frozenset(partitions), ts)}


def inits(topic_id, partitions, epoch, group_id="g") -> tuple[ShareStateInit, ...]:
    return tuple(ShareStateInit(group_id, topic_id, p, epoch, -1) for p in partitions)


def stable_member(ctx: ShareContext, member_id: str = "m1", topics=("foo",)) -> int:
    """Join, initialize everything asked for, heartbeat once more: the member holds its partitions."""
    ctx.join(member_id, topics)
    ctx.initialize()
    epoch = ctx.member(member_id).member_epoch
    return ctx.heartbeat(member_id, epoch).response.member_epoch


# -- join, initialization, first assignment ----------------------------------------------------------


def test_first_join_creates_the_group_records_everything_and_asks_for_share_state_initialization():
    ctx = ShareContext(topic("foo", 3), topic("bar", 2))
    outcome = ctx.join("m1", ["foo", "bar"], rack="r1")
    response = outcome.response
    assert (response.error_code, response.member_id, response.member_epoch) == (NONE, "m1", 1)
    assert response.heartbeat_interval_ms == 5000
    # Nothing is initialized yet, so nothing is assigned; the join still gets its (empty) assignment.
    assert response.assignment == ()
    joined = ShareGroupMember(
        "m1", rack_id="r1", client_id="client", client_host=HOST, subscribed_topic_names=frozenset({"foo", "bar"})
    )
    assert ctx.take_written() == [
        share_member_subscription_record("g", joined),
        share_group_epoch_record("g", 1, hash_of(ctx, "foo", "bar")),
        share_target_assignment_record("g", "m1", {}),
        share_target_assignment_epoch_record("g", 1),
        share_current_assignment_record(
            "g",
            ShareGroupMember(
                "m1", 1, 0, rack_id="r1", client_id="client", client_host=HOST,
                subscribed_topic_names=frozenset({"foo", "bar"}),
            ),
        ),
        share_state_partition_metadata_record(
            "g", {**initializing("foo", FOO, [0, 1, 2]), **initializing("bar", BAR, [0, 1])}, {}, {}
        ),
    ]
    # Sorted by topic id (BAR < FOO), state epoch = group epoch, start offset -1.
    assert outcome.initialize == inits(BAR, [0, 1], 1) + inits(FOO, [0, 1, 2], 1)
    group = ctx.group()
    assert group.state is ShareGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)


def test_initialized_partitions_are_assigned_by_the_next_heartbeat():
    ctx = ShareContext(topic("foo", 3))
    ctx.join("m1", ["foo"])
    ctx.take_written()
    ctx.clock.advance(10)
    ctx.initialize()
    assert ctx.take_written() == [
        share_state_partition_metadata_record("g", {}, initializing("foo", FOO, [0, 1, 2], NOW + 10), {})
    ]
    outcome = ctx.heartbeat("m1", 1)
    assert outcome.initialize == ()
    assert outcome.response.member_epoch == 2
    assert outcome.response.assignment == ((FOO, (0, 1, 2)),)
    assert ctx.take_written() == [
        share_group_epoch_record("g", 2, hash_of(ctx, "foo")),
        share_target_assignment_record("g", "m1", {FOO: {0, 1, 2}}),
        share_target_assignment_epoch_record("g", 2),
        share_current_assignment_record("g", member("m1", 2, 1, assigned={FOO: {0, 1, 2}})),
    ]
    # A plain heartbeat afterwards changes nothing and carries no assignment.
    again = ctx.heartbeat("m1", 2)
    assert (again.response.member_epoch, again.response.assignment, again.initialize) == (2, None, ())
    assert ctx.take_written() == []


def test_a_second_member_shares_the_work_and_the_first_gets_its_change_on_its_next_heartbeat():
    ctx = ShareContext(topic("foo", 4))
    stable_member(ctx, "m1")
    ctx.take_written()
    joined = ctx.join("m2", ["foo"])
    assert joined.response.member_epoch == 3
    assert joined.response.assignment == ((FOO, (2, 3)),)
    assert joined.initialize == ()  # everything is initialized already
    assert ctx.take_written() == [
        share_member_subscription_record("g", member("m2", 0, -1)),
        share_group_epoch_record("g", 3, hash_of(ctx, "foo")),
        share_target_assignment_record("g", "m1", {FOO: {0, 1}}),
        share_target_assignment_record("g", "m2", {FOO: {2, 3}}),
        share_target_assignment_epoch_record("g", 3),
        share_current_assignment_record("g", member("m2", 3, 0, assigned={FOO: {2, 3}})),
    ]
    # m1 still holds all four until it heartbeats with its (now previous) epoch 2.
    assert ctx.member("m1").assigned_partitions == {FOO: frozenset({0, 1, 2, 3})}
    hb = ctx.heartbeat("m1", 2)
    assert (hb.response.member_epoch, hb.response.assignment) == (3, ((FOO, (0, 1)),))
    assert ctx.take_written() == [share_current_assignment_record("g", member("m1", 3, 2, assigned={FOO: {0, 1}}))]


# -- request validation, unknown groups and members, epochs -------------------------------------------


@pytest.mark.parametrize(
    ("group_id", "member_id", "epoch", "rack", "topics", "message"),
    [
        ("g", "", 0, None, ("foo",), "MemberId can't be empty."),
        ("", "m1", 0, None, ("foo",), "GroupId can't be empty."),
        ("g", "m1", 0, "", ("foo",), "RackId can't be empty."),
        ("g", "m1", 0, None, None, "SubscribedTopicNames must be set in first request."),
        ("g", "m1", 0, None, (), "SubscribedTopicNames must be set in first request."),
        ("g", "m1", -2, None, None, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(group_id, member_id, epoch, rack, topics, message):
    ctx = ShareContext(topic("foo", 1))
    outcome = ctx.heartbeat(member_id, epoch, topics, group_id=group_id, rack=rack)
    assert (outcome.response.error_code, outcome.response.error_message) == (ErrorCode.invalid_request, message)
    assert (outcome.response.member_id, outcome.response.assignment, outcome.initialize) == (None, None, ())
    assert ctx.take_written() == [] and ctx.group(group_id) is None


def test_unknown_group_and_unknown_member():
    ctx = ShareContext(topic("foo", 1))
    assert ctx.heartbeat("m1", 1).response.error_code == ErrorCode.group_id_not_found
    assert ctx.leave("m1").response.error_code == ErrorCode.group_id_not_found
    ctx.join("m1", ["foo"])
    ctx.take_written()
    assert ctx.heartbeat("ghost", 1).response.error_code == ErrorCode.unknown_member_id
    assert ctx.leave("ghost").response.error_code == ErrorCode.unknown_member_id
    assert ctx.take_written() == []


def test_fencing_by_member_epoch_accepts_the_previous_epoch():
    ctx = ShareContext(topic("foo", 2))
    assert stable_member(ctx, "m1") == 2  # epochs: 0 -> 1 (join) -> 2 (assignment); previous is 1
    ctx.take_written()
    ahead = ctx.heartbeat("m1", 3).response
    assert ahead.error_code == ErrorCode.fenced_member_epoch
    assert "greater member epoch (3)" in ahead.error_message
    assert ctx.heartbeat("m1", 0, ["foo"]).response.error_code == NONE  # epoch 0 always (re)joins
    # The previous epoch (1): its response may have been lost, so it is accepted and told the current one.
    previous = ctx.heartbeat("m1", 1).response
    assert (previous.error_code, previous.member_epoch) == (NONE, 2)
    ctx.join("m2", ["foo"])  # epoch 3; m1's current epoch 2, previous 1
    ctx.heartbeat("m1", 2)  # m1 moves to 3, previous 2
    too_old = ctx.heartbeat("m1", 1).response
    assert too_old.error_code == ErrorCode.fenced_member_epoch
    assert "does not match the previous member epoch (2)" in too_old.error_message
    assert ctx.heartbeat("m1", 2).response.member_epoch == 3


def test_rejoin_with_epoch_zero_keeps_the_member_and_returns_its_assignment():
    ctx = ShareContext(topic("foo", 2))
    stable_member(ctx, "m1")
    ctx.take_written()
    rejoined = ctx.join("m1", ["foo"])
    assert (rejoined.response.member_epoch, rejoined.response.assignment) == (2, ((FOO, (0, 1)),))
    assert ctx.take_written() == []


def test_a_full_request_gets_the_assignment_even_when_unchanged():
    ctx = ShareContext(topic("foo", 2))
    stable_member(ctx, "m1")
    full = ctx.heartbeat("m1", 2, ["foo"])
    assert full.response.assignment == ((FOO, (0, 1)),)
    assert ctx.heartbeat("m1", 2).response.assignment is None


# -- leave, session expiry, group size ------------------------------------------------------------------


def test_leave_tombstones_the_member_and_bumps_the_group_epoch():
    ctx = ShareContext(topic("foo", 2), topic("bar", 1))
    stable_member(ctx, "m1")
    ctx.join("m2", ["bar"])
    ctx.take_written()
    group_epoch = ctx.group().group_epoch
    left = ctx.leave("m2").response
    assert (left.error_code, left.member_id, left.member_epoch, left.assignment) == (NONE, "m2", -1, None)
    assert ctx.take_written() == [
        share_current_assignment_tombstone("g", "m2"),
        share_target_assignment_tombstone("g", "m2"),
        share_member_subscription_tombstone("g", "m2"),
        share_group_epoch_record("g", group_epoch + 1, hash_of(ctx, "foo")),
    ]
    assert "m2" not in ctx.group().members and "m2" not in ctx.group().target_assignment
    assert not ctx.timer.is_scheduled(session_key("g", "m2"))
    ctx.leave("m1")
    group = ctx.group()
    assert group.state is ShareGroupState.EMPTY and group.group_epoch == group_epoch + 2
    assert group.metadata_hash == 0


def test_session_expiry_is_a_leave_and_heartbeats_keep_the_member_alive():
    ctx = ShareContext(topic("foo", 2), share_session_timeout_ms=45_000)
    stable_member(ctx, "m1")
    ctx.join("m2", ["foo"])
    epoch = ctx.group().group_epoch
    ctx.advance(30_000)
    ctx.heartbeat("m1", ctx.member("m1").member_epoch)  # m1 alive; m2 silent since it joined
    ctx.take_written()
    ctx.advance(14_999)
    assert set(ctx.group().members) == {"m1", "m2"}
    ctx.advance(1)
    assert set(ctx.group().members) == {"m1"}
    assert ctx.take_written() == [
        share_current_assignment_tombstone("g", "m2"),
        share_target_assignment_tombstone("g", "m2"),
        share_member_subscription_tombstone("g", "m2"),
        share_group_epoch_record("g", epoch + 1, hash_of(ctx, "foo")),
    ]
    # The survivor takes m2's partition on its next heartbeat. Kafka bumps the epoch once more there:
    # the initialized partition 1 is in nobody's target any more (initializedAssignmentPending).
    hb = ctx.heartbeat("m1", ctx.member("m1").member_epoch)
    assert (hb.response.member_epoch, hb.response.assignment) == (epoch + 2, ((FOO, (0, 1)),))
    ctx.advance(44_999)
    assert ctx.group().state is ShareGroupState.STABLE
    ctx.advance(1)
    assert ctx.group().state is ShareGroupState.EMPTY


def test_group_max_size():
    ctx = ShareContext(topic("foo", 1), share_max_size=2)
    ctx.join("m1", ["foo"])
    ctx.join("m2", ["foo"])
    ctx.take_written()
    full = ctx.join("m3", ["foo"]).response
    assert full.error_code == ErrorCode.group_max_size_reached
    assert full.error_message == "The share group has reached its maximum capacity of 2 members."
    assert ctx.take_written() == [] and "m3" not in ctx.group().members
    assert ctx.heartbeat("m1", ctx.member("m1").member_epoch).response.error_code == NONE  # members still welcome
    ctx.leave("m2")
    assert ctx.join("m3", ["foo"]).response.error_code == NONE


# -- rebalances: subscription and metadata changes -------------------------------------------------------


def test_a_subscription_change_bumps_the_epoch_and_the_member_keeps_only_subscribed_topics():
    ctx = ShareContext(topic("foo", 2), topic("bar", 2))
    stable_member(ctx, "m1", ("foo", "bar"))
    assert ctx.member("m1").assigned_partitions == {FOO: frozenset({0, 1}), BAR: frozenset({0, 1})}
    ctx.take_written()
    changed = ctx.heartbeat("m1", 2, ["bar"])
    assert (changed.response.member_epoch, changed.response.assignment) == (3, ((BAR, (0, 1)),))
    assert changed.initialize == ()
    assert ctx.take_written() == [
        share_member_subscription_record("g", member("m1", 2, 1, ("bar",), {FOO: {0, 1}, BAR: {0, 1}})),
        share_group_epoch_record("g", 3, hash_of(ctx, "bar")),
        share_target_assignment_record("g", "m1", {BAR: {0, 1}}),
        share_target_assignment_epoch_record("g", 3),
        share_current_assignment_record("g", member("m1", 3, 2, ("bar",), {BAR: {0, 1}})),
    ]


def test_more_partitions_change_the_metadata_hash_bump_the_epoch_and_are_initialized_before_assigned():
    ctx = ShareContext(topic("foo", 2))
    stable_member(ctx, "m1")
    ctx.take_written()
    ctx.set_topics(topic("foo", 4))
    assert ctx.take_written() == []  # the image is not a record
    hb = ctx.heartbeat("m1", 2)
    assert hb.response.member_epoch == 3
    assert hb.response.assignment is None  # still the two initialized partitions
    assert hb.initialize == inits(FOO, [2, 3], 3)
    assert ctx.take_written() == [
        share_group_epoch_record("g", 3, hash_of(ctx, "foo")),
        share_target_assignment_epoch_record("g", 3),
        share_current_assignment_record("g", member("m1", 3, 2, assigned={FOO: {0, 1}})),
        share_state_partition_metadata_record(
            "g", initializing("foo", FOO, [2, 3]), initializing("foo", FOO, [0, 1]), {}
        ),
    ]
    ctx.initialize()
    hb = ctx.heartbeat("m1", 3)
    assert (hb.response.member_epoch, hb.response.assignment) == (4, ((FOO, (0, 1, 2, 3)),))


def test_a_subscription_to_a_topic_that_does_not_exist_yet_is_picked_up_when_it_appears():
    ctx = ShareContext(topic("foo", 1))
    stable_member(ctx, "m1", ("foo", "bar"))
    assert ctx.group().metadata_hash == hash_of(ctx, "foo")
    ctx.set_topics(topic("foo", 1), topic("bar", 2))
    hb = ctx.heartbeat("m1", 2)
    assert hb.response.member_epoch == 3 and hb.initialize == inits(BAR, [0, 1], 3)
    ctx.initialize()
    hb = ctx.heartbeat("m1", 3)
    assert hb.response.assignment == ((BAR, (0, 1)), (FOO, (0,)))


# -- initialization failures and retries ----------------------------------------------------------------


def test_a_failed_initialization_is_forgotten_and_asked_again_by_the_next_heartbeat():
    ctx = ShareContext(topic("foo", 2))
    ctx.join("m1", ["foo"])
    first = list(ctx.pending_inits)
    ctx.take_written()
    ctx.initialize([first[0]], ErrorCode.coordinator_not_available)
    assert ctx.take_written() == [share_state_partition_metadata_record("g", initializing("foo", FOO, [1]), {}, {})]
    hb = ctx.heartbeat("m1", 1)
    assert hb.initialize == inits(FOO, [0], 1)
    assert ctx.take_written() == [share_state_partition_metadata_record("g", initializing("foo", FOO, [0, 1]), {}, {})]
    ctx.initialize([first[1]])
    ctx.initialize(hb.initialize)
    assert ctx.heartbeat("m1", 1).response.assignment == ((FOO, (0, 1)),)


def test_an_initialization_without_answer_is_asked_again_only_after_the_retry_interval():
    ctx = ShareContext(topic("foo", 2), share_initialize_retry_interval_ms=30_000)
    ctx.join("m1", ["foo"])
    ctx.pending_inits.clear()  # the answer never comes
    ctx.take_written()
    ctx.clock.advance(29_999)
    assert ctx.heartbeat("m1", 1).initialize == ()
    assert ctx.take_written() == []
    ctx.clock.advance(1)
    retried = ctx.heartbeat("m1", 1)
    assert retried.initialize == inits(FOO, [0, 1], 1)
    assert ctx.take_written() == [
        share_state_partition_metadata_record("g", initializing("foo", FOO, [0, 1], NOW + 30_000), {}, {})
    ]
    # Answers to the first and the second attempt both arrive: the second one changes nothing.
    ctx.initialize(retried.initialize)
    ctx.take_written()
    ctx.initialize(retried.initialize)
    assert ctx.take_written() == []


def test_answers_for_unknown_groups_or_partitions_change_nothing():
    ctx = ShareContext(topic("foo", 1))
    ctx.initialize(inits(FOO, [0], 1, group_id="nope"))
    stable_member(ctx, "m1")
    ctx.take_written()
    ctx.initialize(inits(FOO, [0, 7], 1))
    assert ctx.take_written() == []


# -- the SimpleAssignor's worked examples (seed 001 §5-2-1-2) through the heartbeat path -------------------


def settle(ctx: ShareContext, member_ids) -> None:
    for _ in range(2):
        for mid in member_ids:
            ctx.heartbeat(mid, ctx.member(mid).member_epoch)


@pytest.mark.parametrize(
    ("members", "partitions", "sharing", "counts"),
    [
        (3, 7, 1, [3, 2, 2]),  # fewer members than partitions: nothing is shared
        (6, 4, 2, [2, 1, 1, 2, 1, 1]),  # ceil(6/4) = 2: members 1 and 4 get two partitions
        (7, 3, 3, [2, 1, 1, 2, 1, 1, 1]),  # ceil(7/3) = 3
    ],
)
def test_simple_assignor_worked_examples(members, partitions, sharing, counts):
    ctx = ShareContext(topic("foo", partitions))
    member_ids = [f"m{i}" for i in range(1, members + 1)]
    for mid in member_ids:
        ctx.join(mid, ["foo"])
    ctx.initialize()
    settle(ctx, member_ids)
    group = ctx.group()
    assert all(ctx.member(mid).member_epoch == group.group_epoch == group.assignment_epoch for mid in member_ids)
    assigned = [ctx.member(mid).assigned_partitions.get(FOO, frozenset()) for mid in member_ids]
    assert [len(a) for a in assigned] == counts
    for p in range(partitions):
        assert sum(p in a for a in assigned) == sharing


# -- ShareGroupDescribe ----------------------------------------------------------------------------------


def test_share_group_describe():
    ctx = ShareContext(topic("foo", 2))
    stable_member(ctx, "m1")
    ctx.join("m2", ["foo"], rack="r2", client_id="c2")
    classic_group(ctx, "classic")
    described = ctx.describe("g", "unknown", "classic", "")
    g, unknown, classic, empty = described
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (NONE, "Stable", 3, 3, "simple")
    m1, m2 = g.members
    assert (m1.member_id, m1.member_epoch, m1.assignment) == ("m1", 2, ((FOO, "foo", (0, 1)),))
    assert (m2.member_id, m2.rack_id, m2.client_id, m2.member_epoch, m2.subscribed_topic_names) == ("m2", "r2", "c2", 3, ("foo",))
    assert m2.assignment == ((FOO, "foo", (1,)),)
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.group_id_not_found, "Group unknown not found.")
    assert (classic.error_code, classic.error_message) == (ErrorCode.group_id_not_found, "Group classic is not a share group.")
    assert empty.error_code == ErrorCode.invalid_group_id


def test_topics_image_helpers():
    image = TopicsImage.of([topic("foo", 2)])
    assert image.topic_ids(["foo", "missing"]) == frozenset({FOO})
    assert metadata_hash([], image) == 0 and metadata_hash(["missing"], image) == 0
    assert metadata_hash(["foo"], image) != metadata_hash(["foo"], TopicsImage.of([topic("foo", 3)]))


def test_records_round_trip_through_the_codec():
    from coordinator.records import CODEC

    ctx = ShareContext(topic("foo", 2))
    stable_member(ctx, "m1")
    ctx.leave("m1")
    for record in ctx.log:
        key, value = CODEC.encode(record)
        assert CODEC.decode(key, value) == record, record
    assert isinstance(ctx.log[0], Record)
