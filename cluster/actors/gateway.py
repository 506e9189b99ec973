"""Gateway actor: listens for Kafka clients (uvloop, as Ray runs async actors on it) and routes."""

from __future__ import annotations

from typing import Any

import ray

from cluster.calls.kinds import ActorKind

from cluster.actors.common import identity, setup_process, wait_forever
from cluster.advertised import advertised_address
from cluster.config import Config
from cluster.gateway.auth.client_listener import client_listener
from cluster.gateway.auth.session import ListenerKind, Session
from cluster.gateway.connection_limits import ConnectionQuota, RequestMemory
from cluster.gateway.gateway import Gateway
from cluster.gateway.server import serve
from cluster.leadership import Leadership
from cluster.metrics import registry as metrics_registry


@ray.remote
class GatewayActor:
    def __init__(self, node_id: int, host: str, port: int, config: Config, controller: Any) -> None:
        setup_process()
        self.node_id = node_id
        self.host = host
        self.port = port
        self.config = config
        self.controller = controller
        self.gateway: Gateway | None = None
        self.server = None
        self.stats = None
        self.operator_server = None

    async def start(self, leadership: Leadership) -> tuple[str, int]:
        self.gateway = Gateway(self.node_id, self.config, self.controller, leadership)
        listener = client_listener(self.config)
        self.server, self.stats = await serve(
            self.gateway.dispatch,
            self.host,
            self.port,
            self.config["socket.request.max.bytes"],
            on_close=self.gateway.connection_closed,
            memory=RequestMemory(self.config["queued.max.request.bytes"]),
            quota=ConnectionQuota(self.config["max.connections"], self.config["max.connections.per.ip"]),
            new_session=listener.new_session,
            ssl=listener.ssl,
        )
        self.port = self.server.sockets[0].getsockname()[1]
        await self._serve_operators()
        # Clients are told the advertised address, which may differ from the one bound (containers).
        return advertised_address(self.config, self.host, self.port, self.node_id, ray.util.get_node_ip_address())

    async def _serve_operators(self) -> None:
        """The operator API's own listener (localhost by default): the client listener refuses it."""
        assert self.gateway is not None
        host = self.config["raygroups.operator.host"]
        base = self.config["raygroups.operator.port"]
        self.operator_server, _ = await serve(
            self.gateway.dispatch,
            host,
            base + self.node_id if base else 0,
            self.config["socket.request.max.bytes"],
            new_session=lambda: Session(ListenerKind.OPERATOR),
        )
        port = self.operator_server.sockets[0].getsockname()[1]
        self.gateway.operator_address = f"{host}:{port}"

    async def update_leadership(self, leadership: Leadership) -> None:
        if self.gateway is not None:
            self.gateway.router.update(leadership)

    async def ping(self) -> bool:
        return True

    async def wait_forever(self) -> None:
        await wait_forever()

    async def info(self) -> dict[str, Any]:
        out = {**identity(f"gateway-{self.node_id}", ActorKind.GATEWAY), "partitions": []}
        if self.stats is not None:
            out["operator_address"] = self.gateway.operator_address if self.gateway else None
            out.update(connections=self.stats.connections, requests=self.stats.requests,
                       closed_for_bad_input=self.stats.closed_for_bad_input,
                       refused_connections=self.stats.refused_connections)
        return out

    async def metrics(self) -> dict[str, Any]:
        """Request counters (recorded by the servers), and the client connections open now."""
        open_now = self.stats.connections if self.stats is not None else 0
        return metrics_registry.snapshot([("connections", {}, float(open_now))])

    async def shutdown(self) -> None:
        for server in (self.server, self.operator_server):
            if server is not None:
                server.close()
