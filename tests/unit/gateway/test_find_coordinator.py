"""FindCoordinator names a gateway the client can reach, whatever the leadership map says."""

from __future__ import annotations

from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from cluster.config import Config
from cluster.gateway.handlers.meta import KEY_TYPE_GROUP, coordinator_for
from coordinator.hashing import group_partition
from cluster.leadership import GatewayAddress, Leadership
from cluster.metadata import CONSUMER_OFFSETS


def context(replica_brokers) -> SimpleNamespace:
    config = Config()
    partitions = config["offsets.topic.num.partitions"]
    leadership = Leadership(
        version=1, cluster_id="c", gateways=[GatewayAddress(0, "h0", 9092), GatewayAddress(1, "h1", 9093)],
        topics={}, leaders={(CONSUMER_OFFSETS, p): ("group-coordinator-0", 1) for p in range(partitions)},
        replica_brokers=replica_brokers,
    )
    return SimpleNamespace(leadership=leadership, config=config)


def test_the_leader_replicas_gateway_is_named_when_it_is_listed():
    p = group_partition("g", Config()["offsets.topic.num.partitions"])
    entry = coordinator_for(context({(CONSUMER_OFFSETS, p): (1, (1, 0), (1, 0), ())}), KEY_TYPE_GROUP, "g")
    assert (entry["error_code"], entry["node_id"], entry["port"]) == (ErrorCode.none, 1, 9093)


def test_a_leader_on_a_node_whose_gateway_is_not_listed_yet_names_a_listed_gateway():
    """Before: StopIteration out of the handler (the connection closed on the client)."""
    p = group_partition("g", Config()["offsets.topic.num.partitions"])
    gw = context({(CONSUMER_OFFSETS, p): (7, (7, 0), (7, 0), ())})
    entry = coordinator_for(gw, KEY_TYPE_GROUP, "g")
    assert entry["error_code"] == ErrorCode.none
    assert entry["node_id"] == gw.leadership.broker_for(p) and entry["node_id"] in (0, 1)
