"""split_budget: one ShareFetch's MaxRecords over the partition leaders (cluster/share/budget.py)."""

from __future__ import annotations

from cluster.share.budget import split_budget


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
