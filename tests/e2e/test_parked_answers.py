"""Parked JoinGroups over the gateway's answer channel, against a live cluster:

- members joining one after another (each JoinGroup parks for the initial rebalance delay) all get
  their answers, of one generation, when the join phase completes;
- a JoinGroup parked on a coordinator that is killed is answered, not left hanging: a retriable
  coordinator error (it may have run; the client joins again, as with Kafka).
"""

from __future__ import annotations

import concurrent.futures
import time
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from cluster.admin_client import admin_call
from cluster.gateway.apis import ApiKey
from coordinator.hashing import group_partition
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.share_runs import wait_until

pytestmark = pytest.mark.slow
DELAY_MS = 3_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(
        tmp_path_factory.mktemp("parked-answers"), "--config", f"group.initial.rebalance.delay.ms={DELAY_MS}"
    ).start()
    yield proc
    proc.stop()


def join(bootstrap: str, group: str, member: int) -> tuple[ErrorCode, int, float]:
    """JoinGroup v3 (no member id round): (error, generation, when it was answered)."""
    with KioClient(bootstrap, timeout=120) as client:
        response = client.call(ApiKey.JOIN_GROUP, 3, {
            "group_id": group, "session_timeout": timedelta(seconds=10), "rebalance_timeout": timedelta(seconds=30), "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"m%d" % member}],
        })
    return response.error_code, response.generation_id, time.monotonic()


def _state(bootstrap: str, group: str) -> str:
    with KioClient(bootstrap, timeout=30) as client:
        return client.call(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]}).groups[0].group_state


def _owner_of(cluster, partition: int) -> str:
    status = admin_call(cluster.bootstrap, "status")
    return next(l["actor"] for l in status["leaders"] if l["topic"] == "__consumer_offsets" and l["partition"] == partition)


def test_members_parked_in_one_join_phase_are_answered_together(cluster):
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda m: join(cluster.bootstrap, "parked-together", m), range(20)))
    assert {(error, generation) for error, generation, _ in answers} == {(ErrorCode.none, 1)}
    when = [t for _, _, t in answers]
    assert max(when) - min(when) < DELAY_MS / 1000  # one phase, not one delay each


def test_a_join_parked_on_a_killed_coordinator_is_answered(cluster):
    group = "parked-on-a-dead-coordinator"
    owner = _owner_of(cluster, group_partition(group, 50))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parked = pool.submit(join, cluster.bootstrap, group, 0)
        wait_until(lambda: _state(cluster.bootstrap, group) == "PreparingRebalance", what="the join parked")
        assert not parked.done()  # parked for the initial delay, which is long enough to kill first
        assert cluster.cli("kill", owner).returncode == 0
        error, _generation, _ = parked.result(timeout=90)
    # Not run again at the new coordinator (it may have run at the old one: Kafka's broker never
    # runs a request twice): the client gets the retriable error and joins again as it chooses.
    assert error in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available)
