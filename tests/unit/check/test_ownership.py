"""double-ownership (loadtest/check/ownership.py) on the clean run's consumer group `ledger-0`:
k01 gives orders-1 up at 10.05 s (it leaves) and k00 takes it at 10.8 s. Planted: k00 taking it
before k01 gave it up. Explained: k01 losing it late, after the coordinator could have removed it.
And a property: handovers in order never overlap, and one taken early always does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.check.ownership import double_ownership
from tests.unit.check.runbuilder import (
    CHURN_AT,
    CONSUMER,
    HANDOVER_AT,
    K0,
    K1,
    REBALANCE_TIMEOUT_S,
    SESSION_TIMEOUT_S,
    TOPIC,
    RunBuilder,
    judge,
    kinds,
    ms,
    only_failure,
    run_json,
)

EARLY = 9.0  # before k01 gave orders-1 up


def take_early(builder, at: float = EARLY) -> None:
    """k00's row taking orders-1 comes at `at` instead of at the handover."""
    builder.remove(lambda r: r["kind"] == "assignment" and r["member"] == K0 and r["time"] == ms(HANDOVER_AT))
    builder.owns(K0, 2, at, [0, 1], "assigned", [1])


def lose_late(builder, heartbeat_answered_at: float | None, revocation_asked_at: float | None = None,
              at: float = CHURN_AT + 0.05) -> None:
    """k01 does not give orders-1 up: it is fenced and loses it at `at`, its last answered
    heartbeat sent at `heartbeat_answered_at`, asked to revoke at `revocation_asked_at`."""
    builder.remove(lambda r: r["kind"] == "assignment" and r["member"] == K1
                   and r["detail"]["reason"] in ("revoked", "lost"))
    builder.owns(K1, 1, at, [], "lost", [1],
                 heartbeat_answered_sent_ms=None if heartbeat_answered_at is None else ms(heartbeat_answered_at),
                 revocation_asked_ms=None if revocation_asked_at is None else ms(revocation_asked_at))


def test_a_clean_handover_passes(builder, tmp_path):
    verdict = judge(builder, tmp_path).verdict("double-ownership")
    assert (verdict.status, verdict.violations) == ("pass", 0)
    assert verdict.summary == "3 ownerships of 2 partitions in 1 consumer group, 1 handover, none overlapping"


def test_a_partition_given_to_a_member_before_its_owner_revoked_it_is_a_double_ownership(builder, tmp_path):
    take_early(builder)
    verdict = only_failure(judge(builder, tmp_path), "double-ownership", 1)
    assert kinds(verdict.evidence) == ["assignment"] * 3
    owner, taker, revoked = verdict.evidence
    assert (owner["member"], taker["member"], revoked["member"]) == (K1, K0, K1)
    assert (owner["detail"]["reason"], taker["detail"]["assigned"], revoked["detail"]["revoked"]) == \
        ("assigned", {TOPIC: [1]}, {TOPIC: [1]})
    assert f"{TOPIC}-1 of {CONSUMER} given to {K0} while {K1} owned it (until its revoked row)" == owner["why"]


def test_a_member_that_never_gave_a_partition_up_owns_it_until_it_stops(builder, tmp_path):
    builder.remove(lambda r: r["kind"] == "assignment" and r["member"] == K1 and r["detail"]["reason"] == "revoked")
    assert judge(builder, tmp_path / "stopped").verdict("double-ownership").status == "pass"  # its member_stop at 10 s
    builder.remove(lambda r: r["kind"] == "member_stop" and r["member"] == K1)
    verdict = only_failure(judge(builder, tmp_path), "double-ownership", 1)
    assert "until the end of the run" in verdict.evidence[0]["why"]


def test_a_loss_after_the_coordinator_could_have_removed_the_owner_explains_the_overlap(builder, tmp_path):
    # Its last heartbeat was answered at 2 s: from 2 + 6 = 8 s the coordinator may have expired it.
    take_early(builder)
    lose_late(builder, heartbeat_answered_at=2.0)
    verdict = judge(builder, tmp_path).verdict("double-ownership")
    assert verdict.status == "pass", verdict.summary
    assert "1 overlap after a member the coordinator could already have removed lost its partitions" in verdict.summary


def test_a_loss_does_not_explain_a_partition_given_on_before_the_owners_session_could_end(builder, tmp_path):
    take_early(builder)
    lose_late(builder, heartbeat_answered_at=EARLY - SESSION_TIMEOUT_S + 0.5)
    only_failure(judge(builder, tmp_path), "double-ownership", 1)


def test_a_revocation_asked_for_longer_than_the_rebalance_timeout_ago_explains_a_loss(builder, tmp_path):
    # k01 kept heartbeating (its session never ran out) but never finished revoking orders-1; k00
    # took it at 25 s and k01 heard it was fenced at 26 s.
    take_early(builder, at=25.0)
    lose_late(builder, heartbeat_answered_at=24.0, revocation_asked_at=25.0 - REBALANCE_TIMEOUT_S, at=26.0)
    assert judge(builder, tmp_path).verdict("double-ownership").status == "pass"
    lose_late(builder, heartbeat_answered_at=24.0, revocation_asked_at=25.0 - REBALANCE_TIMEOUT_S + 1, at=26.0)
    only_failure(judge(builder, tmp_path / "sooner"), "double-ownership", 1)


def test_without_consumer_groups_it_does_not_apply(builder):
    builder.info["groups"]["consumer"] = {}
    verdict = double_ownership(builder.run_data())
    assert (verdict.status, verdict.summary) == ("n/a", "the run has no groups of the consumer protocol")


owners = st.lists(st.integers(0, 3), min_size=2, max_size=8)
gaps = st.lists(st.floats(0.001, 3.0), min_size=16, max_size=16)


def handovers(members: list[int], gap: list[float], early: int | None = None) -> RunBuilder:
    """orders-0 of ledger-0 passed from member to member in order, each revoking before the next
    takes it; with `early`, the taker of that handover takes it before its giver gave it up."""
    b = RunBuilder(info=run_json(classic=False, share=False), share_state=None, share_final=None)
    t, previous, since = 1.0, None, 1.0  # since: when the owner took it
    for i, m in enumerate(members):
        member = f"{CONSUMER}/k0{m}"
        if previous is None:
            b.owns(member, 1, t, [0], "assigned", [0])
        elif previous != member:
            released = t + gap[2 * i]
            taken = released + gap[2 * i + 1] if i != early else (since + released) / 2
            b.owns(previous, i, released, [], "revoked", [0])
            b.owns(member, i + 1, taken, [0], "assigned", [0])
            t = since = max(released, taken)
        previous = member
    return b


@given(owners, gaps)
@settings(max_examples=60)
def test_handovers_in_order_never_overlap_and_one_out_of_order_always_does(members, gap):
    clean = double_ownership(handovers(members, gap).run_data())
    assert clean.status == "pass", clean.summary
    moves = [i for i in range(1, len(members)) if members[i] != members[i - 1]]
    if moves:
        planted = double_ownership(handovers(members, gap, early=moves[len(moves) // 2]).run_data())
        assert (planted.status, planted.violations) == ("fail", 1), planted.summary
