"""The experiment's cluster picks its gateways' ports before Ray starts, and Ray binds ports of its
own at random: a first start whose port is taken takes another block (loadtest/experiment/
cluster_process.py). Seen once as the demo test's 'address already in use'."""

from __future__ import annotations

import socket

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.experiment.cluster_process import ClusterProcess
from loadtest.experiment.scenario import ClusterSpec
from tests.kio_client import KioClient


def test_a_first_start_whose_gateway_port_is_taken_starts_on_another(tmp_path):
    cluster = ClusterProcess(tmp_path, ClusterSpec(gateways=1, coordinators=1, share_coordinators=1, partition_leaders=1), {})
    taken = cluster.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            bootstrap = cluster.start()
            assert bootstrap != f"127.0.0.1:{taken}" and cluster.starts == 2
            with KioClient(bootstrap) as client:
                answer = client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
                assert answer.error_code == ErrorCode.none
            assert b"address already in use" in cluster.log_path.read_bytes()
        finally:
            cluster.kill()
