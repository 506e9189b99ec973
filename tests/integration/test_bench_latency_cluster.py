"""The latency benchmark against a running raygroups cluster: every figure, the ShareFetch with
acknowledgements (a share member fetching one record at a time, accepting the previous one) and
JoinGroup-to-Stable (the one member joining again into the next generation) included. A broker
error in any of them fails the run rather than leaving a figure out."""

from __future__ import annotations

import pytest

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
