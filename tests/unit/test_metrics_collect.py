"""Snapshots to Prometheus families, and the endpoint over HTTP with a fake controller (issue 13)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cluster.metrics.collect import families
from cluster.metrics.endpoint import ClusterCollector, MetricsEndpoint
from cluster.metrics.names import CATALOG, exported
from cluster.metrics.registry import Registry

ROOT = Path(__file__).resolve().parents[2]


def _gateway_snapshot() -> dict:
    r = Registry()
    r.inc("requests", (("api", "Produce"),), 3)
    r.observe("request_latency_ms", 2.0, (("api", "Produce"),), bounds=(1, 5))
    return r.snapshot([("connections", {}, 4.0)])


def _text(gathered: list[dict]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(lambda _timeout: gathered))
    return generate_latest(registry).decode()


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_each_actor_s_samples_carry_its_name_kind_and_node():
    text = _text([{"name": "gateway-0", "kind": "gateway", "node_id": "n1", "metrics": _gateway_snapshot()}])
    samples = _samples(text)
    actor = (("actor", "gateway-0"), ("kind", "gateway"), ("node", "n1"))
    assert samples[("raygroups_requests_total", tuple(sorted(actor + (("api", "Produce"),))))] == 3
    assert samples[("raygroups_connections", actor)] == 4
    assert samples[("raygroups_actor_up", actor)] == 1
    bucket = dict(actor + (("api", "Produce"),))
    assert samples[("raygroups_request_latency_ms_bucket", tuple(sorted({**bucket, "le": "1.0"}.items())))] == 0
    assert samples[("raygroups_request_latency_ms_bucket", tuple(sorted({**bucket, "le": "5.0"}.items())))] == 1
    assert samples[("raygroups_request_latency_ms_bucket", tuple(sorted({**bucket, "le": "+Inf"}.items())))] == 1
    assert "# HELP raygroups_requests_total Requests answered, by API" in text


def test_an_actor_that_did_not_answer_is_down_and_counted_and_the_others_still_show():
    text = _text([
        {"name": "gateway-0", "kind": "gateway", "node_id": "n1", "metrics": _gateway_snapshot()},
        {"name": "partition-leader-0", "kind": "partition-leader", "node_id": "n1", "error": "GetTimeoutError"},
    ])
    samples = _samples(text)
    assert samples[("raygroups_actor_up", (("actor", "partition-leader-0"), ("kind", "partition-leader"), ("node", "n1")))] == 0
    assert samples[("raygroups_scrape_actors_failed", ())] == 1


def test_counters_of_two_actors_are_two_series_of_one_family():
    metrics = families([
        {"name": "gateway-0", "kind": "gateway", "node_id": "n", "metrics": _gateway_snapshot()},
        {"name": "gateway-1", "kind": "gateway", "node_id": "n", "metrics": _gateway_snapshot()},
    ], 0.01)
    [requests] = [m for m in metrics if m.name == "raygroups_requests"]
    assert {s.labels["actor"] for s in requests.samples} == {"gateway-0", "gateway-1"}


def test_a_controller_that_does_not_answer_gives_a_scrape_that_says_so():
    def gather(_timeout: float) -> list[dict]:
        raise TimeoutError("controller")

    samples = _samples(_text_of(gather))
    assert samples[("raygroups_actor_up", (("actor", "controller"), ("kind", "controller"), ("node", "")))] == 0


def _text_of(gather) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(gather))
    return generate_latest(registry).decode()


def test_the_endpoint_serves_the_families_over_http_on_a_free_port():
    calls: list[float] = []

    def gather(timeout: float) -> list[dict]:
        calls.append(timeout)
        return [{"name": "gateway-0", "kind": "gateway", "node_id": "n", "metrics": _gateway_snapshot()}]

    endpoint = MetricsEndpoint.start(gather, "127.0.0.1", 0, timeout=1.5)
    try:
        assert endpoint.url == f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(endpoint.url, timeout=10) as answer:
            text = answer.read().decode()
    finally:
        endpoint.stop()
    assert "raygroups_requests_total{" in text
    assert calls == [1.5]


def test_docs_table_names_every_metric_and_its_kafka_counterpart():
    doc = (ROOT / "docs" / "metrics.md").read_text()
    for name in CATALOG:
        assert f"`{exported(name)}" in doc, name


def test_the_grafana_dashboard_uses_only_metrics_raygroups_exports():
    dashboard = json.loads((ROOT / "examples" / "grafana" / "raygroups.json").read_text())
    used = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            used |= set(re.findall(r"raygroups_[a-z_]+", target["expr"]))
    known = set()
    for name, entry in CATALOG.items():
        base = exported(name)
        known |= {base + "_total"} if entry.type == "counter" else {base}
        if entry.type == "histogram":
            known |= {base + "_bucket", base + "_sum", base + "_count"}
    assert used, "the dashboard has no queries"
    assert used <= known, used - known
