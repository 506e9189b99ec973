"""What every raygroups actor shell shares: its identity, logging and lifecycle calls (its kind and
Ray options are the contract's: cluster/calls/kinds.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from cluster.calls import Endpoint
from cluster.calls.kinds import ActorKind
from cluster.channels import ChannelServer
from cluster.log.data_directory import directory_id, node_data_directory
from cluster.runtime.collector import settle_at_start


def identity(name: str, kind: ActorKind, directory: uuid.UUID | None = None) -> dict[str, Any]:
    """Who the actor is, for the controller: its node and process, and for an actor that keeps
    logs, the id of its node's data directory (the replica it is a host of: cluster/log/
    data_directory.py)."""
    import ray

    ctx = ray.get_runtime_context()
    out = {"name": name, "kind": kind.value, "node_id": ctx.get_node_id(), "pid": os.getpid()}
    if directory is not None:
        out["directory_id"] = str(directory)
    return out


def node_storage(data_dir: str) -> tuple[Path, uuid.UUID]:
    """In an actor that keeps logs, at start: its node's data directory and that directory's id
    (made on first use). A damaged identity fails the start with the reason, which the
    controller reports and retries."""
    root = node_data_directory(data_dir)
    return root, directory_id(root)


def setup_process() -> None:
    """First thing in an actor's __init__: logging, and the collector's policy (what the imports
    left frozen out of its passes: cluster/runtime/collector.py)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settle_at_start()


async def wait_forever() -> None:
    """Never returns: the controller awaits it to learn, through Ray, that the actor died."""
    await asyncio.Event().wait()


class ChannelHost:
    """An actor's channel (cluster/channels): the methods the clients call (the Endpoints) reached
    over a local socket; opened on the first `channel_address`, a Ray call of the first caller."""

    _channel_server: ChannelServer | None = None

    async def channel_address(self) -> tuple[str, str]:
        """(this actor's Ray node, its channel's socket path)."""
        import ray

        if self._channel_server is None:
            methods = {e.method for e in Endpoint if callable(getattr(self, e.method, None))}
            self._channel_server = ChannelServer(self, methods)
        path = await self._channel_server.start()
        return ray.get_runtime_context().get_node_id(), path
