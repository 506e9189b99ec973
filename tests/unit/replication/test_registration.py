"""The controller's partition record against KRaft's ReplicationControlManager / PartitionChangeBuilder."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from cluster.replication.registration import (
    NO_LEADER,
    AlterPartition,
    PartitionRegistration,
    alter_partition,
    answer_alter_partition,
    lost_log,
    change_reassignment,
    reassign,
    reconcile,
    registered_again,
    restarted,
)


def reg(replicas=(1, 2, 3), isr=None, leader=None, leader_epoch=4, partition_epoch=7) -> PartitionRegistration:
    isr = tuple(replicas) if isr is None else tuple(isr)
    leader = replicas[0] if leader is None else leader
    return PartitionRegistration(tuple(replicas), isr, leader, leader_epoch, partition_epoch)


def request(r: PartitionRegistration, new_isr, incarnations=None, *, leader=None, leader_epoch=None, partition_epoch=None,
            sequence=0):
    new_isr = tuple(new_isr)
    return AlterPartition(
        leader=r.leader if leader is None else leader,
        leader_epoch=r.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=r.partition_epoch if partition_epoch is None else partition_epoch,
        new_isr=new_isr,
        incarnations=tuple(incarnations) if incarnations is not None else tuple(-1 for _ in new_isr),
        sequence=sequence,
    )


# -- new -----------------------------------------------------------------------------------------


def test_new_partition_has_every_replica_in_sync_and_the_first_leading():
    r = PartitionRegistration.new((3, 1, 2))
    assert (r.replicas, r.isr, r.leader) == ((3, 1, 2), (3, 1, 2), 3)
    assert (r.leader_epoch, r.partition_epoch) == (0, 0)
    assert r.has_leader


@pytest.mark.parametrize("replicas", [(), (1, 1), (1, 2, 1)])
def test_new_partition_rejects_empty_or_duplicate_replicas(replicas):
    with pytest.raises(ValueError):
        PartitionRegistration.new(replicas)


def test_no_leader_means_has_leader_is_false():
    assert not reg(leader=NO_LEADER).has_leader


# -- reconcile -----------------------------------------------------------------------------------


def test_reconcile_with_everyone_alive_changes_nothing():
    r = reg()
    assert reconcile(r, {1, 2, 3}) is r


def test_reconcile_dead_follower_leaves_isr_bumping_only_partition_epoch():
    new = reconcile(reg(), {1, 2})
    assert new.isr == (1, 2)
    assert new.leader == 1
    assert new.leader_epoch == 4
    assert new.partition_epoch == 8


def test_reconcile_dead_leader_elects_first_alive_isr_replica_with_both_epochs_bumped():
    new = reconcile(reg(), {2, 3})
    assert new.leader == 2
    assert new.isr == (2, 3)
    assert new.leader_epoch == 5
    assert new.partition_epoch == 8


def test_reconcile_elects_in_assignment_order_not_isr_order():
    new = reconcile(reg(replicas=(1, 2, 3), isr=(3, 2, 1), leader=1), {2, 3})
    assert new.leader == 2


def test_reconcile_does_not_elect_an_alive_replica_outside_the_isr():
    new = reconcile(reg(replicas=(1, 2, 3), isr=(1, 3), leader=1), {2, 3})
    assert new.leader == 3
    assert new.isr == (3,)


def test_reconcile_keeps_an_alive_leader_that_is_not_the_preferred_replica():
    r = reg(leader=2)
    assert reconcile(r, {1, 2, 3}) is r


def test_reconcile_keeps_the_last_isr_member_when_it_dies():
    new = reconcile(reg(replicas=(1, 2), isr=(1,), leader=1), {2})
    assert new.isr == (1,)
    assert new.leader == NO_LEADER
    assert not new.has_leader
    assert new.leader_epoch == 5
    assert new.partition_epoch == 8


def test_reconcile_leaves_a_leaderless_partition_alone_while_only_non_isr_replicas_live():
    r = reg(replicas=(1, 2), isr=(1,), leader=NO_LEADER)
    assert reconcile(r, {2}) is r


def test_reconcile_reelects_the_last_isr_member_when_it_returns():
    leaderless = reconcile(reg(replicas=(1, 2), isr=(1,), leader=1), {2})
    back = reconcile(leaderless, {1, 2})
    assert back.leader == 1
    assert back.isr == (1,)
    assert back.leader_epoch == leaderless.leader_epoch + 1
    assert back.partition_epoch == leaderless.partition_epoch + 1


def test_reconcile_with_every_isr_member_dead_leaves_no_leader_and_a_non_empty_isr():
    new = reconcile(reg(replicas=(1, 2, 3), isr=(1, 2), leader=1), {3})
    assert new.leader == NO_LEADER
    assert new.isr and set(new.isr) <= {1, 2}


def test_reconcile_changes_are_counted_once_per_call():
    new = reconcile(reg(), {3})
    assert (new.leader, new.isr) == (3, (3,))
    assert (new.leader_epoch, new.partition_epoch) == (5, 8)


# -- lost_log ------------------------------------------------------------------------------------


def test_lost_log_removes_a_follower_from_the_isr():
    new = lost_log(reg(), 2, {1, 2, 3})
    assert new.isr == (1, 3)
    assert new.leader == 1
    assert (new.leader_epoch, new.partition_epoch) == (4, 8)


def test_lost_log_of_the_leader_elects_another_isr_member():
    new = lost_log(reg(), 1, {1, 2, 3})
    assert new.isr == (2, 3)
    assert new.leader == 2
    assert (new.leader_epoch, new.partition_epoch) == (5, 8)


def test_lost_log_removes_even_the_last_isr_member():
    leaderless = reg(replicas=(1, 2), isr=(1,), leader=NO_LEADER)
    new = lost_log(leaderless, 1, {1, 2})
    assert new.isr == ()
    assert new.leader == NO_LEADER
    assert new.partition_epoch == leaderless.partition_epoch + 1


def test_lost_log_of_a_sole_leader_leaves_the_partition_leaderless():
    new = lost_log(reg(replicas=(1, 2), isr=(1,), leader=1), 1, {1, 2})
    assert new.isr == ()
    assert new.leader == NO_LEADER
    assert (new.leader_epoch, new.partition_epoch) == (5, 8)


def test_lost_log_of_a_replica_outside_the_isr_changes_nothing():
    r = reg(isr=(1, 2))
    assert lost_log(r, 3, {1, 2, 3}) is r


def test_leaderless_partition_without_isr_never_elects_a_returning_replica():
    empty = lost_log(reg(replicas=(1, 2), isr=(1,), leader=NO_LEADER), 1, {1, 2})
    assert reconcile(empty, {1, 2}).leader == NO_LEADER


# -- alter_partition ------------------------------------------------------------------------------


def test_alter_partition_shrink_bumps_only_the_partition_epoch():
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2)), {1: 10, 2: 20, 3: 30})
    assert error is ErrorCode.none
    assert new.isr == (1, 2)
    assert new.leader == 1
    assert new.leader_epoch == r.leader_epoch
    assert new.partition_epoch == r.partition_epoch + 1


def test_alter_partition_expansion_with_a_current_incarnation_succeeds():
    r = reg(isr=(1, 2))
    new, error = alter_partition(r, request(r, (1, 2, 3), (10, 20, 30)), {1: 10, 2: 20, 3: 30})
    assert error is ErrorCode.none
    assert new.isr == (1, 2, 3)
    assert (new.leader_epoch, new.partition_epoch) == (r.leader_epoch, r.partition_epoch + 1)


def test_alter_partition_orders_the_new_isr_by_assignment():
    r = reg(isr=(1,))
    new, error = alter_partition(r, request(r, (3, 1), (30, -1)), {1: 10, 3: 30})
    assert error is ErrorCode.none
    assert new.isr == (1, 3)


def test_alter_partition_to_the_same_isr_changes_nothing():
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2, 3)), {1: 10, 2: 20, 3: 30})
    assert error is ErrorCode.none
    assert new is r


ALIVE = {1: 10, 2: 20, 3: 30}


# validateAlterPartitionData's order: epochs the controller never issued, a fenced leader epoch,
# the sender, the partition epoch, the ISR's shape, then every member's eligibility.


@pytest.mark.parametrize(
    "epochs",
    [
        pytest.param({"leader_epoch": 5}, id="higher-leader-epoch"),
        pytest.param({"partition_epoch": 8}, id="higher-partition-epoch"),
        pytest.param({"leader_epoch": 5, "partition_epoch": 8}, id="both-higher"),
    ],
)
def test_alter_partition_with_epochs_the_controller_never_issued_is_not_controller(epochs):
    # ReplicationControlManagerTest.testInvalidAlterPartitionRequests: leader / partition epoch 500.
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2), **epochs), ALIVE)
    assert error is ErrorCode.not_controller
    assert new is r


def test_alter_partition_not_controller_comes_before_a_fenced_leader_epoch():
    r = reg()
    _, error = alter_partition(r, request(r, (1, 2), leader_epoch=3, partition_epoch=8), ALIVE)
    assert error is ErrorCode.not_controller


def test_alter_partition_not_controller_comes_before_every_other_check():
    r = reg()
    _, error = alter_partition(r, request(r, (2, 9), (-1,), leader=2, leader_epoch=5), {})
    assert error is ErrorCode.not_controller


def test_alter_partition_with_an_older_leader_epoch_is_fenced():
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2), leader_epoch=r.leader_epoch - 1), ALIVE)
    assert error is ErrorCode.fenced_leader_epoch
    assert new is r


def test_alter_partition_from_a_replica_that_is_not_the_leader_is_an_invalid_request():
    # ReplicationControlManagerTest.testInvalidAlterPartitionRequests ("Invalid leader").
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2), leader=2), ALIVE)
    assert error is ErrorCode.invalid_request
    assert new is r


def test_alter_partition_fenced_leader_epoch_comes_before_the_sender_check():
    r = reg()
    _, error = alter_partition(r, request(r, (1, 2), leader=2, leader_epoch=r.leader_epoch - 1), ALIVE)
    assert error is ErrorCode.fenced_leader_epoch


def test_alter_partition_sender_check_comes_before_the_partition_epoch():
    r = reg()
    _, error = alter_partition(r, request(r, (1, 2), leader=2, partition_epoch=r.partition_epoch - 1), ALIVE)
    assert error is ErrorCode.invalid_request


def test_alter_partition_with_an_older_partition_epoch_is_an_invalid_update_version():
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2), partition_epoch=r.partition_epoch - 1), ALIVE)
    assert error is ErrorCode.invalid_update_version
    assert new is r


def test_alter_partition_epoch_checks_come_before_isr_checks():
    r = reg()
    _, error = alter_partition(r, request(r, (2, 3), leader_epoch=r.leader_epoch - 1), {})
    assert error is ErrorCode.fenced_leader_epoch
    _, error = alter_partition(r, request(r, (2, 3), partition_epoch=r.partition_epoch - 1), {})
    assert error is ErrorCode.invalid_update_version


def test_alter_partition_after_another_change_is_refused_with_invalid_update_version():
    r = reg()
    stale = request(r, (1, 2))
    shrunk = reconcile(r, {1, 2})  # the controller removed 3 meanwhile
    new, error = alter_partition(shrunk, stale, {1: 10, 2: 20})
    assert error is ErrorCode.invalid_update_version
    assert new is shrunk


@pytest.mark.parametrize(
    "new_isr",
    [
        pytest.param((2, 3), id="leader-missing"),
        pytest.param((1, 2, 2), id="duplicate"),
        pytest.param((1, 4), id="not-assigned"),
        pytest.param((), id="empty"),
    ],
)
def test_alter_partition_with_an_invalid_isr_is_an_invalid_request(new_isr):
    r = reg()
    new, error = alter_partition(r, request(r, new_isr), {1: 10, 2: 20, 3: 30, 4: 40})
    assert error is ErrorCode.invalid_request
    assert new is r


@pytest.mark.parametrize("incarnations", [(10, 30), (10, 20, 30, 40), ()])
def test_alter_partition_with_incarnations_not_matching_the_isr_is_an_invalid_request(incarnations):
    r = reg(isr=(1, 2))
    new, error = alter_partition(r, request(r, (1, 2, 3), incarnations), ALIVE)
    assert error is ErrorCode.invalid_request
    assert new is r


def test_alter_partition_invalid_isr_comes_before_eligibility():
    r = reg(isr=(1, 2))
    _, error = alter_partition(r, request(r, (1, 3, 3), (-1, 31, 31)), {1: 10})
    assert error is ErrorCode.invalid_request


def test_alter_partition_adding_a_dead_replica_is_ineligible():
    r = reg(isr=(1, 2))
    new, error = alter_partition(r, request(r, (1, 2, 3), (10, 20, 30)), {1: 10, 2: 20})
    assert error is ErrorCode.ineligible_replica
    assert new is r


def test_alter_partition_adding_a_restarted_replica_is_ineligible():
    # ReplicationControlManagerTest.testAlterPartitionShouldRejectBrokersWithStaleEpoch.
    r = reg(isr=(1, 2))
    new, error = alter_partition(r, request(r, (1, 2, 3), (10, 20, 30)), {1: 10, 2: 20, 3: 31})
    assert error is ErrorCode.ineligible_replica
    assert new is r


def test_alter_partition_keeping_a_member_whose_incarnation_changed_is_ineligible():
    # Every member of the new ISR is checked, not only the joiners: a shrink that keeps replica 2 as
    # the leader saw it, though 2 has restarted since (perhaps with an empty log), is refused.
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2), (-1, 20)), {1: 10, 2: 21, 3: 30})
    assert error is ErrorCode.ineligible_replica
    assert new is r


def test_alter_partition_keeping_a_dead_member_is_ineligible():
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2), (-1, -1)), {1: 10, 3: 30})
    assert error is ErrorCode.ineligible_replica
    assert new is r


def test_alter_partition_naming_a_dead_leader_is_ineligible():
    r = reg()
    new, error = alter_partition(r, request(r, (1, 2), (-1, 20)), {2: 20, 3: 30})
    assert error is ErrorCode.ineligible_replica
    assert new is r


def test_alter_partition_with_incarnation_minus_one_skips_the_incarnation_check():
    # Kafka: a broker epoch of -1 bypasses the check (the leader has no fetch from that replica yet),
    # but the replica must still be alive.
    r = reg(isr=(1, 2))
    new, error = alter_partition(r, request(r, (1, 2, 3), (-1, -1, -1)), {1: 11, 2: 22, 3: 33})
    assert error is ErrorCode.none
    assert new.isr == (1, 2, 3)


def test_alter_partition_with_incarnation_minus_one_still_needs_the_replica_alive():
    r = reg(isr=(1, 2))
    new, error = alter_partition(r, request(r, (1, 2, 3), (-1, -1, -1)), {1: 11, 2: 22})
    assert error is ErrorCode.ineligible_replica
    assert new is r


# -- reassignment (KIP-455) ----------------------------------------------------------------------


ALIVE = {1: 0, 2: 0, 3: 0, 4: 0}


def test_reassignment_puts_the_targets_first_and_keeps_the_leaving_replicas_until_in_sync():
    start = reg()
    moved, error = reassign(start, (4, 2, 3), ALIVE)
    assert error is ErrorCode.none
    assert (moved.replicas, moved.adding, moved.removing) == ((4, 2, 3, 1), (4,), (1,))
    # Nothing left the assignment yet: same leader, same leader epoch, a new partition epoch.
    assert (moved.isr, moved.leader, moved.leader_epoch, moved.partition_epoch) == ((1, 2, 3), 1, 4, 8)
    assert moved.reassigning and moved.target_replicas == (4, 2, 3)


def test_reassignment_completes_when_the_isr_holds_every_target_and_the_leaving_leader_hands_over():
    moved, _ = reassign(reg(), (4, 2, 3), ALIVE)
    # The leader adds 4 to the ISR: that same change completes the move.
    done, error = alter_partition(moved, request(moved, (1, 2, 3, 4)), ALIVE)
    assert error is ErrorCode.none
    assert (done.replicas, done.isr, done.adding, done.removing) == ((4, 2, 3), (4, 2, 3), (), ())
    assert done.leader == 4  # the first target in the ISR; 1 left the assignment
    assert done.leader_epoch == moved.leader_epoch + 1 and done.partition_epoch == moved.partition_epoch + 1


def test_a_leader_that_stays_keeps_leading_but_a_replica_leaving_bumps_the_leader_epoch():
    moved, _ = reassign(reg(), (1, 2, 4), ALIVE)
    done, _ = alter_partition(moved, request(moved, (1, 2, 3, 4)), ALIVE)
    assert (done.replicas, done.leader) == ((1, 2, 4), 1)
    # Replica 3 must not mistake itself for a follower of the epoch it knew.
    assert done.leader_epoch == moved.leader_epoch + 1


def test_a_reassignment_waits_while_a_target_is_out_of_the_isr():
    moved, _ = reassign(reg(), (4, 2, 3), ALIVE)
    still, _ = alter_partition(moved, request(moved, (1, 2)), ALIVE)  # 3 fell behind
    assert still.reassigning and still.isr == (2, 1)
    assert still.replicas == (4, 2, 3, 1)


def test_a_reassignment_to_replicas_already_in_sync_completes_at_once():
    moved, error = reassign(reg(), (3, 2), ALIVE)
    assert error is ErrorCode.none
    assert (moved.replicas, moved.isr, moved.leader, moved.reassigning) == ((3, 2), (3, 2), 3, False)
    assert moved.leader_epoch == 5


def test_a_second_reassignment_waits_for_the_first():
    moved, _ = reassign(reg(), (4, 2, 3), ALIVE)
    again, error = reassign(moved, (1, 2, 4), ALIVE)
    assert error is ErrorCode.reassignment_in_progress and again is moved


@pytest.mark.parametrize("target", [(), (1, 1, 2)])
def test_an_invalid_target_is_refused(target):
    start = reg()
    assert reassign(start, target, ALIVE) == (start, ErrorCode.invalid_replica_assignment)


def test_the_leaving_leaders_loss_mid_reassignment_elects_a_target_first():
    moved, _ = reassign(reg(isr=(1, 3, 2)), (4, 3, 2), ALIVE)
    after = reconcile(moved, {2: 0, 3: 0, 4: 0})
    assert after.leader == 3 and after.reassigning  # 4 is not in sync yet; 3 is the first target in the ISR


# -- operators' reassignments (AlterPartitionReassignments) ---------------------------------------


def test_an_operator_target_on_an_idle_partition_is_a_reassignment():
    assert change_reassignment(reg(), (4, 2, 3), ALIVE) == reassign(reg(), (4, 2, 3), ALIVE)


def test_the_same_target_sent_again_changes_nothing():
    moved, _ = reassign(reg(), (4, 2, 3), ALIVE)
    assert change_reassignment(moved, (4, 2, 3), ALIVE) == (moved, ErrorCode.none)


def test_a_new_target_replaces_a_move_from_the_current_assignment_as_kraft_does():
    moved, _ = reassign(reg(), (4, 2, 3), ALIVE)
    caught_up, _ = alter_partition(moved, request(moved, (1, 2, 4)), ALIVE)  # 4 in sync, 3 fell behind
    assert caught_up.reassigning and caught_up.isr == (4, 2, 1)
    again, error = change_reassignment(caught_up, (4, 2, 5), ALIVE | {5: 0})
    assert error is ErrorCode.none
    # 4 is still being added (not yet in a completed assignment), keeps its place in the ISR, and
    # the leader is not moved: only the new target's additions and removals change.
    assert (again.replicas, again.adding, again.removing) == ((4, 2, 5, 3, 1), (4, 5), (3, 1))
    assert again.isr == caught_up.isr and again.leader == caught_up.leader
    assert again.leader_epoch == caught_up.leader_epoch


def test_a_cancel_reverts_to_the_original_replicas_and_a_leader_among_the_added_gives_way():
    moved, _ = reassign(reg(), (4, 2, 3), ALIVE)
    caught_up, _ = alter_partition(moved, request(moved, (1, 2, 3, 4)), ALIVE)
    assert not caught_up.reassigning  # completed: nothing to cancel
    assert change_reassignment(caught_up, None, ALIVE) == (caught_up, ErrorCode.no_reassignment_in_progress)
    moved, _ = reassign(reg(), (4, 2, 3), ALIVE)
    led_by_4 = reconcile(alter_partition(moved, request(moved, (1, 2, 4)), ALIVE)[0], {2: 0, 4: 0})
    assert led_by_4.leader == 4  # 1 died: the first target in sync leads
    back, error = change_reassignment(led_by_4, None, {2: 0, 4: 0})
    assert error is ErrorCode.none
    assert (back.replicas, back.reassigning) == ((2, 3, 1), False) and 4 not in back.isr and back.leader == 2


def test_a_cancel_that_would_need_an_unclean_election_is_refused():
    moved, _ = reassign(reg(), (4, 5, 6), ALIVE | {5: 0, 6: 0})
    in_sync, _ = alter_partition(moved, request(moved, (1, 2, 3, 4)), ALIVE)
    only_4 = reconcile(in_sync, {4: 0})  # 1, 2 and 3 died: 4 alone is in sync, and leads
    assert only_4.isr == (4,) and only_4.leader == 4
    assert change_reassignment(only_4, None, {4: 0}) == (only_4, ErrorCode.invalid_replica_assignment)


# -- restarts between the controller's looks -----------------------------------------------------


def test_a_leader_that_restarted_unseen_hands_over_under_a_new_epoch():
    start = reg()
    after = restarted(start, [1], {1, 2, 3})
    assert after.leader == 2 and after.leader_epoch == start.leader_epoch + 1
    assert after.isr == (2, 3)


def test_a_restarted_last_isr_member_keeps_its_claim_and_leads_again_under_a_new_epoch():
    start = reg(isr=(1,))
    after = restarted(start, [1], {1, 2, 3})
    assert (after.isr, after.leader) == ((1,), 1) and after.leader_epoch > start.leader_epoch


def test_nobody_restarted_changes_nothing():
    start = reg()
    assert restarted(start, [], {1, 2, 3}) is start


# -- copies of one request (answer_alter_partition) ------------------------------------------------


def test_a_copy_of_a_refused_request_is_refused_again_even_once_it_could_apply():
    """The soak's case: a refused expansion's late copy must not apply after the leader dropped it."""
    start = reg(isr=(1, 2))
    add3 = request(start, (1, 2, 3), sequence=1)
    after, answer = answer_alter_partition(start, add3, {1: 0, 2: 0}, None)  # 3 is away: refused
    assert answer.error is ErrorCode.ineligible_replica and after is start
    again, same = answer_alter_partition(after, add3, {1: 0, 2: 0, 3: 0}, answer)  # 3 is back now
    assert same is answer and again is start


def test_a_copy_of_an_applied_request_gets_the_same_answer():
    start = reg(isr=(1, 2))
    add3 = request(start, (1, 2, 3), sequence=4)
    after, answer = answer_alter_partition(start, add3, ALIVE, None)
    assert answer.error is ErrorCode.none and after.isr == (1, 2, 3)
    again, same = answer_alter_partition(after, add3, ALIVE, answer)
    assert again is after and same is answer


def test_a_request_older_than_the_last_answered_is_not_applied():
    start = reg(isr=(1, 2))
    _, answer = answer_alter_partition(start, request(start, (1,), sequence=5), ALIVE, None)
    shrunk = answer.registration
    late, refused = answer_alter_partition(shrunk, request(shrunk, (1, 2, 3), sequence=4), ALIVE, answer)
    assert late is shrunk and refused.error is ErrorCode.operation_not_attempted


def test_a_new_leader_epochs_requests_start_afresh():
    start = reg()
    _, answer = answer_alter_partition(start, request(start, (1, 2), sequence=9), ALIVE, None)
    moved = reconcile(answer.registration, {2: 0, 3: 0})
    assert moved.leader == 2 and moved.isr == (2,)
    after, fresh = answer_alter_partition(moved, request(moved, (2, 3), sequence=1), ALIVE, answer)
    assert fresh.error is ErrorCode.none and after.isr == (2, 3)


def test_a_replica_registering_again_without_its_log_leaves_the_isr_and_hands_over():
    start = reg()
    after = registered_again(start, 1, {1: 1, 2: 0, 3: 0}, log_lost=True)
    assert after.leader == 2 and 1 not in after.isr and after.leader_epoch == start.leader_epoch + 1
    kept = registered_again(start, 3, {1: 0, 2: 0, 3: 1}, log_lost=False)
    assert kept.leader == 1 and kept.isr == (1, 2)  # fenced and back: out of the ISR until it rejoins


def test_the_preferred_replica_leads_again_once_it_is_alive_and_in_sync():
    from cluster.replication.registration import elect_preferred

    moved = PartitionRegistration((1, 2, 3), (2, 3), 2, 4, 7)
    assert elect_preferred(moved, {1, 2, 3}) == moved  # not in the ISR yet: it stays a follower
    back = PartitionRegistration((1, 2, 3), (1, 2, 3), 2, 4, 8)
    assert elect_preferred(back, {2, 3}) == back  # in the ISR but not alive
    elected = elect_preferred(back, {1, 2, 3})
    assert (elected.leader, elected.leader_epoch, elected.partition_epoch, elected.isr) == (1, 5, 9, (1, 2, 3))
    assert elect_preferred(elected, {1, 2, 3}) == elected
    moving = PartitionRegistration((4, 1, 2), (1, 2), 1, 4, 8, (4,), ())
    assert elect_preferred(moving, {1, 2, 4}) == moving  # a reassignment decides its own leader
