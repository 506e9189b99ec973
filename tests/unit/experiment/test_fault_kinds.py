"""The fault kinds are one registry (loadtest/experiment/fault_kinds.py): the scenario's Action type
names exactly its kinds, and what the runner and checker read of a kind is what each fault does."""

from __future__ import annotations

import typing

from loadtest.experiment.fault_kinds import KINDS, MOVES_LEADERSHIP
from loadtest.experiment.scenario import Action


def test_the_scenarios_actions_are_the_registrys_kinds():
    assert set(typing.get_args(Action)) == set(KINDS)


def test_what_each_kind_does_to_leadership_and_when_it_is_over():
    assert MOVES_LEADERSHIP == {"kill", "move", "restart-cluster", "kill-node"}  # a pause keeps its leader
    assert {a for a, k in KINDS.items() if k.over_once_injected} == {"kill", "move", "kill-node"}
    assert {a for a, k in KINDS.items() if k.own_cluster} == {"restart-cluster", "kill-node"}
    assert {a for a, k in KINDS.items() if k.recovery_after_end} == {"kill-node"}
    assert {a: k.target for a, k in KINDS.items()} == {
        "kill": "actor", "pause": "actor", "move": "partition", "restart-cluster": "cluster", "kill-node": "node"}
