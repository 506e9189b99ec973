"""The load side of KIP-848 against a real cluster: an experiment of consumer-protocol members
(loadtest/members/consumer.py) on the asyncio driver, by names and by a regex, churning, with a
kill of a consumer group's coordinator mid-load, and the run passes the checker, the
double-ownership invariant included, with real handovers judged."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from rich.console import Console

from loadtest.check import check_run, load_run
from loadtest.experiment.eventlog import read_events
from loadtest.experiment.runner import DEFAULT_SETTINGS, Experiment
from loadtest.experiment.scenario import parse_scenario
from tests.cluster_process import ClusterProcess

pytestmark = pytest.mark.slow

SCENARIO = """
name = "consumer-protocol"
duration_s = 30
ramp_s = 3
seed = 5

[[topics]]
name = "orders"
partitions = 6

[[groups]]
name = "ledger"
count = 2
members = 3
protocol = "consumer"
topics = ["orders"]
commit_interval_ms = 1000
churn_every_s = 8

[[groups]]
name = "matched"
members = 3
protocol = "consumer"
topics = ["orders"]
topic_regex = "ord.*"
server_assignor = "range"
commit_interval_ms = 1000

[[producers]]
name = "orders-producer"
topic = "orders"
rate = 80

[[faults]]
at_s = 14
action = "kill"
coordinator_of = "ledger-0"

[checks]
stable_within_s = 25
drain_timeout_s = 60
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # The settings an experiment gives the cluster it starts itself (run.json says them to the checker).
    settings = [arg for name, value in DEFAULT_SETTINGS.items() for arg in ("--config", f"{name}={value}")]
    proc = ClusterProcess(tmp_path_factory.mktemp("data"), *settings, gateways=2).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def run(cluster, tmp_path_factory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("run")
    scenario = parse_scenario(SCENARIO, "consumer-protocol", external_cluster=True)
    experiment = Experiment(scenario, out, SCENARIO, cluster.bootstrap, Console(file=io.StringIO()))
    outcome = asyncio.run(experiment.run())
    return {"outcome": outcome, "result": check_run(load_run(out)), "events": read_events(out).to_pylist()}


def test_the_run_completes_with_every_consumer_member_reading(run):
    outcome = run["outcome"]
    assert outcome.status == "complete", outcome.notes
    assert not outcome.crashes, outcome.crashes[:1]
    assert [f.spec.action for f in outcome.faults] == ["kill"]
    deliveries = [e for e in run["events"] if e["kind"] == "delivery"]
    assert deliveries and {e["role"] for e in deliveries} == {"consumer"}
    assert {e["group"] for e in deliveries} == {"ledger-0", "ledger-1", "matched"}
    heartbeats = [e for e in run["events"] if e["kind"] == "response" and e["api"] == "ConsumerGroupHeartbeat"]
    assert heartbeats and any(e["error"] == "NONE" for e in heartbeats)


def test_the_run_passes_the_checker(run):
    result = run["result"]
    statuses = {v.name: v.status for v in result.verdicts}
    assert result.ok, {v.name: (v.summary, v.evidence[:3]) for v in result.verdicts if v.status == "fail"}
    for name in ("lost-write", "duplicate", "nonmonotonic-commit", "unstable-group", "incomplete-read",
                 "double-ownership"):
        assert statuses[name] == "pass", (name, result.verdict(name).summary)
    assert statuses["failover-rebalance"] in ("pass", "n/a"), result.verdict("failover-rebalance").summary


def test_partitions_changed_hands_and_no_two_members_owned_one_at_once(run):
    verdict = run["result"].verdict("double-ownership")
    assert verdict.violations == 0 and verdict.checked > 0
    handovers = int(verdict.summary.split(" handover")[0].rsplit(", ", 1)[1])
    assert handovers > 0, verdict.summary  # the churn moved partitions: handovers were judged
    reasons = {json.loads(e["detail"])["reason"] for e in run["events"] if e["kind"] == "assignment"}
    assert {"assigned", "revoked"} <= reasons


def test_the_report_shows_the_consumer_groups_rebalances_and_deliveries(run):
    import pyarrow.parquet as pq

    from loadtest.report import build_report

    out = run["outcome"].run_dir
    page = build_report(out, console=Console(file=io.StringIO()))
    tables = out / "report" / "tables"
    rebalances = pq.read_table(tables / "rebalances").to_pylist()
    assert rebalances and {r["protocol"] for r in rebalances} == {"consumer"}
    assert "delivered (consumer)" in {r["series"] for r in pq.read_table(tables / "throughput").to_pylist()}
    assert "consumer-protocol members" in page.read_text()
