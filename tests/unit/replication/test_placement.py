"""Replica placement over nodes: distinct nodes per partition, leaders and replicas even."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.replication.placement import (
    assign_replicas,
    balance_moves,
    default_replication_factor,
    replacements,
    replication_factor_error,
)


@pytest.mark.parametrize("nodes, rf", [(1, 1), (2, 2), (3, 3), (7, 3)])
def test_the_default_replication_factor_is_three_where_there_are_three_nodes(nodes, rf):
    assert default_replication_factor(nodes) == rf


def test_a_replication_factor_above_the_nodes_is_refused():
    assert replication_factor_error(-1, 1) is None
    assert replication_factor_error(3, 3) is None
    assert "larger than the 2 node(s)" in replication_factor_error(3, 2)
    assert "at least 1" in replication_factor_error(0, 3)


def test_three_partitions_on_three_nodes_each_lead_once():
    placed = assign_replicas([("t", p) for p in range(3)], [10, 11, 12], 3)
    assert sorted(a[0] for a in placed.values()) == [10, 11, 12]
    assert all(sorted(a) == [10, 11, 12] for a in placed.values())


@settings(max_examples=300, deadline=None)
@given(nodes=st.integers(1, 9), partitions=st.integers(1, 100), data=st.data())
def test_replicas_are_distinct_and_spread_within_one(nodes, partitions, data):
    rf = data.draw(st.integers(1, nodes))
    ids = list(range(100, 100 + nodes))
    placed = assign_replicas([("t", p) for p in range(partitions)], ids, rf)
    leaders = {r: 0 for r in ids}
    load = {r: 0 for r in ids}
    for assigned in placed.values():
        assert len(assigned) == rf and len(set(assigned)) == rf and set(assigned) <= set(ids)
        leaders[assigned[0]] += 1
        for r in assigned:
            load[r] += 1
    assert max(leaders.values()) - min(leaders.values()) <= 1
    assert max(load.values()) - min(load.values()) <= 1


def test_new_partitions_count_what_the_existing_ones_place():
    existing = assign_replicas([("a", 0), ("a", 1)], [1, 2, 3], 2)
    more = assign_replicas([("b", 0)], [1, 2, 3], 2, existing)
    leaders = [a[0] for a in [*existing.values(), *more.values()]]
    assert sorted(leaders) == [1, 2, 3]


def test_a_refused_replication_factor_raises():
    with pytest.raises(ValueError):
        assign_replicas([("t", 0)], [1, 2], 3)


def test_a_nodes_partitions_keep_their_other_copies_on_many_nodes():
    """The review's case: even counts alone let node 0's partitions all share node 1 (losing both
    lost half the partitions, and node 1 alone took node 0's load)."""
    pairs = {frozenset(a) for a in assign_replicas([("t", p) for p in range(40)], range(4), 2).values()}
    assert len(pairs) == 6  # every pair of four nodes holds some partition
    placed = assign_replicas([("t", p) for p in range(30)], range(6), 3)
    partners = {r for a in placed.values() if 0 in a for r in a if r != 0}
    assert partners == {1, 2, 3, 4, 5}


def test_a_gone_node_is_replaced_in_place_by_the_least_loaded_other_node():
    assignments = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 4), ("t", 2): (3, 4, 1)}
    moved = replacements(assignments, gone={1}, replica_ids=[1, 2, 3, 4, 5])
    assert moved == {("t", 0): (5, 2, 3), ("t", 2): (3, 4, 5)}


def test_a_gone_leaders_replacement_goes_to_the_node_leading_fewest():
    assignments = {("t", 0): (1, 2), ("t", 1): (2, 3), ("t", 2): (3, 2)}
    moved = replacements(assignments, gone={1}, replica_ids=[1, 2, 3, 4])
    assert moved == {("t", 0): (4, 2)}


def test_a_gone_replica_with_nowhere_to_go_is_dropped_and_counts_nothing():
    """The review's case: a partial replacement must not count a node it did not use."""
    assignments = {("a", 0): (1, 2, 3, 4), ("b", 0): (1,)}
    moved = replacements(assignments, gone={1, 2}, replica_ids=[1, 2, 3, 4, 5])
    assert moved[("a", 0)] == (5, 3, 4)  # 2 has no replacement left: the target is one shorter
    assert moved[("b", 0)] == (3,)  # 3 and 4 lead nothing (5 now leads a-0), and hold one each


def test_a_partition_with_nowhere_to_go_keeps_its_live_replicas():
    assert replacements({("t", 0): (1, 2, 3)}, gone={1}, replica_ids=[1, 2, 3]) == {("t", 0): (2, 3)}
    assert replacements({("t", 0): (1,)}, gone={1}, replica_ids=[1]) == {}


def spread(assignments, ids) -> tuple[int, int]:
    """(max - min) of replicas per node and of leaders per node."""
    load = {r: sum(r in a for a in assignments.values()) for r in ids}
    leaders = {r: sum(a[0] == r for a in assignments.values()) for r in ids}
    return max(load.values()) - min(load.values()), max(leaders.values()) - min(leaders.values())


def test_a_node_that_joins_gets_its_share_of_replicas_and_leaders_a_wave_at_a_time():
    placed = assign_replicas([("t", p) for p in range(6)], [1, 2, 3], 3)
    wave = balance_moves(placed, [1, 2, 3, 4], max_moves=1)
    ((tp, target),) = wave.items()
    # One replica swapped for the new node, in its place: here the leader's (each node led two).
    before = placed[tp]
    assert [r for r in target if r not in before] == [4] and target[0] == 4 and len(target) == 3
    assert target[1:] == before[1:]
    current = dict(placed)
    waves = 0
    while moves := balance_moves(current, [1, 2, 3, 4], max_moves=2):
        assert len(moves) <= 2
        current.update(moves)
        waves += 1
    assert waves == 2  # 18 replicas over four nodes: 5, 5, 4, 4 after four moves
    assert spread(current, [1, 2, 3, 4]) == (1, 1)
    assert sum(4 in a for a in current.values()) == 4


def test_nothing_moves_within_one_of_even_or_while_a_replica_is_on_a_node_away():
    placed = assign_replicas([("t", p) for p in range(4)], [1, 2, 3], 2)
    assert balance_moves(placed, [1, 2, 3], 4) == {}
    assert balance_moves(placed, [1, 2, 4], 4) == {}  # node 3 away: its replicas are not balanced around
    assert balance_moves(placed, [1, 2, 3, 4], 0) == {}


@settings(max_examples=300, deadline=None)
@given(nodes=st.integers(1, 6), joined=st.integers(1, 3), partitions=st.integers(1, 60), moves=st.integers(1, 5), data=st.data())
def test_balancing_ends_within_one_of_even_keeping_every_partition_whole(nodes, joined, partitions, moves, data):
    rf = data.draw(st.integers(1, nodes))
    ids = list(range(nodes))
    every = ids + list(range(nodes, nodes + joined))
    current = assign_replicas([("t", p) for p in range(partitions)], ids, rf)
    _, leaders_before = spread(current, every)
    for _ in range(partitions * rf + 1):
        wave = balance_moves(current, every, moves)
        if not wave:
            break
        assert len(wave) <= moves
        for tp, target in wave.items():
            assert len(target) == rf and len(set(target)) == rf
            assert sum(a != b for a, b in zip(current[tp], target)) == 1  # one copy moves
        current.update(wave)
    else:
        raise AssertionError("balancing did not end")
    load_spread, leader_spread = spread(current, every)
    assert load_spread <= 1
    assert leader_spread <= max(leaders_before, 1)
