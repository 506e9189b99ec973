"""Placement and failover policy as functions of data."""

from __future__ import annotations

import pytest

from kernel.lifecycle import IllegalTransition

from cluster.control.actor_state import ActorEntry, ActorState
from cluster.calls.kinds import ActorKind
from cluster.metadata import CONSUMER_OFFSETS
from cluster.control.placement import LiveActor, desired_leadership, missing_actors, place, retry_delay

PL = ActorKind.PARTITION_LEADER
GC = ActorKind.GROUP_COORDINATOR


def test_a_partition_stays_on_its_live_leader():
    live = [LiveActor("pl-0", PL), LiveActor("pl-1", PL)]
    current = {("t", 0): "pl-1", ("t", 1): "pl-1"}
    assert desired_leadership([("t", 0), ("t", 1)], current, live) == current


def test_a_dead_leaders_partitions_go_to_the_least_loaded_live_actor_of_their_kind():
    live = [LiveActor("pl-0", PL), LiveActor("pl-2", PL), LiveActor("gc-0", GC)]
    current = {("t", 0): "pl-1", ("t", 1): "pl-1", ("t", 2): "pl-0", (CONSUMER_OFFSETS, 0): "gc-0"}
    desired = desired_leadership(list(current), current, live)
    assert desired == {("t", 0): "pl-2", ("t", 1): "pl-0", ("t", 2): "pl-0", (CONSUMER_OFFSETS, 0): "gc-0"}


def test_a_partition_with_no_live_actor_of_its_kind_is_left_out():
    live = [LiveActor("pl-0", PL)]
    assert desired_leadership([(CONSUMER_OFFSETS, 0), ("t", 0)], {(CONSUMER_OFFSETS, 0): "gc-0"}, live) == {("t", 0): "pl-0"}


def test_ties_between_actors_go_to_the_least_loaded_node():
    live = [LiveActor("pl-0", PL, "a"), LiveActor("pl-1", PL, "a"), LiveActor("pl-2", PL, "b")]
    assert place([("t", 0), ("t", 1), ("t", 2)], live, {}) == {("t", 0): "pl-0", ("t", 1): "pl-2", ("t", 2): "pl-1"}


def test_only_actors_short_of_the_wanted_count_are_started():
    assert missing_actors({PL: 2, GC: 2}, {PL: 1, GC: 2}) == {PL: 1}


def test_retries_back_off_doubling_up_to_a_cap():
    assert [retry_delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert retry_delay(30) == 30.0


def test_an_actor_lifecycle_follows_its_table():
    entry = ActorEntry("gateway-0", ActorKind.GATEWAY, handle=None)
    entry.move_to(ActorState.READY)
    entry.move_to(ActorState.DEAD)
    assert not entry.alive
    entry.move_to(ActorState.RESTARTING)
    assert entry.alive and not entry.ready
    entry.move_to(ActorState.READY)
    with pytest.raises(IllegalTransition):
        entry.move_to(ActorState.STARTING)
