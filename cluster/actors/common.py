"""What every raygroups actor shell shares: its identity, logging and lifecycle calls (its kind and
Ray options are the contract's: cluster/calls/kinds.py)."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from cluster.calls.kinds import ActorKind


def identity(name: str, kind: ActorKind) -> dict[str, Any]:
    import ray

    ctx = ray.get_runtime_context()
    return {"name": name, "kind": kind.value, "node_id": ctx.get_node_id(), "pid": os.getpid()}


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


async def wait_forever() -> None:
    """Never returns: the controller awaits it to learn, through Ray, that the actor died."""
    await asyncio.Event().wait()
