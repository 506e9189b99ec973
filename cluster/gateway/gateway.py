"""One gateway: a Kafka broker as clients see it, routing every request to the actor concerned.

`Gateway.dispatch` turns a parsed request into its response (or an awaitable of it); the
handlers per API live in `handlers/` and get the gateway as their context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cluster.clients.controller import ControllerClient
from cluster.clients.coordinator import CoordinatorClient
from cluster.clients.partition_leader import PartitionLeaderClient
from cluster.config import Config
from cluster.gateway import producer_ids
from cluster.gateway.apis import ADMIN_API_KEY, SUPPORTED, ApiKey
from cluster.gateway.auth.credentials import CredentialStore
from cluster.gateway.auth.operator_access import refusal
from cluster.gateway.auth.principals import may_operate, parse_super_users
from cluster.gateway.connection import Request, unsupported_api_versions_response
from cluster.gateway.share_sessions import ShareSessionCache
from cluster.clients.persister import Persister
from cluster.clients.routing import Router
from cluster.leadership import Leadership
from cluster.services.group_service import GroupCoordinatorService

log = logging.getLogger(__name__)


class Gateway:
    def __init__(self, node_id: int, config: Config, controller: Any, leadership: Leadership) -> None:
        from cluster.gateway.handlers import HANDLERS

        self.node_id = node_id
        self.name = f"gateway-{node_id}"
        self.config = config
        self.controller = ControllerClient(controller)
        self.router = Router(controller, leadership)
        self.producer_ids = producer_ids.from_controller(self.controller, self.name)
        self.share_sessions = ShareSessionCache(config["group.share.max.share.sessions"])
        self.persister = Persister(self.router, config["share.coordinator.state.topic.num.partitions"])
        self.coordinators = CoordinatorClient(self.router, config["offsets.topic.num.partitions"])
        self.groups = GroupCoordinatorService(self.coordinators, self.persister)
        self.partitions = PartitionLeaderClient(self.router)
        self._handlers: dict[int, Callable[[Gateway, Request], Any]] = HANDLERS
        self.super_users = parse_super_users(config["super.users"])
        self.operator_address: str | None = None  # host:port of this gateway's operator listener
        self.sasl_mechanisms = [m.strip().upper() for m in config["sasl.enabled.mechanisms"].split(",") if m.strip()]
        self.credentials = CredentialStore(config["raygroups.scram.credentials.file"] or "scram-credentials.json")

    @property
    def leadership(self) -> Leadership:
        return self.router.leadership

    def dispatch(self, request: Request) -> Any:
        if request.unsupported_api_versions:
            return unsupported_api_versions_response(SUPPORTED)
        if request.api_key == ADMIN_API_KEY and not self._may_operate(request):
            return refusal(self.operator_address)
        handler = self._handlers.get(request.api_key)
        if handler is None:  # in SUPPORTED but no handler would be a bug: refuse loudly
            raise RuntimeError(f"no handler for api key {request.api_key}")
        return handler(self, request)

    def _may_operate(self, request: Request) -> bool:
        session = request.session
        if session is None:  # a request not from a socket (tests): nothing vouches for it
            return False
        return may_operate(session.principal, session.operator_listener, self.super_users)

    def connection_closed(self, connection_id: int) -> None:
        from cluster.gateway.handlers.share_fetch import connection_closed

        connection_closed(self, connection_id)


__all__ = ["Gateway", "ApiKey", "ADMIN_API_KEY"]
