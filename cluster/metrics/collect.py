"""Actors' snapshots (registry.py) as Prometheus metric families, labelled with the actor's identity.

A family holds every actor's samples of one metric; counters get Prometheus' `_total`, histograms
their cumulative `_bucket`s, `_count` and `_sum`. A metric missing from names.CATALOG is still
exported (an actor newer than the driver), with no help text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from cluster.metrics.names import CATALOG, MetricName, exported

ActorLabels = dict[str, str]  # actor, kind, node
Snapshot = dict[str, Any]


class Families:
    def __init__(self) -> None:
        self.by_name: dict[str, Metric] = {}

    def family(self, name: str, type_: str) -> Metric:
        metric = self.by_name.get(name)
        if metric is None:
            entry = CATALOG.get(name) or MetricName(type_, "", "")
            metric = self.by_name[name] = Metric(exported(name), entry.help, entry.type)
        return metric

    def counter(self, name: str, labels: dict[str, str], value: float) -> None:
        self.family(name, "counter").add_sample(exported(name) + "_total", labels, value)

    def gauge(self, name: str, labels: dict[str, str], value: float) -> None:
        self.family(name, "gauge").add_sample(exported(name), labels, value)

    def histogram(self, name: str, labels: dict[str, str], bounds: list[float], counts: list[int], total: float, count: int) -> None:
        metric, base = self.family(name, "histogram"), exported(name)
        cumulative = 0
        for bound, n in zip([*bounds, float("inf")], counts):
            cumulative += n
            metric.add_sample(base + "_bucket", {**labels, "le": floatToGoString(bound)}, cumulative)
        metric.add_sample(base + "_count", labels, count)
        metric.add_sample(base + "_sum", labels, total)

    def add_snapshot(self, actor: ActorLabels, snapshot: Snapshot) -> None:
        for name, labels, value in snapshot.get("counters", ()):
            self.counter(name, {**actor, **labels}, value)
        for name, labels, value in snapshot.get("gauges", ()):
            self.gauge(name, {**actor, **labels}, value)
        for name, labels, bounds, counts, total, count in snapshot.get("histograms", ()):
            self.histogram(name, {**actor, **labels}, bounds, counts, total, count)

    def metrics(self) -> list[Metric]:
        return list(self.by_name.values())


def actor_labels(entry: dict[str, Any]) -> ActorLabels:
    return {"actor": str(entry.get("name", "")), "kind": str(entry.get("kind", "")), "node": str(entry.get("node_id") or "")}


def families(gathered: Iterable[dict[str, Any]], scrape_seconds: float) -> list[Metric]:
    """gathered: one entry per actor the controller knows: name, kind, node_id, and its snapshot
    under "metrics", or "error" when it did not answer in time."""
    out = Families()
    failed = 0
    for entry in gathered:
        labels = actor_labels(entry)
        snapshot = entry.get("metrics")
        answered = snapshot is not None and "error" not in entry
        if entry.get("alive", True):
            out.gauge("actor_up", labels, 1 if answered else 0)
            failed += 0 if answered else 1
        if snapshot is not None:
            out.add_snapshot(labels, snapshot)
    out.gauge("scrape_actors_failed", {}, failed)
    out.gauge("scrape_duration_seconds", {}, scrape_seconds)
    return out.metrics()
