from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.cluster_process import ClusterProcess

# Tests hold on a busy 2-core machine: Hypothesis' too_slow health check times how long examples
# take to generate, so under load it failed a property test whose examples were fine
# (test_record_batch_writer, with two CPU hogs beside the suite). Every property test inherits this;
# the deterministic health checks (data too large, filtering too much) still apply.
# For the same reason no example has a deadline: Hypothesis fails an example that takes over
# 200 ms once and not on its rerun as Flaky, which a loaded machine makes of any slow example
# (most property tests here already said deadline=None one by one; now all do).
settings.register_profile("raygroups", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("raygroups")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster per test module (a Ray cluster and its actors take seconds to start)."""
    proc = ClusterProcess(tmp_path_factory.mktemp("data"), gateways=2).start()
    yield proc
    proc.stop()
