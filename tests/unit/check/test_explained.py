"""What looks like an anomaly but is how the protocols work must not fail: re-reads after a
rebalance that came before the commit, share redeliveries after a RELEASE or a failed
acknowledgement, a delivery count handed out again across a leader change, churn."""

from __future__ import annotations

from tests.unit.check.runbuilder import (
    CLASSIC,
    F0_AT,
    F1_AT,
    F2_AT,
    F2_END,
    LIMIT,
    M0,
    M1,
    S0,
    SHARE,
    S1,
    TOPIC,
    judge,
    only_failure,
    ms,
    produced_at,
)


def statuses(result) -> dict[str, str]:
    return {v.name: v.status for v in result.verdicts}


def all_pass(result) -> None:
    assert set(statuses(result).values()) == {"pass"}, {v.name: v.summary for v in result.verdicts if v.status != "pass"}


def test_the_clean_run_passes_every_invariant(builder, tmp_path):
    result = judge(builder, tmp_path)
    all_pass(result)
    assert result.ok and not result.notes
    assert all(v.checked > 0 and v.violations == 0 and not v.evidence for v in result.verdicts)
    assert [v.name for v in result.verdicts] == [
        "lost-write", "duplicate", "duplicate-share", "nonmonotonic-commit", "double-acquisition",
        "delivery-count-exceeded", "unfinished-share-record", "unstable-group", "failover-rebalance", "incomplete-read",
        "double-ownership"]


def test_a_classic_re_read_after_a_rebalance_that_came_before_the_commit_is_explained(builder, tmp_path):
    # m01 read orders-1@2 but left before committing it: m00 starts at the committed 2 and reads it again.
    builder.remove(lambda r: r["kind"] == "commit" and r["member"] == M1 and r["offset"] == 3)
    (position,) = builder.find(kind="position", member=M0, partition=1)
    position["offset"] = 2
    builder.classic_delivery(M0, 1, 2, 2, 10.95)
    result = judge(builder, tmp_path)
    all_pass(result)
    assert "1 repeat, each after a rebalance" in result.verdict("duplicate").summary


def test_a_share_redelivery_after_a_release_is_explained(builder, tmp_path):
    # The clean run has one (orders-0@4, released by s00); here s01 gets a second released record.
    t = produced_at(1, 3)
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, 3))
    builder.ack(S1, 1, 3, 1, "RELEASE", t + 0.4)
    builder.share_delivery(S0, 1, 3, 2, t + 0.6)
    builder.ack(S0, 1, 3, 2, "REJECT", t + 0.9)
    result = judge(builder, tmp_path)
    all_pass(result)
    assert "2 delivered more than once" in result.verdict("duplicate-share").summary


def test_a_share_redelivery_after_a_failed_accept_is_explained(builder, tmp_path):
    # s00's ACCEPT of orders-0@6 timed out: its lock expired and s01 got the record again.
    (accept,) = builder.find(kind="ack", partition=0, offset=6)
    accept["error"] = "REQUEST_TIMED_OUT"
    t = produced_at(0, 6) + 16.0
    builder.share_delivery(S1, 0, 6, 2, t)
    builder.ack(S1, 0, 6, 2, "ACCEPT", t + 0.3)
    all_pass(judge(builder, tmp_path))


def _same_count_again(builder, offset: int) -> None:
    """s00 got orders-0@offset (count 1) and never acknowledged it; s01 got it with count 1 again a
    second after F1 moved the partition's leadership (F1 recovered at 32.03 s)."""
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (0, offset))
    again = max(F1_AT, produced_at(0, offset)) + 1.0
    builder.share_delivery(S1, 0, offset, 1, again)
    builder.ack(S1, 0, offset, 1, "ACCEPT", again + 0.4)


def test_the_same_delivery_count_again_across_a_leader_change_is_explained(builder, tmp_path):
    _same_count_again(builder, 9)  # first asked for at 29.02 s, before the move was over
    result = judge(builder, tmp_path)
    all_pass(result)
    assert "1 same-count redelivery across a leader change" in result.verdict("double-acquisition").summary


def test_the_same_delivery_count_is_not_explained_by_a_move_over_before_the_first_was_asked_for(builder, tmp_path):
    _same_count_again(builder, 11)  # first asked for at 35.02 s, after the move was over
    found = judge(builder, tmp_path).verdict("double-acquisition")
    assert (found.status, found.violations) == ("fail", 1)


def test_a_rebalance_after_churn_in_a_coordinator_failover_window_is_not_a_failover_rebalance(builder, tmp_path):
    builder.member("member_start", "classic", f"{CLASSIC}/m02", F0_AT + 0.8, CLASSIC)
    builder.rebalance_start(M0, 2, F0_AT + 1.5, "REBALANCE_IN_PROGRESS")
    result = judge(builder, tmp_path)
    all_pass(result)
    assert "1 rebalance after churn" in result.verdict("failover-rebalance").summary


def test_a_group_unsettled_during_a_pause_is_judged_from_the_pauses_end(builder, tmp_path):
    for row in builder.find(kind="group_state", group=CLASSIC):
        if ms(F2_AT) < row["time"] <= ms(F2_END):
            row.update(state="PreparingRebalance", detail={"members": 1})
    all_pass(judge(builder, tmp_path))


def test_by_the_clients_view_a_release_or_an_expiry_at_the_limit_finishes_a_record(builder, tmp_path):
    builder.share_final = None  # judged from the acknowledgements
    for offset, last in ((10, "RELEASE"), (11, None)):  # None: the lock expires at the limit
        t = produced_at(1, offset)
        builder.remove(lambda r, o=offset: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, o))
        for count in range(1, LIMIT):
            builder.ack(S1, 1, offset, count, "RELEASE", t + 0.05 * count + 0.02)
            builder.share_delivery(S1, 1, offset, count + 1, t + 0.05 * count + 0.04)
        if last:
            builder.ack(S1, 1, offset, LIMIT, last, t + 0.4)
    result = judge(builder, tmp_path)
    all_pass(result)
    assert "clients' acknowledgements" in result.verdict("unfinished-share-record").summary


def test_topics_a_group_does_not_read_are_not_owed_to_it(builder, tmp_path):
    builder.info["topics"].append({"name": "payments", "topic_id": "0b6f-p", "partitions": 1})
    builder.add("produce", 5.0, 4.9, role="producer", member="payments-producer-0", topic="payments", partition=0,
                offset=0, key="p0")
    builder.add("end_offset", 44.5, role="runner", topic="payments", partition=0, offset=1)
    result = judge(builder, tmp_path)
    all_pass(result)
    assert result.verdict("lost-write").checked == 3 * 28  # orders only, for the three groups
    assert TOPIC in builder.info["groups"]["classic"][CLASSIC]


def test_the_same_delivery_count_after_its_holder_stopped_is_a_closed_session_not_a_double_hold(builder, tmp_path):
    """KAFKA-17541: a record released because its holder's session closed gives its delivery back."""
    _same_count_again(builder, 11)  # after the move was over: only the closed session explains it
    builder.member("member_stop", "share", S0, produced_at(0, 11) + 0.5, SHARE)
    result = judge(builder, tmp_path)
    found = result.verdict("double-acquisition")
    assert (found.status, found.violations) == ("pass", 0)
    assert "across a leader change or a closed session" in found.summary


def _stale_session_holds(builder, offset: int) -> float:
    """s00 got orders-0@offset through a share session on one gateway and, its partition's leader
    having moved to the other gateway, fetches it there from now on: its decision waits in the old
    session. The lock expires and s00 gets the record again there (count 2). Returns when."""
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (0, offset))
    again = produced_at(0, offset) + 15.2
    builder.share_delivery(S0, 0, offset, 2, again)
    return again


def test_a_stale_accept_of_an_expired_delivery_applied_to_the_members_later_holding_is_no_duplicate(builder, tmp_path):
    # Seen in the fault-kinds scenario: the member RELEASEd the redelivery, got it a third time, and
    # the stale ACCEPT (meant for count 1) then acknowledged what it held, count 3.
    again = _stale_session_holds(builder, 5)
    builder.ack(S0, 0, 5, 2, "RELEASE", again + 0.1)
    builder.share_delivery(S0, 0, 5, 3, again + 0.1)
    builder.ack(S0, 0, 5, 1, "ACCEPT", again + 0.4)  # the old session's, 15 s late
    all_pass(judge(builder, tmp_path))


def test_a_stale_accept_answered_after_the_members_own_accept_of_a_redelivery_proves_nothing(builder, tmp_path):
    # The redelivery's ACCEPT completed the record first; the stale one then fell below the start
    # offset, which Kafka skips and answers NONE.
    again = _stale_session_holds(builder, 7)
    builder.ack(S0, 0, 7, 2, "ACCEPT", again + 0.1)
    builder.ack(S0, 0, 7, 1, "ACCEPT", again + 0.4)
    all_pass(judge(builder, tmp_path))


def test_a_join_under_way_when_the_coordinator_moves_explains_the_rebalances_until_it_ends(builder, tmp_path):
    """m02 starts before the move and, its pending id lost with the old coordinator, joins only
    after it: the group rebalances past its start's reach (7 s here) but while it joins, and once
    more in the cooperative round just after its join ends."""
    m2 = f"{CLASSIC}/m02"
    builder.member("member_start", "classic", m2, F0_AT - 1.0, CLASSIC)
    builder.rebalance_start(M0, 2, F0_AT + 7.0, "REBALANCE_IN_PROGRESS")  # 8 s after m02's start
    builder.add("rebalance_end", F0_AT + 8.0, role="classic", member=m2, member_id=f"{m2}-id", group=CLASSIC,
                generation=3, detail={"assignment": {}})
    builder.rebalance_start(M0, 3, F0_AT + 9.5, "REBALANCE_IN_PROGRESS")  # the cooperative round after it
    result = judge(builder, tmp_path)
    all_pass(result)
    assert "2 rebalances after churn" in result.verdict("failover-rebalance").summary


def test_a_finished_join_does_not_explain_a_rebalance_past_its_reach(builder, tmp_path):
    m2 = f"{CLASSIC}/m02"
    builder.member("member_start", "classic", m2, F0_AT - 9.0, CLASSIC)
    builder.add("rebalance_end", F0_AT - 8.0, role="classic", member=m2, member_id=f"{m2}-id", group=CLASSIC,
                generation=2, detail={"assignment": {}})
    builder.rebalance_start(M0, 2, F0_AT + 1.5, "REBALANCE_IN_PROGRESS")  # 9.5 s after the join ended
    only_failure(judge(builder, tmp_path), "failover-rebalance", 1)
