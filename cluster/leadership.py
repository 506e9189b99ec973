"""The leadership map as the controller publishes it to gateways."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cluster.metadata import TopicInfo


@dataclass(frozen=True, slots=True)
class GatewayAddress:
    node_id: int
    host: str
    port: int


@dataclass(slots=True)
class Leadership:
    version: int
    cluster_id: str
    gateways: list[GatewayAddress]
    topics: dict[str, TopicInfo]
    # (topic, partition) -> (actor name, leader epoch)
    leaders: dict[tuple[str, int], tuple[str, int]]
    handles: dict[str, Any] = field(default_factory=dict)
    topics_by_id: dict[Any, TopicInfo] = field(default_factory=dict)
    # group id -> its config overrides (cluster/group_configs.py): the partition leaders' share
    # partitions and the gateways' ShareFetch answers follow them.
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # replicated partitions (issue 25), as Metadata names them: (the broker on the leader
    # replica's node, the replicas' brokers, the in-sync ones', the offline ones')
    replica_brokers: dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        self.topics_by_id = {info.topic_id: info for info in self.topics.values()}

    def broker_for(self, partition: int) -> int:
        """The gateway clients are told leads a partition: spread, since any gateway serves any."""
        if not self.gateways:
            return -1
        return self.gateways[partition % len(self.gateways)].node_id


def leader_broker(leadership: Leadership, topic: str, partition: int) -> int:
    """The broker clients are told leads `topic`-`partition`: for a replicated partition the one on
    its leader replica's node (its gateway reaches the leader without leaving the node), else
    spread (any gateway serves any partition)."""
    replicated = leadership.replica_brokers.get((topic, partition))
    if replicated is not None and replicated[0] >= 0:
        return replicated[0]
    return leadership.broker_for(partition)


def empty_leadership() -> Leadership:
    """What an actor knows before the controller's first push: nothing (it pulls on a miss)."""
    return Leadership(version=-1, cluster_id="", gateways=[], topics={}, leaders={})
