"""What a handler gets as its context: the gateway, as the handlers see it.

A Protocol rather than the Gateway class itself, because the gateway imports the handlers' table
(so they cannot import it back) and the handlers' unit tests give them a small fake of it
(tests/unit/gateway/fakes.py). Every attribute a handler reads is here, with its type.
"""

from __future__ import annotations

from typing import Protocol

from cluster.clients.controller import ControllerClient
from cluster.clients.coordinator import CoordinatorClient
from cluster.clients.partition_leader import PartitionLeaderClient
from cluster.clients.persister import Persister
from cluster.clients.routing import Router
from cluster.config import Config
from cluster.gateway.auth.credentials import CredentialStore
from cluster.gateway.producer_ids import ProducerIdAllocator
from cluster.gateway.share_sessions import ShareSessionCache
from cluster.leadership import Leadership
from cluster.services.group_service import GroupCoordinatorService


class GatewayContext(Protocol):
    node_id: int
    name: str
    config: Config
    controller: ControllerClient
    router: Router
    coordinators: CoordinatorClient  # single calls to the group coordinators
    groups: GroupCoordinatorService  # the flows of several calls (DeleteGroups, share offsets)
    partitions: PartitionLeaderClient
    persister: Persister
    share_sessions: ShareSessionCache
    producer_ids: ProducerIdAllocator
    super_users: frozenset[str]
    sasl_mechanisms: list[str]
    credentials: CredentialStore

    @property
    def leadership(self) -> Leadership: ...
