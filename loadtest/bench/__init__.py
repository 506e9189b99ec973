"""Benchmarks: raygroups measured against a peer in the same run.

    python -m loadtest.bench produce-fetch [--records N] [--peer responder|tansu|both]
    python -m loadtest.bench api-roundtrips [--seconds S] [--peer ...]
    python -m loadtest.bench group-requests [--peer ...] | heartbeat-scaling | rebalance [--peer tansu]
    python -m loadtest.bench consumers-formed [--peer mock,tansu]
    python -m loadtest.bench reload | member-memory
    python -m loadtest.bench share-consume | share-ack-latency | share-state-writes | share-memory | share-assign
    python -m loadtest.bench locust-capacity
    python -m loadtest.bench protocols-rebalance | protocols-heartbeat   (classic vs KIP-848's consumer protocol)
    python -m loadtest.bench latency [--peer tansu]   (unloaded round trips, p50/p99/p999, pinned)
    python -m loadtest.bench replication   (RF 3 against RF 1 on three Ray nodes, and a node's loss)

Every figure is printed next to the same measurement against a peer: `responder` (loadtest.responder,
same client, same protocol code, no actors or logs: the limit of the client and this machine), `tansu`
(a Kafka-compatible broker in Rust, memory storage, from the `bench` extra) or librdkafka's `mock`
cluster; and as the ratio raygroups/peer, each row saying whether higher is better. Systems run
alternately, best of --rounds. Absolute numbers depend on the machine; nothing here is a pass/fail test.
docs/performance.md holds the figures and how they were taken.
"""

from loadtest.bench import (  # noqa: F401 - they register
    commands_classic, commands_latency, commands_locust, commands_protocols, commands_replication, commands_share,
    profile, spy,
)
from loadtest.bench.app import app
from loadtest.bench.clients import api_rates, produce_fetch_rates
from loadtest.bench.systems import raygroups, raygroups_cluster, responder

__all__ = ["app", "api_rates", "produce_fetch_rates", "raygroups", "raygroups_cluster", "responder"]
