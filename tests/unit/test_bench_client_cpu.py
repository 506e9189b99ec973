"""produce-fetch reports the client's own CPU, so a figure the client sets shows as such."""

from __future__ import annotations

import pytest

from loadtest.bench.clients import _client_cpu


def test_client_cpu_per_record_and_in_cores():
    got = _client_cpu("produce", 1_000_000, 1.5, 2.0)
    assert got["produce_client_us"] == pytest.approx(1.5)
    assert got["produce_client_cores"] == pytest.approx(0.75)


def test_no_records_or_no_time_does_not_divide_by_zero():
    got = _client_cpu("fetch", 0, 0.1, 0.0)
    assert got["fetch_client_us"] == pytest.approx(1e5) and got["fetch_client_cores"] > 0
