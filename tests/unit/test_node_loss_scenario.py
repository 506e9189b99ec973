"""loadtest/scenarios/node-loss.toml is a valid scenario that kills a non-head Ray node (issue 11)."""

from pathlib import Path

from loadtest.experiment.scenario import load_scenario


def test_node_loss_scenario_kills_a_worker_node_mid_load():
    s = load_scenario(Path(__file__).parents[2] / "loadtest/scenarios/node-loss.toml")
    assert s.cluster.nodes == 3
    [fault] = s.faults
    assert fault.action == "kill-node" and 1 <= fault.node < s.cluster.nodes
    assert 0 < fault.at_s < s.duration_s
