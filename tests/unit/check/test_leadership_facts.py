"""The checker judges leadership by the changes the cluster recorded (leadership.parquet) and by the
leader epoch each share delivery carries, not by the fault schedule (issue 20).

The first test is the failure `raygroups demo` showed once in six runs
(../shared/evidence/demo-double-acquisition): a partition leader was killed, but Ray stopped it only
a moment later; in between it answered a fetch (taken as the partition's recovery), applied a
member's RELEASE and handed the record out again with count 2. The new leader, loaded a few
hundred milliseconds later from the durable state where acquisitions do not exist, handed it out
with count 2 again. That is KIP-932's behaviour across a leader change; judged by the fault
schedule the change looked over before the first delivery was asked for.
"""

from __future__ import annotations

from coordinator.hashing import group_partition
from tests.unit.check.runbuilder import CLASSIC, F0_AT, M0, S0, S1, TOPIC, judge, kinds, only_failure, produced_at
from tests.unit.check.test_explained import all_pass

KILL_AT = produced_at(1, 8) + 0.2  # 26.3 s: partition-leader-1, leader of orders-1, is killed


def _killed_leader_redelivers(builder, epochs: tuple[int | None, int | None] = (None, None)) -> None:
    """s01 RELEASEs orders-1@8 on a fetch the dying leader still serves: it gets the record back with
    count 2 (answered late); the new leader, loaded from the durable state, hands it out with count 2
    again, and s01's ACCEPT of the first fails INVALID_RECORD_STATE on it."""
    builder.fault(3, KILL_AT, "kill", "partition-leader-1", partitions=[f"{TOPIC}-1"], actors=["partition-leader-1"])
    builder.recovery(3, f"{TOPIC}-1", KILL_AT + 0.05, KILL_AT)  # the dying leader's answer
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, 8))
    release_asked, redelivered = KILL_AT + 0.1, KILL_AT + 0.8
    builder.add("ack", KILL_AT + 0.6, release_asked, role="share", member=S1, group="workers", topic=TOPIC, partition=1,
                offset=8, delivery_count=1, ack_type="RELEASE", error="NONE")
    builder.share_delivery(S1, 1, 8, 2, KILL_AT + 0.6, asked=release_asked, leader_epoch=epochs[0])
    builder.share_delivery(S1, 1, 8, 2, redelivered, asked=KILL_AT + 0.65, leader_epoch=epochs[1])
    builder.add("ack", redelivered, KILL_AT + 0.65, role="share", member=S1, group="workers", topic=TOPIC, partition=1,
                offset=8, delivery_count=2, ack_type="ACCEPT", error="INVALID_RECORD_STATE")
    builder.ack(S1, 1, 8, 2, "ACCEPT", redelivered + 0.3)


def _failover_recorded(builder) -> None:
    builder.record_leadership()
    builder.leader_change(TOPIC, 1, 2, KILL_AT + 0.4, "failover", loaded=KILL_AT + 0.55, actor="partition-leader-2",
                          previous="partition-leader-1")


def test_judged_by_the_fault_schedule_the_killed_leaders_late_answers_looked_like_a_double_acquisition(builder, tmp_path):
    _killed_leader_redelivers(builder)  # a run without recorded changes, as the demo's was
    verdict = only_failure(judge(builder, tmp_path), "double-acquisition", 1)
    assert "no leader change between" in verdict.evidence[0]["why"]


def test_the_recorded_failover_between_the_two_deliveries_explains_them(builder, tmp_path):
    _killed_leader_redelivers(builder)
    _failover_recorded(builder)
    result = judge(builder, tmp_path)
    all_pass(result)
    assert "1 same-count redelivery across a leader change" in result.verdict("double-acquisition").summary


def test_deliveries_carrying_two_leader_epochs_are_two_leaderships(builder, tmp_path):
    _killed_leader_redelivers(builder, epochs=(1, 2))  # even with no leadership.parquet
    all_pass(judge(builder, tmp_path))


def test_one_leader_epoch_is_one_leader_whatever_changes_were_recorded_around_it(builder, tmp_path):
    _killed_leader_redelivers(builder, epochs=(2, 2))
    _failover_recorded(builder)
    verdict = only_failure(judge(builder, tmp_path), "double-acquisition", 1)
    assert "from the same leader (epoch 2)" in verdict.evidence[0]["why"]


def test_a_fault_whose_recovery_was_never_seen_excuses_nothing_once_changes_are_recorded(builder, tmp_path):
    """Judged by the fault schedule, a kill whose recovery was not seen straddles every later pair;
    the recorded change came and went before the first delivery was asked for."""
    _killed_leader_redelivers(builder)
    builder.remove(lambda r: r["kind"] == "recovery" and r["fault_id"] == 3)
    builder.record_leadership()
    builder.leader_change(TOPIC, 1, 2, KILL_AT + 0.02, "failover", loaded=KILL_AT + 0.05)
    verdict = only_failure(judge(builder, tmp_path), "double-acquisition", 1)
    assert "no leader change between" in verdict.evidence[0]["why"]


def _same_count_across(builder, offset: int, began: float) -> None:
    """s01 got orders-1@offset (count 1) and never acknowledged it; s00 gets it with count 1 again
    after `began`, with no fault anywhere near."""
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, offset))
    again = began + 0.7
    builder.share_delivery(S0, 1, offset, 1, again)
    builder.ack(S0, 1, offset, 1, "ACCEPT", again + 0.3)


def test_a_same_count_redelivery_after_a_controller_balance_move_is_excused_by_the_recorded_change(builder, tmp_path):
    began = produced_at(1, 12) + 0.2  # no fault: the controller evened out the partitions
    _same_count_across(builder, 12, began)
    failing = judge(builder, tmp_path / "without").verdict("double-acquisition")
    assert (failing.status, failing.violations) == ("fail", 1)  # no fault explains it
    builder.record_leadership()
    builder.leader_change(TOPIC, 1, 2, began, "balance", released=began + 0.1, loaded=began + 0.3)
    result = judge(builder, tmp_path / "with")
    all_pass(result)
    assert "1 same-count redelivery across a leader change" in result.verdict("double-acquisition").summary


def test_a_balance_move_over_before_the_first_delivery_was_asked_for_excuses_nothing(builder, tmp_path):
    began = produced_at(1, 12) - 1.0  # released before s01 asked for the record
    _same_count_across(builder, 12, produced_at(1, 12) + 0.2)
    builder.record_leadership()
    builder.leader_change(TOPIC, 1, 2, began, "balance", released=began + 0.1, loaded=began + 0.3)
    only_failure(judge(builder, tmp_path), "double-acquisition", 1)


def test_a_classic_rebalance_after_a_recorded_coordinator_failover_is_a_failover_rebalance(builder, tmp_path):
    builder.record_leadership()
    builder.rebalance_start(M0, 2, F0_AT + 1.0, "ILLEGAL_GENERATION")
    verdict = only_failure(judge(builder, tmp_path), "failover-rebalance", 1)
    assert kinds(verdict.evidence) == ["leadership", "rebalance_start"]
    assert verdict.evidence[0]["detail"] == {"cause": "failover", "previous": "group-coordinator-0"}


def test_a_coordinator_balance_move_no_fault_names_is_judged_too(builder, tmp_path):
    at = 35.0
    builder.rebalance_start(M0, 2, at + 0.8, "UNKNOWN_MEMBER_ID")
    assert statuses_of(judge(builder, tmp_path / "without"))["failover-rebalance"] == "pass"  # no fault moved it
    builder.record_leadership()
    builder.leader_change("__consumer_offsets", group_partition(CLASSIC, 50), 3, at, "balance", released=at + 0.1,
                          loaded=at + 0.2, actor="group-coordinator-2", previous="group-coordinator-1")
    verdict = only_failure(judge(builder, tmp_path / "with"), "failover-rebalance", 1)
    assert "balance to epoch 3" in verdict.evidence[0]["why"]


def test_a_restarted_clusters_placement_is_judged_and_the_first_one_is_not(builder, tmp_path):
    at = 35.0
    builder.fault(3, at, "restart-cluster", "cluster", actors=["group-coordinator-1"])
    builder.record_leadership()
    builder.leader_change("__consumer_offsets", group_partition(CLASSIC, 50), 3, at + 2.0, "startup",
                          actor="group-coordinator-0", previous=None)
    builder.rebalance_start(M0, 2, at + 3.0, "ILLEGAL_GENERATION")
    only_failure(judge(builder, tmp_path), "failover-rebalance", 1)


def statuses_of(result) -> dict[str, str]:
    return {v.name: v.status for v in result.verdicts}
