"""Placement over Ray nodes, as functions of data: spread, join, leave (issue 11)."""

from __future__ import annotations

from collections import Counter

from cluster.calls.kinds import ActorKind
from cluster.metadata import CONSUMER_OFFSETS
from cluster.control.placement import LiveActor, RebalancePolicy, actors_to_start, desired_leadership, rebalance, rebalance_due

PL = ActorKind.PARTITION_LEADER
GC = ActorKind.GROUP_COORDINATOR
USER = [("t", p) for p in range(12)]
OFFSETS = [(CONSUMER_OFFSETS, p) for p in range(6)]


def node_loads(leaders, live, kind=PL):
    node = {a.name: a.node_id for a in live if a.kind is kind}
    return Counter(node[name] for name in leaders.values() if name in node)


def settle(leaders, live, policy, now=0.0, moved_at=None):
    """Rebalance pass after pass (time moving on past cooldowns) until nothing moves."""
    leaders, moved_at, passes, moved = dict(leaders), dict(moved_at or {}), [], set()
    for _ in range(50):
        moves = rebalance(leaders, live, moved_at, now, policy)
        if not moves:
            due = rebalance_due(leaders, live, moved_at, now, policy)
            if due is None:
                break
            now = due
            continue
        passes.append(len(moves))
        for tp, name in moves.items():
            assert leaders[tp] != name
            leaders[tp] = name
            moved_at[tp] = now
            moved.add(tp)
    return leaders, passes, moved


def test_partitions_spread_over_nodes_first_and_actors_on_a_node_second():
    live = [LiveActor("pl-0", PL, "a"), LiveActor("pl-1", PL, "a"), LiveActor("pl-2", PL, "b")]
    leaders = desired_leadership(USER, {}, live)
    assert node_loads(leaders, live) == {"a": 6, "b": 6}
    assert Counter(leaders.values()) == {"pl-0": 3, "pl-1": 3, "pl-2": 6}


def test_a_node_that_joins_takes_a_fair_share_and_no_more_a_bounded_number_a_pass():
    two = [LiveActor("pl-a", PL, "a"), LiveActor("pl-b", PL, "b")]
    leaders = desired_leadership(USER, {}, two)
    three = [*two, LiveActor("pl-c", PL, "c")]
    after, passes, moved = settle(leaders, three, RebalancePolicy(max_moves=3, cooldown=10))
    assert len(moved) == 4 == len(USER) // 3  # 1/N of the partitions, each moved once
    assert passes == [3, 1]
    assert node_loads(after, three) == {"a": 4, "b": 4, "c": 4}
    assert {tp for tp in USER if after[tp] == "pl-c"} == moved


def test_a_partition_that_moved_recently_stays_until_its_cooldown_ends():
    two = [LiveActor("pl-a", PL, "a"), LiveActor("pl-b", PL, "b")]
    leaders = {tp: "pl-a" for tp in USER[:4]}
    recent = {tp: 100.0 for tp in USER[:3]}  # moved at t=100
    moves = rebalance(leaders, two, recent, 105.0, RebalancePolicy(cooldown=30))
    assert moves == {USER[3]: "pl-b"}
    leaders.update(moves)
    assert rebalance(leaders, two, {**recent, USER[3]: 105.0}, 105.0, RebalancePolicy(cooldown=30)) == {}
    assert rebalance_due(leaders, two, {**recent, USER[3]: 105.0}, 105.0, RebalancePolicy(cooldown=30)) == 130.0


def test_a_node_that_leaves_moves_exactly_its_partitions_and_keeps_the_rest_balanced():
    three = [LiveActor("pl-a", PL, "a"), LiveActor("pl-b", PL, "b"), LiveActor("pl-c", PL, "c")]
    leaders = desired_leadership(USER, {}, three)
    survivors = three[:2]
    after = desired_leadership(USER, leaders, survivors)
    changed = {tp for tp in USER if after[tp] != leaders[tp]}
    assert changed == {tp for tp in USER if leaders[tp] == "pl-c"}
    assert node_loads(after, survivors) == {"a": 6, "b": 6}
    assert rebalance(after, survivors, {}, 0.0) == {}


def test_no_partition_of_a_kind_lands_on_a_node_without_an_actor_of_that_kind():
    live = [LiveActor("gc-a", GC, "a"), LiveActor("gc-b", GC, "b"), LiveActor("pl-a", PL, "a"), LiveActor("pl-c", PL, "c")]
    leaders = desired_leadership(OFFSETS + USER, {}, live)
    node = {a.name: a.node_id for a in live}
    assert {node[leaders[tp]] for tp in OFFSETS} == {"a", "b"}
    assert {node[leaders[tp]] for tp in USER} == {"a", "c"}
    # a third node with a partition leader only: user partitions go there, offsets never do
    joined = [*live, LiveActor("pl-d", PL, "d")]
    after, _, moved = settle(leaders, joined, RebalancePolicy())
    assert {node.get(after[tp], "d") for tp in OFFSETS} <= {"a", "b"}
    assert moved and all(tp[0] == "t" for tp in moved)


def test_a_cluster_on_one_node_never_moves_for_balance():
    live = [LiveActor("pl-0", PL, "a"), LiveActor("pl-1", PL, "a")]
    assert rebalance({tp: "pl-0" for tp in USER}, live, {}, 0.0) == {}


def test_every_node_runs_an_actor_of_each_kind_and_the_cluster_at_least_the_wanted_count():
    assert actors_to_start(2, {}, ["a", "b", "c"]) == {"a": 1, "b": 1, "c": 1}
    assert actors_to_start(4, {"a": 1, "b": 1}, ["a", "b", "c"]) == {"c": 1, "a": 1}
    assert actors_to_start(2, {"a": 1, "b": 1}, ["a", "b"]) == {}
    # a node's actors died with it: the survivors make up the count
    assert actors_to_start(4, {"a": 2, "b": 1}, ["a", "b"]) == {"b": 1}


# -- a fresh actor (a replacement, or one a node just started) takes its share at once (issue 21) ------


def apply(leaders, moves):
    assert all(leaders[tp] != name for tp, name in moves.items())
    return {**leaders, **moves}


def test_a_fresh_actor_on_one_node_takes_a_fair_share_at_once_a_bounded_number_a_pass():
    # pl-0 died; its partitions failed over to pl-1 a moment ago (all in their cooldown); pl-2 replaces it.
    live = [LiveActor("pl-1", PL, "a"), LiveActor("pl-2", PL, "a", fresh=True)]
    leaders = {tp: "pl-1" for tp in USER}
    moved_at = {tp: 100.0 for tp in USER}
    policy = RebalancePolicy(max_moves=4, cooldown=30)
    passes = []
    for _ in range(5):
        moves = rebalance(leaders, live, moved_at, 101.0, policy)
        if not moves:
            break
        assert set(moves.values()) == {"pl-2"}
        passes.append(len(moves))
        leaders = apply(leaders, moves)
        moved_at.update({tp: 101.0 for tp in moves})
    assert passes == [4, 2]
    assert Counter(leaders.values()) == {"pl-1": 6, "pl-2": 6}
    assert rebalance_due(leaders, live, moved_at, 101.0, policy) is None  # nothing waits for a cooldown


def test_a_fresh_actor_takes_partitions_past_their_cooldown_first():
    live = [LiveActor("pl-1", PL, "a"), LiveActor("pl-2", PL, "a", fresh=True)]
    leaders = {tp: "pl-1" for tp in USER[:4]}
    moved_at = {USER[2]: 100.0, USER[3]: 100.0}  # 0 and 1 have led here for long
    # Two of the four go, to even them out: the two that have not just moved.
    assert rebalance(leaders, live, moved_at, 101.0, RebalancePolicy(cooldown=30)) == {USER[1]: "pl-2", USER[0]: "pl-2"}


def test_a_fresh_actor_on_a_node_that_lost_its_actor_takes_its_share_back_without_waiting():
    # pl-b0 died right after the topic was created: everything moved within the cooldown.
    live = [LiveActor("pl-a", PL, "a"), LiveActor("pl-b1", PL, "b", fresh=True)]
    leaders = {tp: "pl-a" for tp in USER}
    moved_at = {tp: 100.0 for tp in USER}
    after, passes, _ = settle(leaders, live, RebalancePolicy(max_moves=8, cooldown=30), now=101.0, moved_at=moved_at)
    assert passes == [6]
    assert node_loads(after, live) == {"a": 6, "b": 6}
    # Not fresh, it waits out the cooldown, as before.
    stale = [live[0], LiveActor("pl-b1", PL, "b")]
    assert rebalance(leaders, stale, moved_at, 101.0, RebalancePolicy(cooldown=30)) == {}


def test_an_idle_actor_that_is_not_fresh_gets_nothing_on_its_node():
    live = [LiveActor("pl-0", PL, "a"), LiveActor("pl-1", PL, "a")]
    assert rebalance({tp: "pl-0" for tp in USER}, live, {}, 0.0) == {}
