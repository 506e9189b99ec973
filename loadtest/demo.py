"""`raygroups demo`: the main job, small and self-contained.

The built-in scenario (loadtest/scenarios/demo.toml, also examples/demo.toml) on an embedded
cluster: 134 classic members in 13 groups (range, cooperative-sticky and round-robin, with churn),
50 members of KIP-848's consumer protocol in 5 groups (the coordinator's uniform and range
assignors, a regex subscription, with churn), 34 share consumers in 3 share groups acknowledging
by an ACCEPT/RELEASE/REJECT mix, and four producers, for 90 seconds, while the group coordinator
of a group, the share coordinator of a share partition, a partition leader and a gateway are
killed and a partition leader is paused.
Then the drain, the invariant checker and the PySpark report; it ends with a one-screen summary
and the report's path, exit 0 only if every invariant holds.
"""

from __future__ import annotations

import tempfile
from importlib.resources import files
from pathlib import Path

from rich.console import Console

from loadtest.experiment.command import _with_duration, run_scenario
from loadtest.experiment.scenario import parse_scenario

SCENARIO = "demo.toml"


def demo_scenario_text() -> str:
    return files("loadtest").joinpath("scenarios", SCENARIO).read_text()


def run_demo(duration: float | None = None, out: Path | None = None, console: Console | None = None) -> int:
    console = console or Console()
    text = demo_scenario_text()
    scenario = parse_scenario(text, "the demo scenario")
    if duration is not None:
        scenario = _with_duration(scenario, text, duration, "the demo scenario", False)
    run_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="raygroups-demo-"))
    members = sum(g.count * g.members for g in scenario.groups) + sum(g.count * g.members for g in scenario.share_groups)
    console.rule("[bold]raygroups demo")
    kinds = [f"{len(scenario.classic_groups())} classic"]
    if scenario.consumer_groups():
        kinds.append(f"{len(scenario.consumer_groups())} consumer-protocol")
    kinds.append(f"{len(scenario.share_group_specs())} share")
    console.print(
        f"{members} simulated Kafka clients in {', '.join(kinds[:-1])} and {kinds[-1]} groups, "
        f"{sum(p.count for p in scenario.producers)} producers, "
        f"{len(scenario.faults)} faults over {scenario.duration_s:g} s; then the invariant check and the PySpark report.",
        highlight=False,
    )
    return run_scenario(scenario, text, run_dir, None, console, report=True)
