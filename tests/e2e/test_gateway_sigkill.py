"""A gateway whose process dies outside ray.kill (SIGKILL by the OS, out of memory) comes back."""

from __future__ import annotations

import os
import signal

import pytest

from cluster.admin_client import admin_call
from tests.clients import confluent_consume_all, confluent_produce, create_topic, records
from tests.cluster_process import ClusterProcess

pytestmark = pytest.mark.slow


def test_a_gateway_killed_by_the_os_is_restarted_on_its_port(tmp_path):
    cluster = ClusterProcess(tmp_path / "data").start()  # one gateway: without it nothing is reachable
    try:
        create_topic(cluster.bootstrap, "sigkill", 2)
        before = confluent_produce(cluster.bootstrap, "sigkill", records(50, 2, "before"))
        gateway = next(a for a in admin_call(cluster.bootstrap, "actors") if a["name"] == "gateway-0")
        # Ray learns of this death from the process, not from a kill it ordered: the name is
        # still registered for a while, so the replacement must not need it.
        os.kill(gateway["pid"], signal.SIGKILL)
        assert cluster.wait_for_event("gateway-0 died", f"gateway-0 listening again on 127.0.0.1:{cluster.port}", timeout=60), cluster.events()
        after = confluent_produce(cluster.bootstrap, "sigkill", records(50, 2, "after"))
        assert len(confluent_consume_all(cluster.bootstrap, "sigkill", 2, expected=100)) == len(before) + len(after)
    finally:
        cluster.stop()
