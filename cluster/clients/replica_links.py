"""How a replica host reaches the hosts of the other replicas: by replica id, over the actor
links the controller's pushes name (ReplicaPush.sources). Looked up on each call: a push replaces
a host that died with a new handle under the same replica id."""

from __future__ import annotations

from cluster.calls import Endpoint
from cluster.clients.links import ActorLink, this_node
from cluster.replication.log_replica import ReplicaFetch, ReplicaFetched
from cluster.replication.manager import LeaderLink
from cluster.replication.push import ReplicaPush

TP = tuple[str, int]


class ReplicaLinks:
    def __init__(self) -> None:
        self._sources: dict[int, ActorLink] = {}  # the hosts of the other replicas, by replica id

    def learn(self, push: ReplicaPush) -> None:
        node = this_node()
        self._sources.update({replica: ActorLink(handle, node) for replica, handle in push.sources.items()})

    def leader_link(self, replica: int) -> LeaderLink:
        return _LeaderLink(self._sources, replica)


class _LeaderLink:
    """A follower's way to the host of its leader replica."""

    def __init__(self, sources: dict[int, ActorLink], replica: int) -> None:
        self.sources = sources
        self.replica = replica

    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]:
        link = self.sources.get(self.replica)
        if link is None:
            raise LookupError(f"no host of replica {self.replica} known yet")
        return await link.call(Endpoint.REPLICA_FETCH, items, max_wait_ms)
