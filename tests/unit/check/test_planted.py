"""One planted anomaly per invariant: exactly that verdict fails, with its count and the rows that show it.

Each test starts from the clean run (runbuilder.clean_run), plants what a real anomaly would leave
in the event log or the decoded records, and asserts that every other verdict still passes.
"""

from __future__ import annotations

from tests.unit.check.runbuilder import (
    CLASSIC,
    F0_AT,
    LIMIT,
    M0,
    M1,
    RECORDS,
    S0,
    S1,
    SHARE,
    TOPIC,
    ms,
    iso_of,
    judge,
    kinds,
    only_failure,
    produced_at,
)


def test_a_record_a_group_that_read_to_the_end_never_received_is_a_lost_write(builder, tmp_path):
    builder.remove(lambda r: r["kind"] == "delivery" and r["group"] == CLASSIC and (r["partition"], r["offset"]) == (1, 7))
    verdict = only_failure(judge(builder, tmp_path), "lost-write", 1)
    (row,) = verdict.evidence
    assert (row["kind"], row["group"], row["topic"], row["partition"], row["offset"]) == ("produce", CLASSIC, TOPIC, 1, 7)
    assert row["time"] == iso_of(produced_at(1, 7))
    assert CLASSIC in verdict.summary


def test_a_share_group_missing_a_record_is_a_lost_write_too(builder, tmp_path):
    builder.remove(lambda r: r["kind"] in ("delivery", "ack") and r["group"] == SHARE
                   and (r["partition"], r["offset"]) == (0, 9))
    verdict = only_failure(judge(builder, tmp_path), "lost-write", 1)
    assert (verdict.evidence[0]["group"], verdict.evidence[0]["offset"]) == (SHARE, 9)


def test_a_re_read_from_a_start_position_below_an_answered_commit_is_a_duplicate(builder, tmp_path):
    # After the churn m00 starts orders-1 at 1 (a reset) though m01's commit of 3 was answered: it
    # reads 1 and 2 again.
    builder.remove(lambda r: r["kind"] == "position" and r["member"] == M0 and r["partition"] == 1)
    builder.position(M0, 1, 1, 2, 10.9, 10.85, source="reset")
    builder.classic_delivery(M0, 1, 1, 2, 10.95)
    builder.classic_delivery(M0, 1, 2, 2, 10.96)
    verdict = only_failure(judge(builder, tmp_path), "duplicate", 2)
    assert kinds(verdict.evidence) == ["delivery", "delivery", "position", "commit"] * 2
    first, second, position, commit = verdict.evidence[:4]
    assert (first["member"], second["member"], first["offset"], second["offset"]) == (M1, M0, 1, 1)
    assert (position["offset"], commit["member"], commit["offset"]) == (1, M1, 3)
    assert "answered before the re-reader asked" in first["why"]


def test_two_deliveries_to_one_member_in_one_generation_after_one_position_are_a_duplicate(builder, tmp_path):
    builder.classic_delivery(M0, 0, 5, 2, produced_at(0, 5) + 0.07)
    verdict = only_failure(judge(builder, tmp_path), "duplicate", 1)
    assert kinds(verdict.evidence) == ["delivery", "delivery", "position"]
    assert "one member in one generation" in verdict.evidence[0]["why"]


def test_a_share_record_delivered_again_after_a_successful_accept_is_a_share_duplicate(builder, tmp_path):
    t = produced_at(0, 6)
    builder.share_delivery(S1, 0, 6, 2, t + 1.0)  # S0's ACCEPT of it succeeded at t + 0.4
    verdict = only_failure(judge(builder, tmp_path), "duplicate-share", 1)
    assert kinds(verdict.evidence) == ["delivery", "ack", "delivery"]
    acked, ack, again = verdict.evidence
    assert (acked["member"], ack["ack_type"], ack["error"], again["member"], again["delivery_count"]) == \
        (S0, "ACCEPT", "NONE", S1, 2)


def test_an_answered_commit_below_an_earlier_one_is_a_nonmonotonic_commit(builder, tmp_path):
    builder.commit(M0, 0, 2, 2, 30.0)  # after m00's commit of 10 (answered at 29.3)
    verdict = only_failure(judge(builder, tmp_path), "nonmonotonic-commit", 1)
    assert [(r["kind"], r["offset"]) for r in verdict.evidence] == [("commit", 10), ("commit", 2)]


def test_a_committed_offset_read_back_below_an_answered_commit_is_a_nonmonotonic_commit(builder, tmp_path):
    builder.position(M0, 1, 2, 2, 30.5, 30.4)  # source committed, but 10 was committed at 29.4
    verdict = only_failure(judge(builder, tmp_path), "nonmonotonic-commit", 1)
    assert [(r["kind"], r["offset"]) for r in verdict.evidence] == [("commit", 10), ("position", 2)]


def test_one_delivery_count_handed_to_two_members_is_a_double_acquisition(builder, tmp_path):
    t = produced_at(1, 5)
    builder.share_delivery(S0, 1, 5, 1, t + 0.2)  # S1 holds it (count 1) until its ACCEPT at t + 0.4
    verdict = only_failure(judge(builder, tmp_path), "double-acquisition", 1)
    assert [(r["member"], r["delivery_count"]) for r in verdict.evidence] == [(S1, 1), (S0, 1)]
    assert "delivery count 1" in verdict.evidence[0]["why"]


def test_a_record_acquired_while_its_holder_still_held_it_is_a_double_acquisition(builder, tmp_path):
    # S1 holds orders-1@5; S0 gets it (count 2) before S1's RELEASE of it, which then succeeds.
    t = produced_at(1, 5)
    (accept,) = builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, 5))
    builder.ack(S1, 1, 5, 1, "RELEASE", (accept["time"] - ms(0)) / 1000)
    builder.share_delivery(S0, 1, 5, 2, t + 0.2)
    builder.ack(S0, 1, 5, 2, "ACCEPT", t + 0.8)
    verdict = only_failure(judge(builder, tmp_path), "double-acquisition", 1)
    assert kinds(verdict.evidence) == ["delivery", "delivery", "ack"]
    assert (verdict.evidence[0]["member"], verdict.evidence[1]["member"], verdict.evidence[2]["ack_type"]) == \
        (S1, S0, "RELEASE")
    assert "still held it" in verdict.evidence[0]["why"]


def test_a_delivery_beyond_the_delivery_count_limit_fails_delivery_count_exceeded(builder, tmp_path):
    t = produced_at(1, 8)
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, 8))
    for count in range(1, LIMIT + 1):  # released at every count, handed out once more past the limit
        builder.ack(S1, 1, 8, count, "RELEASE", t + 0.5 * count - 0.3)
        builder.share_delivery(S1, 1, 8, count + 1, t + 0.5 * count)
    builder.ack(S1, 1, 8, LIMIT + 1, "ACCEPT", t + 0.5 * LIMIT + 0.2)
    verdict = only_failure(judge(builder, tmp_path), "delivery-count-exceeded", 1)
    assert [(r["kind"], r["delivery_count"]) for r in verdict.evidence] == [("delivery", LIMIT + 1)]


def test_a_record_left_available_in_the_final_durable_state_is_unfinished(builder, tmp_path):
    final = next(f for f in builder.share_final if f["topic_partition"] == 1)
    final.update(start_offset=RECORDS - 2, batches=[
        {"first_offset": RECORDS - 2, "last_offset": RECORDS - 2, "delivery_state": 2, "delivery_count": 1},
        {"first_offset": RECORDS - 1, "last_offset": RECORDS - 1, "delivery_state": 0, "delivery_count": 1}])
    verdict = only_failure(judge(builder, tmp_path), "unfinished-share-record", 1)
    (row,) = verdict.evidence
    assert (row["kind"], row["group"], row["partition"], row["offset"]) == ("produce", SHARE, 1, RECORDS - 1)
    assert "start offset 12" in row["why"]


def test_without_the_final_state_an_unacknowledged_record_is_unfinished_by_the_clients_view(builder, tmp_path):
    builder.share_final = None
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, 13))
    result = judge(builder, tmp_path)
    verdict = only_failure(result, "unfinished-share-record", 1)
    assert "never acknowledged" in verdict.evidence[0]["why"]
    assert "clients' acknowledgements" in verdict.summary
    assert any("share_state_final.parquet missing" in n for n in result.notes)


def test_a_group_not_seen_stable_within_the_bound_after_a_fault_is_unstable(builder, tmp_path):
    for row in builder.find(kind="group_state", group=CLASSIC):
        if ms(F0_AT) < row["time"] <= ms(31.0):
            row.update(state="PreparingRebalance", error="NONE", detail={"members": 1})
    verdict = only_failure(judge(builder, tmp_path), "unstable-group", 1)
    fault, before, *window = verdict.evidence
    assert (fault["kind"], fault["fault_id"]) == ("fault", 0)
    assert (before["kind"], before["state"]) == ("group_state", "Stable")
    assert [r["state"] for r in window] == ["PreparingRebalance"]


def test_a_classic_member_told_illegal_generation_after_its_coordinator_moved_is_a_failover_rebalance(builder, tmp_path):
    builder.rebalance_start(M0, 2, F0_AT + 1.0, "ILLEGAL_GENERATION")
    verdict = only_failure(judge(builder, tmp_path), "failover-rebalance", 1)
    assert kinds(verdict.evidence) == ["fault", "rebalance_start"]
    assert verdict.evidence[1]["detail"] == {"reason": "ILLEGAL_GENERATION"}


def test_a_share_member_fenced_after_its_coordinator_moved_is_a_failover_rebalance(builder, tmp_path):
    builder.fault(3, 33.0, "kill", "group-coordinator-1", groups=[SHARE], actors=["group-coordinator-1"])
    builder.add("fenced", 34.0, role="share", member=S1, member_id=f"{S1}-id", group=SHARE, generation=1,
                error="FENCED_MEMBER_EPOCH")
    verdict = only_failure(judge(builder, tmp_path), "failover-rebalance", 1)
    assert kinds(verdict.evidence) == ["fault", "fenced"]


def test_a_group_that_did_not_read_to_the_end_is_an_incomplete_read(builder, tmp_path):
    (drained,) = builder.find(kind="drained", group=SHARE, partition=1)
    drained.update(state="timeout", offset=RECORDS - 3)
    verdict = only_failure(judge(builder, tmp_path), "incomplete-read", 1)
    assert [(r["kind"], r["group"], r["state"]) for r in verdict.evidence] == [("drained", SHARE, "timeout")]
    lost_write = judge(builder, tmp_path / "again").verdict("lost-write")
    assert "1 group not read to the end not judged" in lost_write.summary  # only billing-0 judged


def test_an_acknowledgement_answered_after_another_members_accept_proves_no_double_hold(builder, tmp_path):
    # S1's lock on orders-1@5 expired; S0 got it (count 2) and ACCEPTed it; S1's late ACCEPT was
    # sent before S0's answer arrived but reached the broker after the record was done: Kafka skips
    # it and answers NONE, which says nothing about S1 still holding the record.
    t = produced_at(1, 5)
    builder.remove(lambda r: r["kind"] == "ack" and (r["partition"], r["offset"]) == (1, 5))
    builder.share_delivery(S0, 1, 5, 2, t + 16.0)
    builder.ack(S0, 1, 5, 2, "ACCEPT", t + 16.5)
    builder.add("ack", t + 16.6, t + 15.0, role="share", member=S1, group=SHARE, topic=TOPIC,
                partition=1, offset=5, delivery_count=1, ack_type="ACCEPT", error="NONE")
    result = judge(builder, tmp_path)
    assert result.ok, {v.name: v.summary for v in result.verdicts if v.status != "pass"}
