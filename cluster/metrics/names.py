"""Every metric raygroups exports: its type, its help text and the Kafka metric it stands for.

Names follow Kafka's where Kafka has one (GroupCoordinatorMetrics, ShareGroupMetrics,
SharePartitionMetrics, RequestMetrics, BrokerTopicMetrics), in Prometheus' spelling: a `raygroups_`
prefix, snake case, counters ending in `_total`, the unit in the name. docs/metrics.md is this
table for people; a unit test keeps the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "raygroups_"


@dataclass(frozen=True, slots=True)
class MetricName:
    type: str  # counter | gauge | histogram
    help: str
    kafka: str  # Kafka's metric (MBean), or what comes nearest


CATALOG: dict[str, MetricName] = {
    # -- requests, on the gateways ----------------------------------------------------------------
    "requests": MetricName("counter", "Requests answered, by API",
                           "kafka.network:type=RequestMetrics,name=RequestsPerSec,request={api}"),
    "request_latency_ms": MetricName("histogram", "Time from a request's arrival to its answer, by API (ms)",
                                     "kafka.network:type=RequestMetrics,name=TotalTimeMs,request={api}"),
    "bytes_in": MetricName("counter", "Request bytes received, by API",
                           "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec (Produce); all APIs here"),
    "bytes_out": MetricName("counter", "Response bytes sent, by API",
                            "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec (Fetch); all APIs here"),
    "connections": MetricName("gauge", "Client connections open on a gateway",
                              "kafka.server:type=socket-server-metrics,name=connection-count"),
    "connections_closed": MetricName("counter", "Connections a gateway closed, by reason (a limit, a bad request, a failed authentication)",
                                     "kafka.server:type=socket-server-metrics,name=connection-close-total (no reason)"),
    "failed_authentications": MetricName("counter", "Failed SASL authentications",
                                         "kafka.server:type=socket-server-metrics,name=failed-authentication-total"),
    "successful_authentications": MetricName("counter", "Successful SASL authentications",
                                             "kafka.server:type=socket-server-metrics,name=successful-authentication-total"),
    "request_memory_waits": MetricName("counter", "Times a connection stopped reading because queued.max.request.bytes was reached",
                                       "none (kafka.network:type=SocketServer,name=MemoryPoolAvgDepletedPercent is nearest)"),
    # -- groups, on the group coordinators -------------------------------------------------------
    "group_count": MetricName("gauge", "Groups by protocol (classic, share) and state",
                              "kafka.server:type=group-coordinator-metrics,name=group-count,protocol={protocol}"
                              " and classic-group-count,state={state}"),
    "share_group_count": MetricName("gauge", "Share groups by state",
                                    "kafka.server:type=group-coordinator-metrics,name=share-group-count,state={state}"),
    "group_rebalances": MetricName("counter", "Completed rebalances (a new generation or group epoch), by protocol",
                                   "kafka.server:type=group-coordinator-metrics,name=group-completed-rebalance-count"
                                   " (classic), share-group-rebalance-count (share)"),
    "group_rebalance_duration_ms": MetricName("histogram", "A classic group's rebalance, from PreparingRebalance to its new generation (ms)",
                                              "none (Kafka counts rebalances only)"),
    "offset_commits": MetricName("counter", "OffsetCommit operations run",
                                 "kafka.server:type=group-coordinator-metrics,name=offset-commit-count"),
    "coordinator_deferred_answers": MetricName("counter", "Operations a group coordinator answered apart from their "
                                               "batch, still waiting for their commit (Deferred)",
                                               "none (Kafka: the DelayedProduce purgatory's size is nearest)"),
    "partition_load_time_ms": MetricName("histogram", "Time to load (replay) a partition on becoming its leader, by actor kind (ms)",
                                         "kafka.server:type=group-coordinator-metrics,name=partition-load-time-max;"
                                         " ShareGroupMetrics PartitionLoadTimeMs"),
    # -- calls between processes, on every caller (gateways, and actors that call actors) ----------
    "actor_calls": MetricName("counter", "Calls to actors, by the path they took: the actor's channel (a local socket, "
                                         "the caller on its node) or Ray",
                              "none (Kafka: kafka.network:type=RequestChannel is nearest)"),
    # -- share partitions, on the partition leaders -------------------------------------------------
    "share_fetches": MetricName("counter", "ShareFetch calls served by a partition leader",
                                "kafka.server:type=BrokerTopicMetrics,name=TotalShareFetchRequestsPerSec"),
    "share_records_acquired": MetricName("counter", "Records acquired by share consumers",
                                         "none (Kafka: ShareGroupMetrics TopicPartitionsAcquireTimeMs is nearest)"),
    "share_acknowledgements": MetricName("counter", "Records acknowledged by share consumers, by type (accept, release, reject, renew)",
                                         "kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType={type}"),
    "share_partition_records_in_flight": MetricName("gauge", "Records in flight (acquired, or available below the end) per share partition",
                                                    "kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount"),
    "share_partition_oldest_lock_age_ms": MetricName("gauge", "Age of the oldest acquisition lock per share partition (ms; 0: none)",
                                                     "none (Kafka: SharePartitionMetrics AcquisitionLockTimeoutPerSec is nearest)"),
    # -- the controller --------------------------------------------------------------------------
    "failovers": MetricName("counter", "Failovers: an actor died and its partitions moved to live ones",
                            "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs (nearest)"),
    "failover_partitions": MetricName("counter", "Partitions moved because their actor died",
                                      "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec (nearest)"),
    "partitions": MetricName("gauge", "Partitions the cluster has (internal topics' included)",
                             "kafka.controller:type=KafkaController,name=GlobalPartitionCount"),
    "offline_partitions": MetricName("gauge", "Partitions without a live leader (a failover not yet placed, or no actor of their kind)",
                                     "kafka.controller:type=KafkaController,name=OfflinePartitionsCount"),
    "actors": MetricName("gauge", "Actors the controller knows, by kind and whether alive",
                         "none (Kafka: kafka.controller:type=KafkaController,name=ActiveBrokerCount)"),
    # -- the scrape itself -----------------------------------------------------------------------
    "actor_up": MetricName("gauge", "1 if the actor answered this scrape in time",
                           "none (Prometheus' own `up` per target)"),
    "scrape_actors_failed": MetricName("gauge", "Actors that did not answer this scrape (dead or slow)", "none"),
    "scrape_duration_seconds": MetricName("gauge", "Time this scrape took to gather every actor's numbers", "none"),
}


def exported(name: str) -> str:
    """The name Prometheus shows for a metric family."""
    return PREFIX + name
