from __future__ import annotations

import pytest

from tests.cluster_process import ClusterProcess


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster per test module (a Ray cluster and its actors take seconds to start)."""
    proc = ClusterProcess(tmp_path_factory.mktemp("data"), gateways=2).start()
    yield proc
    proc.stop()
