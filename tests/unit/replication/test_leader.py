"""The leader's side against Kafka's Partition.scala / Replica.scala (and PartitionTest, ReplicaTest)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from cluster.replication.epochs import UNDEFINED_EPOCH, EpochEntry, LeaderEpochCache
from cluster.replication.leader import (
    NO_OFFSET,
    FetchVerdict,
    FollowerProgress,
    LeaderState,
    check_leader_epoch,
)
from cluster.replication.registration import PartitionRegistration, alter_partition

LEADER = 1
EPOCH = 5
LAG = 100
T0 = 10_000  # well past LAG, so "caught up at time 0" means nothing


def leader(
    replicas=(1, 2, 3),
    isr=None,
    *,
    log_start=0,
    log_end=10,
    hw=10,
    now=T0,
    min_isr=1,
    lag=LAG,
    leader_epoch=EPOCH,
    partition_epoch=3,
    epochs=None,
) -> LeaderState:
    isr = tuple(replicas) if isr is None else tuple(isr)
    registration = PartitionRegistration(tuple(replicas), isr, LEADER, leader_epoch, partition_epoch)
    cache = LeaderEpochCache([EpochEntry(0, 0)]) if epochs is None else epochs
    return LeaderState(LEADER, registration, cache, log_start, log_end, hw, now, min_isr, lag)


def fetch(state: LeaderState, replica: int, offset: int, now: int = T0, *, incarnation=None, epoch=None, last_epoch=None):
    """A follower fetch from `offset` under the leader's epoch (by default) and without a last fetched epoch."""
    return state.follower_fetch(
        replica,
        replica * 10 if incarnation is None else incarnation,
        state.leader_epoch if epoch is None else epoch,
        offset,
        UNDEFINED_EPOCH if last_epoch is None else last_epoch,
        now,
    )


def registration(state: LeaderState, isr, partition_epoch=None) -> PartitionRegistration:
    return PartitionRegistration(
        state.replicas,
        tuple(isr),
        LEADER,
        state.leader_epoch,
        state.partition_epoch + 1 if partition_epoch is None else partition_epoch,
    )


def pending_expansion() -> LeaderState:
    """ISR {1, 2}; replica 3 caught up at T0 and its expansion is in flight; the log then grew to
    20 and replica 2 has it all."""
    state = leader(isr=(1, 2))
    fetch(state, 3, 10)
    change = state.maybe_expand_isr(3)
    assert change is not None and change.new_isr == (1, 2, 3)
    state.appended(20, T0)
    fetch(state, 2, 20)
    return state


# -- check_leader_epoch ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_epoch, expected",
    [
        (-1, None),
        (5, None),
        (4, ErrorCode.fenced_leader_epoch),
        (6, ErrorCode.unknown_leader_epoch),
    ],
)
def test_check_leader_epoch(request_epoch, expected):
    assert check_leader_epoch(request_epoch, 5) is expected


# -- FollowerProgress (Replica.updateFetchStateOrThrow) ----------------------------------------


def test_progress_starts_unknown():
    p = FollowerProgress()
    assert p.log_end_offset == NO_OFFSET
    assert p.last_fetch_leader_end_offset == NO_OFFSET


def test_progress_fetch_behind_the_log_end_is_not_caught_up():
    p = FollowerProgress()
    p.fetched(5, now_ms=1_000, leader_end_offset=10, incarnation=7)
    assert p.last_caught_up_ms == 0
    assert (p.log_end_offset, p.last_fetch_leader_end_offset, p.last_fetch_ms, p.incarnation) == (5, 10, 1_000, 7)


def test_progress_fetch_at_previous_log_end_is_caught_up_as_of_previous_fetch():
    p = FollowerProgress()
    p.fetched(5, now_ms=1_000, leader_end_offset=10, incarnation=7)
    p.fetched(10, now_ms=2_000, leader_end_offset=15, incarnation=7)
    assert p.last_caught_up_ms == 1_000


def test_progress_fetch_at_the_log_end_is_caught_up_now():
    p = FollowerProgress()
    p.fetched(5, now_ms=1_000, leader_end_offset=10, incarnation=7)
    p.fetched(10, now_ms=2_000, leader_end_offset=15, incarnation=7)
    p.fetched(15, now_ms=3_000, leader_end_offset=15, incarnation=7)
    assert p.last_caught_up_ms == 3_000
    assert p.log_end_offset == 15


def test_progress_fetch_below_previous_log_end_keeps_last_caught_up():
    p = FollowerProgress(last_caught_up_ms=500)
    p.fetched(5, now_ms=1_000, leader_end_offset=10, incarnation=7)
    p.fetched(8, now_ms=2_000, leader_end_offset=12, incarnation=7)
    assert p.last_caught_up_ms == 500


def test_progress_caught_up_time_never_goes_back():
    p = FollowerProgress(last_caught_up_ms=5_000)
    p.fetched(10, now_ms=1_000, leader_end_offset=10, incarnation=7)
    assert p.last_caught_up_ms == 5_000


def test_progress_records_the_latest_incarnation():
    p = FollowerProgress()
    p.fetched(0, now_ms=1, leader_end_offset=0, incarnation=7)
    p.fetched(0, now_ms=2, leader_end_offset=0, incarnation=8)
    assert p.incarnation == 8


# -- makeLeader ----------------------------------------------------------------------------------


def test_new_leader_assigns_its_epoch_at_the_log_end():
    state = leader(log_end=10)
    assert [(e.epoch, e.start_offset) for e in state.epochs.entries] == [(0, 0), (EPOCH, 10)]
    assert state.epoch_start_offset == 10


def test_new_leader_caps_high_watermark_at_its_log_end():
    state = leader(log_end=10, hw=15)
    assert state.high_watermark == 10


def test_new_leader_refuses_a_registration_it_does_not_lead():
    r = PartitionRegistration((1, 2), (1, 2), 2, EPOCH, 0)
    with pytest.raises(ValueError):
        LeaderState(1, r, LeaderEpochCache(), 0, 0, 0, T0, 1, LAG)


def test_sole_isr_member_leader_advances_high_watermark_to_its_log_end():
    state = leader(isr=(1,), hw=4)
    assert state.high_watermark == 10


def test_new_leader_under_min_isr_does_not_advance_its_high_watermark():
    # KAFKA-15583: maybeIncrementLeaderHW returns at once while the ISR is under min.insync.replicas.
    state = leader(isr=(1,), hw=4, min_isr=2)
    assert state.high_watermark == 4


def test_isr_members_start_caught_up_and_others_not():
    state = leader(isr=(1, 2))
    assert state.followers[2].last_caught_up_ms == T0
    assert state.followers[3].last_caught_up_ms == 0
    assert LEADER not in state.followers


# -- effective min ISR ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "replicas, setting, effective",
    [((1, 2), 3, 2), ((1, 2, 3), 5, 3), ((1,), 3, 1), ((1, 2, 3), 2, 2), ((1, 2, 3), 1, 1)],
)
def test_min_insync_replicas_is_capped_at_the_replica_count(replicas, setting, effective):
    # Kafka's effectiveMinIsr: min(min.insync.replicas, replication factor).
    assert leader(replicas=replicas, min_isr=setting).min_insync_replicas == effective


def test_two_replicas_with_min_insync_three_commit_with_both_in_sync():
    state = leader(replicas=(1, 2), min_isr=3)
    assert state.check_append(acks_all=True) is None
    state.appended(20, T0)
    fetch(state, 2, 20)
    assert state.high_watermark == 20
    assert state.acks_all(20) is ErrorCode.none


def test_two_replicas_with_min_insync_three_refuse_acks_all_with_one_in_sync():
    state = leader(replicas=(1, 2), isr=(1,), min_isr=3, hw=4)
    assert state.check_append(acks_all=True) is ErrorCode.not_enough_replicas
    assert state.high_watermark == 4  # under the effective minimum (2): frozen


def test_a_single_replica_with_min_insync_three_still_commits():
    state = leader(replicas=(1,), hw=4, min_isr=3)
    assert state.high_watermark == 10
    state.appended(12, T0)
    assert state.high_watermark == 12
    assert state.check_append(acks_all=True) is None
    assert state.acks_all(12) is ErrorCode.none


# -- high watermark ------------------------------------------------------------------------------


def test_high_watermark_waits_for_every_isr_member():
    state = leader()
    state.appended(20, T0)
    assert state.high_watermark == 10
    fetch(state, 2, 20)
    assert state.high_watermark == 10
    fetch(state, 3, 15)
    assert state.high_watermark == 15
    fetch(state, 3, 20)
    assert state.high_watermark == 20


def test_high_watermark_is_the_minimum_log_end_over_the_isr():
    state = leader()
    state.appended(30, T0)
    fetch(state, 2, 25)
    fetch(state, 3, 22)
    assert state.high_watermark == 22


def test_sole_member_advances_the_high_watermark_on_append():
    state = leader(replicas=(1,))
    state.appended(20, T0)
    assert state.high_watermark == 20


def test_high_watermark_does_not_wait_for_a_replica_outside_the_isr_that_never_fetched():
    state = leader(isr=(1, 2))
    state.appended(20, T0)
    fetch(state, 2, 20)
    assert state.high_watermark == 20


def test_high_watermark_does_not_wait_for_a_non_member_that_never_fetched_even_within_lag_time():
    # At time 0 a replica's caught-up time (0) is within the lag time; it has no log end yet to wait for.
    state = leader(isr=(1, 2), hw=0, now=0)
    assert state.high_watermark == 0
    fetch(state, 2, 10, now=0)
    assert state.high_watermark == 10


def test_high_watermark_waits_for_a_caught_up_replica_outside_the_isr_until_its_lag_runs_out():
    # Kafka's shouldWaitForReplicaToJoinIsr: a follower that is caught up but not (yet) in the ISR
    # holds the high watermark, so that it is not outrun while it joins.
    state = leader(replicas=(1, 2), isr=(1,))
    fetch(state, 2, 10)
    assert state.pending is None  # nobody asked to expand
    state.appended(20, T0)
    assert state.high_watermark == 10
    fetch(state, 2, 15, now=T0 + 50)  # caught up to where the log ended at its previous fetch
    assert state.high_watermark == 15
    state.appended(25, T0 + LAG + 1)  # last caught up at T0: lagging now
    assert state.high_watermark == 25


def test_replica_the_controller_removed_while_caught_up_no_longer_holds_the_high_watermark():
    # PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower ("fenced",
    # "shutdown"): the controller takes a member out of the ISR when its host died, was fenced or
    # restarted (or at this leader's request, when it lagged), so until it fetches again it is
    # not a replica "caught up, about to join". A node's loss held every write to its partitions
    # for replica.lag.time.max.ms before this.
    state = leader(replicas=(1, 2))
    fetch(state, 2, 10)
    assert state.high_watermark == 10
    state.appended(20, T0)
    assert state.metadata(registration(state, (1,)), T0) is True
    assert (state.isr, state.maximal_isr) == ((1,), (1,))
    assert state.maybe_shrink_isr(T0) is None
    assert state.high_watermark == 20


def test_a_removed_replica_that_fetches_again_holds_the_high_watermark_while_it_joins():
    # The "unfenced" case: once it fetches again, caught up, it is not outrun while it joins.
    state = leader(replicas=(1, 2))
    fetch(state, 2, 10)
    state.appended(20, T0)
    state.metadata(registration(state, (1,)), T0)
    assert state.high_watermark == 20
    fetch(state, 2, 20, now=T0 + 10)  # back, at the log end
    change = state.maybe_expand_isr(2)
    assert change is not None and change.new_isr == (1, 2)
    state.appended(30, T0 + 20)
    assert state.high_watermark == 20  # caught up and joining: waited for


def test_high_watermark_never_goes_back():
    state = leader()
    state.appended(20, T0)
    fetch(state, 2, 20)
    fetch(state, 3, 20)
    fetch(state, 3, 12)
    assert state.high_watermark == 20


def test_high_watermark_never_passes_the_leaders_log_end():
    state = leader()
    fetch(state, 2, 10)
    fetch(state, 3, 10)
    assert state.high_watermark == 10


# -- min.insync.replicas and the high watermark (KAFKA-15583) -----------------------------------


def test_high_watermark_does_not_advance_while_the_committed_isr_is_under_min():
    # PartitionTest.testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR
    state = leader(isr=(1, 2), hw=0, min_isr=3)
    assert state.high_watermark == 0
    fetch(state, 2, 10)
    assert state.high_watermark == 0
    fetch(state, 3, 10)
    change = state.maybe_expand_isr(3)
    assert change is not None and change.new_isr == (1, 2, 3)
    # The maximal ISR reaches the minimum; the committed one does not: still frozen, whatever comes.
    assert len(state.maximal_isr) == 3
    assert state.high_watermark == 0
    state.appended(12, T0)
    fetch(state, 2, 12)
    fetch(state, 3, 12)
    assert state.high_watermark == 0
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2, 3)), T0)
    assert state.isr == (1, 2, 3)
    assert state.high_watermark == 12


def test_acks_all_write_stays_unanswered_while_the_high_watermark_is_frozen_under_min():
    state = leader(min_isr=2)
    assert state.check_append(acks_all=True) is None
    state.appended(20, T0)
    fetch(state, 2, 20)
    fetch(state, 3, 15)
    assert state.high_watermark == 15
    assert state.metadata(registration(state, (1,)), T0) is True  # the controller fenced 2 and 3
    fetch(state, 2, 20, now=T0 + 1)
    fetch(state, 3, 20, now=T0 + 1)
    assert state.high_watermark == 15  # every replica has 20, but only 1 is committed in the ISR
    assert state.acks_all(20) is None  # unanswered: the host times it out
    assert state.check_append(acks_all=True) is ErrorCode.not_enough_replicas


def test_frozen_high_watermark_moves_again_once_the_isr_is_back_at_min():
    state = leader(min_isr=2)
    state.appended(20, T0)
    fetch(state, 2, 20)
    fetch(state, 3, 15)
    state.metadata(registration(state, (1,)), T0)
    fetch(state, 2, 20, now=T0 + 1)
    change = state.maybe_expand_isr(2)
    assert change is not None and change.new_isr == (1, 2)
    assert state.high_watermark == 15  # a pending expansion does not count towards the minimum
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2)), T0 + 1)
    # 3 was fenced (taken out by the controller) and has not fetched since: not waited for as a
    # replica about to join (Kafka's isReplicaIsrEligible), whatever its last position.
    assert state.high_watermark == 20
    assert state.acks_all(20) is ErrorCode.none


# -- pending ISR changes (maximal ISR) -----------------------------------------------------------


def test_pending_expansion_counts_the_joiner_in_the_maximal_isr():
    state = pending_expansion()
    assert state.isr == (1, 2)
    assert state.maximal_isr == (1, 2, 3)


def test_high_watermark_waits_for_a_joiner_while_the_expansion_is_pending():
    state = pending_expansion()
    assert state.high_watermark == 10
    fetch(state, 3, 20)
    assert state.high_watermark == 20


def test_no_shrink_is_proposed_while_a_change_is_in_flight():
    state = leader(isr=(1, 2))
    fetch(state, 3, 10)
    change = state.maybe_expand_isr(3)
    assert change is not None
    assert state.maybe_shrink_isr(T0 + LAG + 1) is None  # 2 never fetched: it would go
    assert state.pending == change
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2, 3)), T0 + LAG + 1)
    shrink = state.maybe_shrink_isr(T0 + LAG + 1)
    assert shrink is not None and shrink.new_isr == (1, 3)


def test_no_expansion_is_proposed_while_a_change_is_in_flight():
    state = leader(isr=(1,))
    fetch(state, 2, 10)
    change = state.maybe_expand_isr(2)
    assert change is not None and change.new_isr == (1, 2)
    fetch(state, 3, 10)
    assert state.maybe_expand_isr(3) is None
    assert state.pending == change
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2)), T0)
    expansion = state.maybe_expand_isr(3)
    assert expansion is not None and expansion.new_isr == (1, 2, 3)


def test_expansion_names_the_leaders_epochs_and_the_incarnations_it_saw():
    state = leader(isr=(1, 2))
    fetch(state, 2, 10, incarnation=21)
    fetch(state, 3, 10, incarnation=31)
    change = state.maybe_expand_isr(3)
    assert change is not None
    assert (change.leader, change.leader_epoch, change.partition_epoch) == (LEADER, EPOCH, 3)
    assert change.new_isr == (1, 2, 3)
    assert change.incarnations == (-1, 21, 31)
    assert state.pending == change


def test_shrink_names_the_incarnations_of_the_members_it_keeps():
    state = leader()
    fetch(state, 2, 10, incarnation=21)
    change = state.maybe_shrink_isr(T0 + LAG + 1)
    assert change is not None
    assert (change.leader, change.leader_epoch, change.partition_epoch) == (LEADER, EPOCH, 3)
    assert change.new_isr == (1, 2)
    assert change.incarnations == (-1, 21)
    assert state.pending == change


def test_committed_expansion_updates_isr_and_partition_epoch():
    state = pending_expansion()
    change = state.pending
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2, 3)), T0)
    assert state.pending is None
    assert state.isr == (1, 2, 3)
    assert state.partition_epoch == 4


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.invalid_update_version,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.not_leader_or_follower,
        ErrorCode.invalid_request,
        ErrorCode.not_controller,
    ],
    ids=lambda error: error.name,
)
def test_pending_change_is_kept_and_counted_on_errors_other_than_ineligible(error):
    # PartitionTest.testIsrNotExpandedIfUpdateFails: the maximal ISR keeps the joiner.
    state = pending_expansion()
    change = state.pending
    state.isr_change_answered(change, error, None, T0 + LAG + 1)
    assert state.pending == change
    assert state.maximal_isr == (1, 2, 3)
    assert state.high_watermark == 10  # still waits for 3, however long ago it caught up
    assert state.maybe_expand_isr(3) is None


def test_pending_change_is_dropped_on_ineligible_replica():
    # Kafka's maybeIncrementLeaderHW waits for a caught-up joiner only while isReplicaIsrEligible:
    # the controller's refusal says it is not (its host died, was fenced or restarted), so the
    # high watermark no longer waits for it, though it caught up within the lag time.
    state = pending_expansion()
    state.isr_change_answered(state.pending, ErrorCode.ineligible_replica, None, T0)
    assert state.pending is None
    assert state.isr == (1, 2)
    assert state.maximal_isr == (1, 2)
    assert state.high_watermark == 20


def test_a_refused_joiner_counts_again_from_its_next_fetch():
    state = pending_expansion()
    state.isr_change_answered(state.pending, ErrorCode.ineligible_replica, None, T0)
    state.appended(30, T0)
    fetch(state, 3, 30, T0 + 1)  # alive after all: caught up, about to join again
    state.appended(40, T0 + 1)
    fetch(state, 2, 40, T0 + 1)
    assert state.high_watermark == 30  # waits for it again
    change = state.maybe_expand_isr(3)
    assert change is not None and change.new_isr == (1, 2, 3)


def test_operation_not_attempted_keeps_the_joiners_progress():
    state = pending_expansion()
    state.isr_change_answered(state.pending, ErrorCode.operation_not_attempted, None, T0)
    assert state.pending is None
    assert state.high_watermark == 10  # caught up at T0: still waited for as a replica about to join


def test_answer_to_a_change_no_longer_pending_is_ignored():
    state = pending_expansion()
    change = state.pending
    state.isr_change_answered(change, ErrorCode.ineligible_replica, None, T0)
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2, 3)), T0)
    assert state.isr == (1, 2)
    assert state.partition_epoch == 3


def test_committed_answer_under_another_leader_epoch_is_ignored():
    state = pending_expansion()
    change = state.pending
    other = PartitionRegistration(state.replicas, (1, 2, 3), LEADER, EPOCH + 1, 4)
    state.isr_change_answered(change, ErrorCode.none, other, T0)
    assert state.pending == change
    assert state.isr == (1, 2)


def test_committed_answer_with_an_older_partition_epoch_is_ignored():
    state = pending_expansion()
    change = state.pending
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2, 3), partition_epoch=2), T0)
    assert state.pending == change
    assert state.isr == (1, 2)


def test_metadata_with_newer_partition_epoch_clears_a_stale_pending_change():
    state = pending_expansion()
    assert state.metadata(registration(state, (1, 2)), T0 + LAG + 1) is True
    assert state.pending is None
    assert state.partition_epoch == 4
    assert state.maximal_isr == (1, 2)
    assert state.high_watermark == 20  # 3 last caught up at T0: no longer waited for


def test_metadata_clearing_a_pending_expansion_still_waits_for_a_caught_up_joiner():
    state = pending_expansion()
    assert state.metadata(registration(state, (1, 2)), T0) is True
    assert state.pending is None
    assert state.maximal_isr == (1, 2)
    assert state.high_watermark == 10


def test_metadata_with_newer_partition_epoch_adopts_the_controllers_isr():
    state = leader()
    state.appended(20, T0)
    fetch(state, 2, 20)
    assert state.metadata(registration(state, (1, 2)), T0) is True
    assert state.isr == (1, 2)
    assert state.high_watermark == 20


def test_metadata_with_the_same_partition_epoch_changes_nothing():
    state = leader()
    assert state.metadata(registration(state, (1,), partition_epoch=3), T0) is True
    assert state.isr == (1, 2, 3)


@pytest.mark.parametrize(
    "reg",
    [
        PartitionRegistration((1, 2, 3), (1, 2, 3), 2, EPOCH + 1, 4),
        PartitionRegistration((1, 2, 3), (1, 2, 3), LEADER, EPOCH + 1, 4),
    ],
    ids=["other-leader", "new-leader-epoch"],
)
def test_metadata_for_another_leader_or_epoch_does_not_apply(reg):
    state = leader()
    assert state.metadata(reg, T0) is False
    assert state.isr == (1, 2, 3)


def test_expansion_round_trip_through_the_controller():
    state = leader(isr=(1, 2))
    controller = PartitionRegistration(state.replicas, state.isr, LEADER, EPOCH, 3)
    fetch(state, 3, 10, incarnation=31)
    change = state.maybe_expand_isr(3)
    new, error = alter_partition(controller, change, {1: 11, 2: 21, 3: 31})
    state.isr_change_answered(change, error, new, T0)
    assert error is ErrorCode.none
    assert (state.isr, state.partition_epoch, state.pending) == ((1, 2, 3), 4, None)


def test_expansion_for_a_restarted_joiner_is_refused_and_dropped():
    state = leader(isr=(1, 2))
    controller = PartitionRegistration(state.replicas, state.isr, LEADER, EPOCH, 3)
    fetch(state, 3, 10, incarnation=31)
    change = state.maybe_expand_isr(3)
    new, error = alter_partition(controller, change, {1: 11, 2: 21, 3: 32})
    state.isr_change_answered(change, error, None, T0)
    assert error is ErrorCode.ineligible_replica
    assert (state.isr, state.pending) == ((1, 2), None)


def test_shrink_keeping_a_restarted_member_is_refused_and_dropped():
    state = leader()
    controller = PartitionRegistration(state.replicas, state.isr, LEADER, EPOCH, 3)
    fetch(state, 2, 10, incarnation=21)
    change = state.maybe_shrink_isr(T0 + LAG + 1)
    assert change is not None and change.new_isr == (1, 2)
    new, error = alter_partition(controller, change, {1: 11, 2: 22, 3: 31})
    assert (error, new) == (ErrorCode.ineligible_replica, controller)
    state.isr_change_answered(change, error, None, T0 + LAG + 1)
    assert (state.isr, state.pending) == ((1, 2, 3), None)


def test_shrink_round_trip_through_the_controller():
    state = leader()
    controller = PartitionRegistration(state.replicas, state.isr, LEADER, EPOCH, 3)
    state.appended(20, T0)
    fetch(state, 2, 20, incarnation=21)
    change = state.maybe_shrink_isr(T0 + LAG + 1)
    new, error = alter_partition(controller, change, {1: 11, 2: 21, 3: 31})
    assert error is ErrorCode.none
    state.isr_change_answered(change, error, new, T0 + LAG + 1)
    assert (state.isr, state.partition_epoch, state.pending) == ((1, 2), 4, None)
    assert state.high_watermark == 20


# -- shrink (maybe_shrink_isr) -------------------------------------------------------------------


def test_no_shrink_while_everyone_is_in_sync():
    state = leader()
    assert state.maybe_shrink_isr(T0 + LAG) is None
    assert state.pending is None


def test_shrink_removes_a_member_lagging_more_than_lag_time():
    state = leader()
    state.appended(20, T0)
    fetch(state, 2, 20, now=T0 + 50)
    change = state.maybe_shrink_isr(T0 + LAG + 1)
    assert change is not None and change.new_isr == (1, 2)


def test_shrink_keeps_a_member_lagging_exactly_lag_time():
    state = leader()
    state.appended(20, T0)
    fetch(state, 2, 20, now=T0 + 50)
    assert state.maybe_shrink_isr(T0 + LAG) is None


def test_shrink_keeps_a_member_at_the_log_end_however_long_ago_it_fetched():
    # PartitionTest.testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd
    state = leader()
    fetch(state, 2, 10)
    fetch(state, 3, 10)
    assert state.maybe_shrink_isr(T0 + 100 * LAG) is None


def test_shrink_keeps_a_member_caught_up_to_the_log_end_of_its_previous_fetch():
    # PartitionTest.testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp (lag 10 s).
    state = leader(replicas=(1, 2), hw=0, now=0, lag=10_000)
    fetch(state, 2, 5, now=5_000)
    assert state.followers[2].last_caught_up_ms == 0
    assert state.high_watermark == 5
    state.appended(15, 10_001)
    fetch(state, 2, 10, now=10_001)
    assert state.followers[2].last_caught_up_ms == 5_000
    assert state.high_watermark == 10
    assert state.maybe_shrink_isr(10_001) is None


def test_pending_shrink_still_counts_the_removed_member():
    # PartitionTest.testMaybeShrinkIsr
    state = leader(hw=0)
    fetch(state, 2, 10)
    assert state.followers[3].log_end_offset == NO_OFFSET
    assert state.followers[3].last_caught_up_ms == T0
    assert state.maybe_shrink_isr(T0) is None  # on becoming leader, members count as caught up
    change = state.maybe_shrink_isr(T0 + LAG + 1)
    assert change is not None and change.new_isr == (1, 2)
    assert state.isr == (1, 2, 3)
    assert state.maximal_isr == (1, 2, 3)
    assert state.high_watermark == 0
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2)), T0 + LAG + 1)
    assert (state.isr, state.maximal_isr, state.partition_epoch) == ((1, 2), (1, 2), 4)
    assert state.high_watermark == 10


def test_failed_shrink_stays_pending_until_the_metadata_settles_it():
    # PartitionTest.testIsrNotShrunkIfUpdateFails, then the registration arrives.
    state = leader(replicas=(1, 2), hw=0)
    change = state.maybe_shrink_isr(T0 + LAG + 1)
    assert change is not None and change.new_isr == (1,)
    state.isr_change_answered(change, ErrorCode.invalid_update_version, None, T0 + LAG + 1)
    assert state.pending == change
    assert (state.isr, state.maximal_isr) == ((1, 2), (1, 2))
    assert state.high_watermark == 0
    assert state.metadata(registration(state, (1,)), T0 + LAG + 1) is True
    assert (state.isr, state.pending) == ((1,), None)
    assert state.high_watermark == 10


def test_leader_is_never_shrunk_out():
    state = leader()
    change = state.maybe_shrink_isr(T0 + 100 * LAG)
    assert change is not None and change.new_isr == (LEADER,)


def test_shrink_never_adds_a_caught_up_replica():
    state = leader(isr=(1, 2))
    fetch(state, 3, 10)  # at the high watermark and the epoch start: it may join, by expansion
    assert state.maybe_shrink_isr(T0) is None
    assert state.pending is None


def test_shrink_never_adds_a_replica_that_stopped_fetching():
    state = leader(isr=(1, 2))
    fetch(state, 3, 10)  # still at the log end and the high watermark, but it never fetches again
    change = state.maybe_shrink_isr(T0 + 100 * LAG)  # 2 never fetched: out
    assert change is not None and change.new_isr == (1,)
    assert state.maximal_isr == (1, 2)


# -- expansion (maybe_expand_isr) ----------------------------------------------------------------


def test_follower_at_the_high_watermark_and_epoch_start_joins():
    state = leader(isr=(1, 2))
    fetch(state, 3, 10)
    change = state.maybe_expand_isr(3)
    assert change is not None and change.new_isr == (1, 2, 3)


def test_a_fetch_alone_proposes_no_change():
    state = leader(isr=(1, 2))
    verdict = fetch(state, 3, 10)
    assert verdict.read
    assert state.pending is None
    assert state.maximal_isr == (1, 2)


def test_isr_expansion():
    # PartitionTest.testIsrExpansion
    state = leader(replicas=(1, 2), isr=(1,), hw=0)
    fetch(state, 2, 3)
    assert state.maybe_expand_isr(2) is None
    assert state.followers[2].last_caught_up_ms == 0
    fetch(state, 2, 10)
    change = state.maybe_expand_isr(2)
    assert change is not None and change.new_isr == (1, 2)
    assert (state.isr, state.maximal_isr) == ((1,), (1, 2))
    assert state.followers[2].last_caught_up_ms == T0
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1, 2)), T0)
    assert state.isr == (1, 2)


def test_follower_below_the_high_watermark_does_not_join():
    state = leader(isr=(1, 2))
    state.appended(20, T0)
    fetch(state, 2, 20)
    assert state.high_watermark == 20
    fetch(state, 3, 15)  # past the epoch start (10), below the high watermark
    assert state.maybe_expand_isr(3) is None


def test_follower_below_the_epoch_start_does_not_join_even_at_the_high_watermark():
    # PartitionTest.testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch
    state = leader(isr=(1, 2), log_end=10, hw=5)
    state.appended(12, T0)
    fetch(state, 3, 0)
    assert state.maybe_expand_isr(3) is None
    fetch(state, 3, 5)  # at the high watermark, before this epoch's start
    assert state.high_watermark == 5
    assert state.maybe_expand_isr(3) is None
    fetch(state, 3, 10)
    change = state.maybe_expand_isr(3)
    assert change is not None and change.new_isr == (1, 2, 3)
    assert state.isr == (1, 2)
    assert state.maximal_isr == (1, 2, 3)


def test_follower_that_never_fetched_does_not_join():
    state = leader(isr=(1, 2), log_end=0, hw=0, epochs=LeaderEpochCache())
    assert state.maybe_expand_isr(3) is None


@pytest.mark.parametrize("replica", [2, LEADER, 4])
def test_expansion_of_a_member_the_leader_or_an_unknown_replica_is_none(replica):
    state = leader(isr=(1, 2))
    fetch(state, 2, 10)
    assert state.maybe_expand_isr(replica) is None
    assert state.pending is None


def test_expansion_adds_only_the_replica_that_fetched():
    state = leader(isr=(1,))
    fetch(state, 2, 10)
    fetch(state, 3, 10)
    change = state.maybe_expand_isr(3)
    assert change is not None and change.new_isr == (1, 3)


def test_expansion_keeps_a_member_that_fell_behind():
    state = leader(isr=(1, 2))
    fetch(state, 3, 10, now=T0 + LAG + 1)  # 2 never fetched and lags: only a shrink removes it
    change = state.maybe_expand_isr(3)
    assert change is not None and change.new_isr == (1, 2, 3)


def test_expansion_orders_the_isr_by_assignment():
    state = leader(isr=(1, 3))
    fetch(state, 2, 10)
    change = state.maybe_expand_isr(2)
    assert change is not None and change.new_isr == (1, 2, 3)


# -- acks=all ------------------------------------------------------------------------------------


def test_acks_all_waits_while_high_watermark_is_below_the_write():
    state = leader(min_isr=2)
    state.appended(20, T0)
    assert state.acks_all(20) is None
    fetch(state, 2, 20)
    assert state.acks_all(20) is None


def test_acks_all_succeeds_once_the_isr_has_the_write():
    state = leader(min_isr=2)
    state.appended(20, T0)
    fetch(state, 2, 20)
    fetch(state, 3, 20)
    assert state.acks_all(20) is ErrorCode.none
    assert state.acks_all(15) is ErrorCode.none


def test_acks_all_under_the_high_watermark_after_the_isr_shrank_below_min_is_not_enough_after_append():
    # checkEnoughReplicasReachOffset on a write the high watermark passed before the shrink.
    state = leader(replicas=(1, 2), min_isr=2)
    state.appended(20, T0)
    fetch(state, 2, 20)
    assert state.high_watermark == 20
    state.appended(30, T0 + 1)
    change = state.maybe_shrink_isr(T0 + LAG + 2)
    assert change is not None and change.new_isr == (1,)
    assert state.acks_all(20) is ErrorCode.none  # the shrink is pending: 2 still counts
    state.isr_change_answered(change, ErrorCode.none, registration(state, (1,)), T0 + LAG + 2)
    assert state.acks_all(20) is ErrorCode.not_enough_replicas_after_append
    assert state.high_watermark == 20  # under min: frozen
    assert state.acks_all(30) is None


def test_check_append_refuses_acks_all_below_min_insync_replicas():
    state = leader(isr=(1, 2), min_isr=3)
    assert state.check_append(acks_all=True) is ErrorCode.not_enough_replicas


def test_check_append_allows_other_acks_below_min_insync_replicas():
    state = leader(isr=(1,), min_isr=3)
    assert state.check_append(acks_all=False) is None


def test_check_append_allows_acks_all_at_min_insync_replicas():
    state = leader(isr=(1, 2), min_isr=2)
    assert state.check_append(acks_all=True) is None


def test_check_append_counts_the_committed_isr_not_a_pending_expansion():
    state = leader(isr=(1,), min_isr=2)
    fetch(state, 2, 10)
    assert state.maybe_expand_isr(2) is not None
    assert state.maximal_isr == (1, 2)
    assert state.check_append(acks_all=True) is ErrorCode.not_enough_replicas


# -- follower fetches (Partition.fetchRecords: epoch, replica, log start, last epoch, log end) ----


def test_follower_fetch_records_progress_and_reads():
    state = leader()
    verdict = fetch(state, 2, 7, incarnation=21)
    assert verdict == FetchVerdict(ErrorCode.none, 10, 0)
    assert verdict.read
    assert state.followers[2].log_end_offset == 7
    assert state.followers[2].incarnation == 21


def test_follower_fetch_from_an_unknown_replica_naming_the_epoch_is_unknown_leader_epoch():
    # PartitionTest.testFetchFromUnrecognizedFollower: it may not know of a reassignment yet; it retries.
    state = leader()
    verdict = fetch(state, 4, 0)
    assert verdict == FetchVerdict(ErrorCode.unknown_leader_epoch)
    assert 4 not in state.followers


def test_follower_fetch_from_an_unknown_replica_without_epoch_is_not_leader_or_follower():
    state = leader()
    assert fetch(state, 4, 0, epoch=-1) == FetchVerdict(ErrorCode.not_leader_or_follower)


@pytest.mark.parametrize(
    "epoch, error",
    [(EPOCH, ErrorCode.unknown_leader_epoch), (-1, ErrorCode.not_leader_or_follower)],
    ids=["with-epoch", "without-epoch"],
)
def test_follower_fetch_claiming_to_be_the_leader_is_an_unknown_replica(epoch, error):
    state = leader()
    assert fetch(state, LEADER, 0, epoch=epoch).error is error


@pytest.mark.parametrize(
    "epoch, error",
    [(EPOCH - 1, ErrorCode.fenced_leader_epoch), (EPOCH + 1, ErrorCode.unknown_leader_epoch)],
    ids=["older", "newer"],
)
def test_follower_fetch_leader_epoch_is_checked_before_the_replica(epoch, error):
    state = leader()
    assert fetch(state, 4, 0, epoch=epoch).error is error


def test_follower_fetch_replica_is_checked_before_the_offsets():
    state = leader(log_start=5, epochs=LeaderEpochCache([EpochEntry(0, 5)]))
    assert fetch(state, 4, 0, epoch=-1).error is ErrorCode.not_leader_or_follower
    assert fetch(state, 4, 99, epoch=-1, last_epoch=42).error is ErrorCode.not_leader_or_follower


def test_follower_fetch_with_an_older_epoch_is_fenced_and_not_recorded():
    state = leader()
    verdict = fetch(state, 2, 10, epoch=EPOCH - 1)
    assert verdict.error is ErrorCode.fenced_leader_epoch
    assert not verdict.read
    assert state.followers[2].log_end_offset == NO_OFFSET


def test_follower_fetch_with_a_newer_epoch_is_unknown_leader_epoch():
    state = leader()
    verdict = fetch(state, 2, 10, epoch=EPOCH + 1)
    assert verdict.error is ErrorCode.unknown_leader_epoch
    assert state.followers[2].log_end_offset == NO_OFFSET


def test_follower_fetch_without_a_leader_epoch_is_accepted():
    state = leader()
    assert fetch(state, 2, 10, epoch=-1).error is ErrorCode.none


def test_follower_fetch_past_the_log_end_is_out_of_range():
    state = leader()
    verdict = fetch(state, 2, 11)
    assert verdict == FetchVerdict(ErrorCode.offset_out_of_range, 10, 0)
    assert state.followers[2].log_end_offset == NO_OFFSET


def test_follower_fetch_below_the_log_start_is_out_of_range():
    state = leader(log_start=5, epochs=LeaderEpochCache([EpochEntry(0, 5)]))
    verdict = fetch(state, 2, 4)
    assert verdict == FetchVerdict(ErrorCode.offset_out_of_range, 10, 5)
    assert state.followers[2].log_end_offset == NO_OFFSET


def kafka_log_leader(log_start=0) -> LeaderState:
    """PartitionTest.testLastFetchedOffsetValidation: epochs 0@0 3@2 4@8 7@13 9@14, log end 17,
    led under epoch 10."""
    epochs = LeaderEpochCache.from_batches([(0, 0), (3, 2), (3, 5), (4, 8), (7, 13), (9, 14)])
    epochs.truncate_from_start(log_start)
    return leader(replicas=(1, 2), log_start=log_start, log_end=17, hw=17, leader_epoch=10, epochs=epochs)


@pytest.mark.parametrize(
    "last_epoch, offset, diverging",
    [
        (2, 5, (0, 2)),
        (0, 4, (0, 2)),
        (6, 6, (4, 13)),
        (5, 9, (4, 13)),
        (10, 18, (10, 17)),
    ],
)
def test_follower_fetch_answers_a_diverging_epoch(last_epoch, offset, diverging):
    state = kafka_log_leader()
    verdict = fetch(state, 2, offset, last_epoch=last_epoch)
    assert verdict.error is ErrorCode.none
    assert verdict.diverging_epoch == diverging
    assert not verdict.read
    assert (verdict.high_watermark, verdict.log_start_offset) == (17, 0)


@pytest.mark.parametrize("last_epoch, offset", [(0, 2), (7, 14), (9, 17), (10, 17)])
def test_follower_fetch_without_divergence_reads(last_epoch, offset):
    verdict = fetch(kafka_log_leader(), 2, offset, last_epoch=last_epoch)
    assert verdict.error is ErrorCode.none
    assert verdict.diverging_epoch is None
    assert verdict.read


@pytest.mark.parametrize("offset", [5, 17, 30])
def test_follower_fetch_with_a_last_epoch_above_every_known_one_is_out_of_range(offset):
    # testLastFetchedOffsetValidation: "Reads from epochs larger than we know about".
    state = kafka_log_leader()
    verdict = fetch(state, 2, offset, last_epoch=11)
    assert verdict == FetchVerdict(ErrorCode.offset_out_of_range, 17, 0)
    assert state.followers[2].log_end_offset == NO_OFFSET


def test_follower_fetch_last_epoch_is_checked_before_the_log_end():
    state = kafka_log_leader()
    assert fetch(state, 2, 20, last_epoch=9).diverging_epoch == (9, 17)
    assert fetch(state, 2, 20, last_epoch=10).diverging_epoch == (10, 17)
    assert fetch(state, 2, 18).error is ErrorCode.offset_out_of_range  # no last epoch: the log end decides


def test_follower_fetch_diverging_after_log_start_moved():
    state = kafka_log_leader(log_start=5)
    assert fetch(state, 2, 8, last_epoch=2).diverging_epoch == (2, 5)
    assert fetch(state, 2, 5, last_epoch=0).read
    assert fetch(state, 2, 5, last_epoch=3).read
    assert fetch(state, 2, 0, last_epoch=0).error is ErrorCode.offset_out_of_range


@pytest.mark.parametrize("last_epoch", [5, 3], ids=["diverging", "not-diverging"])
def test_follower_fetch_below_the_log_start_is_out_of_range_whatever_its_epoch(last_epoch):
    # testLastFetchedOffsetValidation with the log start moved to 10.
    state = kafka_log_leader(log_start=10)
    verdict = fetch(state, 2, 6, last_epoch=last_epoch)
    assert verdict == FetchVerdict(ErrorCode.offset_out_of_range, 17, 10)


def test_follower_fetch_with_a_diverging_epoch_does_not_record_progress():
    state = kafka_log_leader()
    fetch(state, 2, 17, last_epoch=10)
    assert state.followers[2].log_end_offset == 17
    state.appended(20, T0)
    verdict = fetch(state, 2, 6, last_epoch=6)
    assert verdict.diverging_epoch == (4, 13)
    assert state.followers[2].log_end_offset == 17
    assert state.followers[2].last_fetch_leader_end_offset == 17


# -- visible high watermark ---------------------------------------------------------------------


def test_visible_high_watermark_is_none_until_it_reaches_the_epoch_start():
    state = leader(replicas=(1, 2), log_end=10, hw=4)
    assert state.high_watermark == 4
    assert state.visible_high_watermark is None
    fetch(state, 2, 8)
    assert state.high_watermark == 8
    assert state.visible_high_watermark is None
    fetch(state, 2, 10)
    assert state.visible_high_watermark == 10


def test_visible_high_watermark_follows_the_high_watermark_after_the_epoch_start():
    state = leader(replicas=(1, 2), log_end=10, hw=10)
    assert state.visible_high_watermark == 10
    state.appended(15, T0)
    fetch(state, 2, 13)
    assert state.visible_high_watermark == 13


# -- reassignment --------------------------------------------------------------------------------


def test_a_reassignment_under_this_epoch_adds_the_new_replica_as_an_unknown_follower():
    state = leader(isr=(1, 2, 3), min_isr=2)
    fetch(state, 2, 10)
    fetch(state, 3, 10)
    moved = PartitionRegistration((4, 2, 3, 1), (1, 2, 3), LEADER, EPOCH, state.partition_epoch + 1, (4,), (1,))
    assert state.metadata(moved, T0) is True
    assert state.replicas == (4, 2, 3, 1) and state.followers[4].log_end_offset == -1
    assert state.maybe_expand_isr(4) is None  # it has not fetched yet
    fetch(state, 4, 10)
    change = state.maybe_expand_isr(4)
    assert change is not None and change.new_isr == (4, 2, 3, 1)


def test_a_registration_without_this_leader_or_under_another_epoch_does_not_apply():
    state = leader()
    done = PartitionRegistration((4, 2, 3), (4, 2, 3), 4, EPOCH + 1, state.partition_epoch + 1)
    assert state.metadata(done, T0) is False


def test_operation_not_attempted_drops_the_pending_change_like_ineligible_replica():
    state = leader(isr=(1, 2), min_isr=1)
    fetch(state, 3, 10)
    change = state.maybe_expand_isr(3)
    assert change is not None and change.sequence == 1
    state.isr_change_answered(change, ErrorCode.operation_not_attempted, None, T0)
    assert state.pending is None
    assert state.maybe_expand_isr(3).sequence == 2  # a new proposal, a new sequence
