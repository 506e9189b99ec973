"""Properties over random histories: at-least-once re-reads that the protocols explain never fail.

Classic: one partition read by a classic group through random rebalances. Each owner starts at
the highest commit answered before it asked (OffsetFetch), commits at random points, and at a
handover either commits before revocation or is gone without a last commit. Whatever the
interleaving, `duplicate` and `nonmonotonic-commit` pass, and every repeat is counted. Moving one
start position below a commit answered before it makes `duplicate` fail.

Share: records acquired one member at a time, each acquisition ending ACCEPT, REJECT, RELEASE, a
failed acknowledgement or a lock expiry, until done or at the delivery-count limit: no share
invariant fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.check.acquisition import double_acquisition
from loadtest.check.classic import duplicate
from loadtest.check.commits import nonmonotonic_commit
from loadtest.check.delivery_count import delivery_count_exceeded
from loadtest.check.share_duplicate import duplicate_share
from loadtest.check.unfinished import unfinished_share_record
from tests.unit.check.runbuilder import CLASSIC, LIMIT, RunBuilder, SHARE, TOPIC, run_json

N = 30  # records in the partition


@dataclass
class Era:
    owner: int  # member index
    reads_to: int  # the owner reads up to (not including) this offset
    commits: list[int]  # offsets (positions) committed along the way
    commits_at_handover: bool  # commits its position before the partition is revoked


eras = st.lists(
    st.builds(Era, st.integers(0, 3), st.integers(0, N), st.lists(st.integers(0, N), max_size=4), st.booleans()),
    min_size=1, max_size=6)


def classic_history(history: list[Era], stale_era: int | None = None) -> tuple[RunBuilder, int]:
    """The rows of the history, and how many deliveries repeat one before them. With `stale_era`,
    that era's owner starts at 0 although a commit was answered before it asked."""
    b = RunBuilder(info=run_json(share=False), share_state=None, share_final=None)
    clock = [1.0]

    def tick() -> float:
        clock[0] += 0.01
        return clock[0]

    for i in range(N):
        b.produce(0, i, tick())
    committed, deliveries = None, 0
    history = [*history[:-1], Era(history[-1].owner, N, history[-1].commits, True)]  # the last reads to the end
    for generation, era in enumerate(history, start=1):
        member = f"{CLASSIC}/m0{era.owner}"
        b.rebalance_end(member, generation, tick(), [0])
        asked = tick()
        start, reads_to = (committed if committed is not None else 0), era.reads_to
        if stale_era == generation - 1 and committed:
            start, reads_to = 0, max(reads_to, committed)  # and it reads what was committed again
        source = "committed" if committed is not None and start == committed else "reset"
        b.position(member, 0, start, generation, tick(), asked, source=source)
        position = start
        stops = sorted({c for c in era.commits if start < c <= max(start, reads_to)})
        for offset in range(start, max(start, reads_to)):
            b.classic_delivery(member, 0, offset, generation, tick())
            deliveries += 1
            position = offset + 1
            if position in stops:
                committed = max(committed or 0, position)
                b.commit(member, 0, position, generation, tick())
        if era.commits_at_handover and position > (committed or 0):
            committed = position
            b.commit(member, 0, position, generation, tick())
        b.rebalance_start(member, generation, tick(), "REBALANCE_IN_PROGRESS")
    return b, deliveries - N


@settings(max_examples=60, deadline=None)
@given(eras)
def test_classic_re_reads_after_rebalances_are_never_duplicates(history):
    b, repeats = classic_history(history)
    run = b.run_data()
    verdict = duplicate(run)
    assert verdict.status == "pass", verdict.evidence[:4]
    assert verdict.checked == N + repeats
    assert (f"{repeats} repeat" in verdict.summary) if repeats else ("no record delivered twice" in verdict.summary)
    assert nonmonotonic_commit(run).status in ("pass", "n/a")


@settings(max_examples=40, deadline=None)
@given(eras.filter(lambda h: len(h) >= 2), st.data())
def test_a_start_position_below_an_answered_commit_is_always_a_duplicate(history, data):
    stale = data.draw(st.integers(1, len(history) - 1))
    b, _ = classic_history(history, stale_era=stale)
    committed_before = [r for r in b.rows if r["kind"] == "commit"
                        and r["time"] < max(p["request_time"] for p in b.rows if p["kind"] == "position"
                                            and p["generation"] == stale + 1)]
    verdict = duplicate(b.run_data())
    if any(c["offset"] > 0 for c in committed_before):
        assert verdict.status == "fail" and verdict.violations >= 1
        assert "answered before the re-reader asked" in verdict.evidence[0]["why"]
    else:
        assert verdict.status == "pass"


OUTCOMES = ("ACCEPT", "REJECT", "RELEASE", "failed", "expired")
records = st.lists(st.lists(st.tuples(st.sampled_from(OUTCOMES), st.integers(0, 2)), min_size=1, max_size=LIMIT),
                   min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(records)
def test_share_records_acquired_one_member_at_a_time_pass_every_share_invariant(plans):
    b = RunBuilder(info=run_json(classic=False), share_state=None, share_final=None)
    t = 1.0
    for offset, plan in enumerate(plans):
        b.produce(0, offset, t)
        for count, (outcome, who) in enumerate(plan, start=1):
            member = f"{SHARE}/s0{who}"
            t += 0.1
            b.share_delivery(member, 0, offset, count, t)
            t += 0.1
            if outcome == "expired":
                t += 0.5  # the lock runs out; nobody acknowledges
            else:
                b.ack(member, 0, offset, count, "ACCEPT" if outcome == "failed" else outcome, t,
                      error="INVALID_RECORD_STATE" if outcome == "failed" else "NONE")
            if outcome in ("ACCEPT", "REJECT"):
                break
    b.add("end_offset", t + 1, role="runner", topic=TOPIC, partition=0, offset=len(plans))
    run = b.run_data()
    for check in (duplicate_share, double_acquisition, delivery_count_exceeded):
        verdict = check(run)
        assert verdict.status == "pass", (verdict.name, verdict.evidence[:3])
    finished = sum(1 for plan in plans if _finished(plan))
    unfinished = unfinished_share_record(run)
    assert (unfinished.checked, unfinished.violations) == (len(plans), len(plans) - finished)


def _finished(plan: list[tuple[str, int]]) -> bool:
    """The clients' view: done by ACCEPT/REJECT, or the last acquisition at the limit not accepted."""
    for count, (outcome, _) in enumerate(plan, start=1):
        if outcome in ("ACCEPT", "REJECT"):
            return True
    return len(plan) == LIMIT
