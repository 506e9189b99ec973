"""One ShareFetch's MaxRecords and MaxBytes (cluster/share/fetch_policy.py): split over the leaders,
no long poll without a share, the hand-on round, and a leader's read of its own partitions."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcquiredRecords

from cluster.share.fetch_policy import (
    DEFAULT_MAX_RECORDS,
    READ_FLOOR,
    LeaderAnswer,
    acquired_count,
    hand_on,
    left_over,
    max_records,
    poll_wait,
    read_cap,
    split_budget,
)


@dataclass
class Out:
    records: bytes = b""
    acquired: tuple = ()
    error_code: ErrorCode = ErrorCode.none


def took(n: int, size: int = 0) -> Out:
    return Out(b"x" * size, (AcquiredRecords(0, n - 1, 1),) if n else ())


def test_the_budget_goes_by_partitions_fetched_and_never_exceeds_the_request():
    assert split_budget(500, [3, 3]) == [250, 250]
    assert split_budget(500, [2, 1]) == [334, 166]
    assert split_budget(5, [1, 1, 1]) == [2, 2, 1]  # rounding's remainder to the leaders named first
    for budget in range(0, 40):
        for weights in ([1], [1, 2], [3, 0, 2], [1, 1, 1, 1]):
            shares = split_budget(budget, weights)
            assert sum(shares) == budget
            assert all(s == 0 for s, w in zip(shares, weights) if w == 0)


def test_a_budget_smaller_than_the_leaders_leaves_the_last_without_a_share():
    assert split_budget(1, [2, 2]) == [1, 0]
    assert split_budget(0, [1, 1]) == [0, 0]
    assert split_budget(10, [0, 0]) == [0, 0]  # acknowledgements only


def test_a_request_without_max_records_gets_kafkas_default_and_a_leader_without_a_share_does_not_wait():
    assert max_records(0) == max_records(-1) == DEFAULT_MAX_RECORDS == 500
    assert max_records(7) == 7
    assert poll_wait(0, 5000) == 0 and poll_wait(1, 5000) == 5000


def test_what_outcomes_leave_of_the_budget():
    assert acquired_count([AcquiredRecords(0, 4, 1), AcquiredRecords(10, 10, 2)]) == 6
    assert left_over(100, 1000, [took(30, 300), took(0), took(5, 50)]) == (65, 650)


def test_a_leader_reads_what_its_records_took_before_with_a_margin_a_floor_and_never_past_the_bytes():
    assert read_cap(1000, 10**9, 100.0) == 125_000  # 1000 records of ~100 bytes, 25% more
    assert read_cap(10, 10**9, 100.0) == READ_FLOOR  # small reads cost no round per batch
    assert read_cap(1000, 5000, 100.0) == 5000  # the request's MaxBytes bounds it
    assert read_cap(1000, 0, 100.0) == 1  # a read of at least one byte: a batch past MaxBytes still comes


def test_hand_on_asks_again_only_leaders_that_used_their_share_for_partitions_that_got_nothing():
    answers = {
        "a": LeaderAnswer(50, [True, True], [took(50), took(0)]),  # used its share; p1 untouched
        "b": LeaderAnswer(50, [True, True], [took(10), took(0)]),  # had less than its share: nothing more there
    }
    bytes_left, again = hand_on(100, 10_000, answers)
    assert again == {"a": ([1], 40)} and bytes_left == 10_000


def test_hand_on_skips_failed_acknowledge_only_and_gone_and_stops_when_the_budget_is_spent():
    failed = Out(error_code=ErrorCode.not_leader_or_follower)
    answers = {
        "a": LeaderAnswer(0, [True, False, True], [took(0), took(0), failed]),  # no share, nothing to fetch again but p0
        "gone": LeaderAnswer(10, [True], None),
    }
    assert hand_on(10, 100, answers) == (100, {"a": ([0], 10)})
    assert hand_on(10, 100, {"a": LeaderAnswer(10, [True, True], [took(10), took(0)])}) == (100, {})  # MaxRecords spent
    assert hand_on(100, 5, {"a": LeaderAnswer(50, [True, True], [took(50, 5), took(0)])})[1] == {}  # MaxBytes spent


def test_what_is_left_is_split_over_the_leaders_asked_again_by_their_partitions():
    answers = {
        "a": LeaderAnswer(10, [True, True, True], [took(10), took(0), took(0)]),
        "b": LeaderAnswer(10, [True, True], [took(10), took(0)]),
    }
    _, again = hand_on(50, 10**6, answers)
    assert again == {"a": ([1, 2], 20), "b": ([1], 10)}
