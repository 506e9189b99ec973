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
    assert len(scenario.faults) == 5 and len(scenario.classic_groups()) == 13
    assert {f.action for f in scenario.faults} == {"kill", "pause"}


def test_the_demo_runs_consumer_protocol_groups_beside_classic_ones_with_the_same_load():
    """Consumer groups took the place of some classic ones: the demo's members and groups are as
    many as before (218 clients, 18 consumer groups), so it is no slower on a 2-core machine; and
    its consumer groups show each key a consumer group may have."""
    scenario = parse_scenario(demo_scenario_text())
    consumer = scenario.consumer_groups()
    assert len(consumer) == 5 and len(scenario.classic_groups()) + len(consumer) == 18
    members = sum(g.count * g.members for g in scenario.groups) + sum(g.count * g.members for g in scenario.share_groups)
    assert members == 218
    specs = {spec.name: spec for spec in scenario.groups if spec.protocol == "consumer"}
    assert specs["ledger"].churn_every_s > 0 and specs["settle"].server_assignor == "range"
    assert specs["analytics"].topic_regex and set(specs["analytics"].topics) == {"orders", "payments"}


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


CONSUMER = """
[[topics]]
name = "payments"
partitions = 2
[[groups]]
name = "ledger"
count = 2
protocol = "consumer"
topics = ["orders"]
"""


def test_a_group_of_the_consumer_protocol_is_its_own_kind_and_a_fault_may_name_it():
    scenario = parse_scenario(BASE + CONSUMER + '[[faults]]\nat_s = 5\naction = "kill"\ncoordinator_of = "ledger-1"')
    assert sorted(scenario.classic_groups()) == ["billing-0", "billing-1"]
    assert sorted(scenario.consumer_groups()) == ["ledger-0", "ledger-1"]
    assert scenario.consumer_groups()["ledger-0"].server_assignor is None
    assert set(scenario.all_groups()) == {"billing-0", "billing-1", "ledger-0", "ledger-1", "workers"}
    assert parse_scenario(BASE).groups[0].protocol == "classic"  # the default


def test_a_consumer_group_may_subscribe_by_a_regex_that_matches_exactly_its_topics():
    text = BASE + CONSUMER.replace('topics = ["orders"]', 'topics = ["orders", "payments"]\ntopic_regex = "orders|pay.*"')
    assert parse_scenario(text).consumer_groups()["ledger-0"].topic_regex == "orders|pay.*"


@pytest.mark.parametrize("change, message", [
    (('count = 2\ntopics', 'count = 2\nserver_assignor = "uniform"\ntopics'),
     r"groups\[0\]\.server_assignor: only a group of protocol = \"consumer\""),
    (('protocol = "consumer"', 'protocol = "consumer"\nassignor = "roundrobin"'),
     r"groups\[1\]\.assignor: a classic group's"),
    (('protocol = "consumer"', 'protocol = "consumer"\nsession_timeout_ms = 20000'),
     r"groups\[1\]\.session_timeout_ms: a consumer group's is the coordinator's group.consumer.session.timeout.ms"),
    (('protocol = "consumer"', 'protocol = "consumer"\ntopic_regex = "pay.*"'),
     r"groups\[1\]\.topic_regex: matches \['payments'\] of the scenario's topics, not the group's topics \['orders'\]"),
    (('protocol = "consumer"', 'protocol = "consumer"\ntopic_regex = "("'), "not a regular expression"),
    (('protocol = "consumer"', 'protocol = "kip848"'), r"groups\[1\]\.protocol: invalid enum value 'kip848'"),
])
def test_what_only_one_protocol_has_is_refused_on_the_other(change, message):
    old, new = change
    with pytest.raises(ScenarioError, match=message):
        parse_scenario((BASE + CONSUMER).replace(old, new, 1), "s.toml")


def test_the_population_makes_consumer_members_of_consumer_groups():
    from loadtest.experiment.population import Population
    from loadtest.members.machine import Broker

    text = BASE + CONSUMER.replace('topics = ["orders"]', 'topics = ["payments"]\ntopic_regex = "pay.*"\n'
                                   'server_assignor = "range"\nrebalance_timeout_ms = 45000')
    population = Population(parse_scenario(text), [Broker("b", 1)])
    members = population.consumer["ledger-0"]
    assert [m.role for m in members] == ["consumer"] * 3 and members[0].name == "ledger-0/k000"
    config = members[0].config
    assert (config.topics, config.topic_regex, config.server_assignor, config.rebalance_timeout_ms) == \
        ([], "pay.*", "range", 45000)
    assert population.new_member("ledger-0").name == "ledger-0/k003"
    assert population.new_member("billing-1").role == "classic"
    assert set(population.readiness()) == {"classic", "consumer", "share"}


def test_the_protocols_scenario_twins_each_classic_group_with_a_consumer_group_on_its_topics():
    from pathlib import Path

    from loadtest.experiment.scenario import load_scenario

    scenario = load_scenario(Path(__file__).parents[3] / "loadtest" / "scenarios" / "protocols.toml")
    classic = {spec.name: spec for spec in scenario.groups if spec.protocol == "classic"}
    consumer = {spec.name: spec for spec in scenario.groups if spec.protocol == "consumer"}
    twins = {"billing": "ledger", "audit": "settle", "reporting": "analytics"}
    assert set(classic) == set(twins) and set(consumer) == set(twins.values())
    for c, k in twins.items():
        assert (classic[c].topics, classic[c].count, classic[c].members, classic[c].churn_every_s) == \
            (consumer[k].topics, consumer[k].count, consumer[k].members, consumer[k].churn_every_s)
    demo = parse_scenario(demo_scenario_text())
    actions = [(f.at_s, f.action) for f in demo.faults]
    assert set(actions) <= {(f.at_s, f.action) for f in scenario.faults}
    assert "ledger-0" in {f.coordinator_of for f in scenario.faults}
