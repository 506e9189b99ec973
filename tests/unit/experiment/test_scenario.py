"""Scenario files: the example parses, and every kind of mistake is one line naming the field."""

from __future__ import annotations

import pytest

from loadtest.demo import demo_scenario_text
from loadtest.experiment.scenario import ScenarioError, parse_scenario

BASE = """
name = "t"
duration_s = 30
[[topics]]
name = "orders"
partitions = 4
[[groups]]
name = "billing"
count = 2
topics = ["orders"]
[[share_groups]]
name = "workers"
topics = ["orders"]
"""


def fault(text: str) -> str:
    return BASE + "[[faults]]\nat_s = 5\n" + text


def test_the_demo_scenario_parses_with_its_five_faults():
    scenario = parse_scenario(demo_scenario_text())
    assert len(scenario.faults) == 5 and len(scenario.classic_groups()) == 18
    assert {f.action for f in scenario.faults} == {"kill", "pause"}


def test_every_selector_counts_gateway_0_and_an_expanded_group_name_included():
    for text in ('action = "kill"\ngateway = 0', 'action = "kill"\ncoordinator_of = "billing-1"',
                 'action = "pause"\nduration_s = 2\nrandom = ["partition-leader"]',
                 'action = "move"\nleader_of = { topic = "orders", partition = 3 }',
                 'action = "kill"\nshare_coordinator_of = { group = "workers", topic = "orders", partition = 0 }',
                 'action = "restart-cluster"\ndown_s = 1'):
        assert parse_scenario(fault(text)).faults[0].at_s == 5


@pytest.mark.parametrize("text, message", [
    ("membrs = 3", "unknown key `membrs`"),
    ('duration_s = "ten"', "duration_s: expected `float`"),
])
def test_unknown_keys_and_wrong_types_name_their_field(text, message):
    source = BASE.replace('duration_s = 30', text) if "duration" in text else BASE.replace('count = 2', f"count = 2\n{text}")
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(source, "s.toml")


@pytest.mark.parametrize("text, message", [
    ('action = "kill"\ncoordinator_of = "nope"', r"faults\[0\]\.coordinator_of: no group named 'nope'"),
    ('action = "kill"', "needs exactly one of"),
    ('action = "kill"\ngateway = 0\nactor = "x"', "got gateway, actor"),
    ('action = "kill"\ngateway = 2', r"faults\[0\]\.gateway: the cluster has gateways 0..1"),
    ('action = "pause"\ngateway = 0', r"faults\[0\]\.duration_s: a pause needs a duration"),
    ('action = "move"\ngateway = 0', "move needs a partition"),
    ('action = "kill-node"\nnode = 1', "kill-node needs a cluster of several Ray nodes"),
    ('action = "kill"\nleader_of = { topic = "orders", partition = 4 }', "has partitions 0..3"),
    ('action = "kill"\nshare_coordinator_of = { group = "billing-0", topic = "orders", partition = 0 }',
     "no share group named 'billing-0'"),
])
def test_impossible_faults_are_refused_naming_the_field(text, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(fault(text), "s.toml")


def test_a_restart_or_node_kill_needs_the_cluster_the_experiment_starts():
    with pytest.raises(ScenarioError, match="no --bootstrap"):
        parse_scenario(fault('action = "restart-cluster"'), "s.toml", external_cluster=True)


def test_not_toml_is_one_line():
    with pytest.raises(ScenarioError, match="not valid TOML"):
        parse_scenario("name = ", "s.toml")
