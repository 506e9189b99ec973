"""The benchmarks' own clients against a running raygroups cluster.

- latency: every figure, the ShareFetch with acknowledgements (a share member fetching one record
  at a time, accepting the previous one) and JoinGroup-to-Stable (the one member joining again into
  the next generation) included. A broker error in any of them fails the run rather than leaving a
  figure out.
- the light produce/fetch client: every record produced (acks=all) comes back; a broker error
  fails the run.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from loadtest.bench import pipelined
from loadtest.bench.clients import create_topic
from loadtest.bench.latency import QUANTILES, unloaded_round_trips

pytestmark = pytest.mark.slow


def test_every_latency_figure_against_raygroups(cluster):
    got = unloaded_round_trips(cluster.bootstrap, samples=30, warmup=3)
    for api in ("api_versions", "metadata", "heartbeat", "produce", "commit", "share_fetch", "join"):
        values = [got[f"{api}_{q}_ms"] for q in QUANTILES]
        assert 0 < values[0] <= values[1] <= values[2], (api, values)


def test_sparse_latency_figures_against_raygroups(cluster):
    """Spaced out the APIs take turns: each ShareFetch then finds just the record the Produce before it wrote."""
    got = unloaded_round_trips(cluster.bootstrap, samples=5, warmup=1, gap_s=0.005)
    assert all(got[f"{api}_p50_ms"] > 0 for api in ("share_fetch", "join", "produce"))


def test_the_light_client_produces_and_fetches_every_record_back(cluster):
    topic = f"light-{time.monotonic_ns()}"
    create_topic(cluster.bootstrap, topic, 3)
    records = 3 * 100 * 20
    rates = pipelined.produce_fetch_rates(cluster.bootstrap, f"{topic}-2", records, 3, 100, set())
    assert rates["produce_rps"] > 0 and rates["fetch_rps"] > 0
    # And a topic written twice over holds both: the fetch finds every batch of the first run's offsets.
    asyncio.run(pipelined.produce(cluster.bootstrap, topic, 3, records))
    asyncio.run(pipelined.produce(cluster.bootstrap, topic, 3, records))
    assert asyncio.run(pipelined.fetch(cluster.bootstrap, topic, 3, 2 * records)) > 0


def test_the_light_client_fails_on_a_broker_error(cluster):
    with pytest.raises(RuntimeError, match="unknown_topic_or_partition"):
        asyncio.run(pipelined.produce(cluster.bootstrap, f"never-created-{time.monotonic_ns()}", 2, 200))


def test_a_locust_capacity_step_measures_heartbeats(cluster):
    """One step of `locust-capacity`: locust runs the shipped locustfile's members against the cluster
    and the step reads their heartbeats back from locust's stats."""
    from loadtest.bench.locust_steps import run_step

    step = run_step(cluster.bootstrap, users=20, workers=1, seconds=3, prefix=f"cap-test-{time.monotonic_ns()}", interval_ms=500)
    assert step["failures"] == 0, step
    assert step["heartbeats_per_s"] > 0 and 0 < step["heartbeat_p50_ms"] <= step["heartbeat_p99_ms"], step
