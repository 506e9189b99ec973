"""The latency benchmark's own arithmetic and encodings (loadtest/bench/latency.py): quantiles by
nearest rank, and the consumer-protocol bytes of its one-member group, which real brokers parse."""

from __future__ import annotations

from coordinator.consumer.protocol import decode_assignment, decode_subscription
from loadtest.bench.latency import _assignment, _subscription, quantiles


def test_quantiles_are_nearest_rank_in_milliseconds():
    samples = [float(us) for us in range(1, 1001)]  # 1 us .. 1000 us
    assert quantiles(samples, "hb") == {"hb_p50_ms": 0.501, "hb_p99_ms": 0.991, "hb_p999_ms": 1.0}
    assert quantiles([250.0], "x") == {"x_p50_ms": 0.25, "x_p99_ms": 0.25, "x_p999_ms": 0.25}


def test_the_groups_subscription_and_assignment_are_well_formed():
    assert decode_subscription(_subscription("latency-1")).topics == ("latency-1",)
    assert decode_assignment(_assignment("latency-1")) == {"latency-1": (0,)}
