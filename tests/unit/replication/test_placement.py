"""Replica placement over nodes: distinct nodes per partition, leaders and replicas even."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.replication.placement import (
    assign_replicas,
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
