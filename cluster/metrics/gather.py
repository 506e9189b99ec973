"""The controller's side of a scrape: every live actor's snapshot, asked at once and bounded.

An actor that is dead, paused or slow must not hold a scrape: each call has its own timeout, and
one that fails or times out is reported with its error (collect.py exports it as actor_up 0).
The controller's own counters (failovers) come first.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from cluster.metrics.registry import REGISTRY


async def gather_snapshots(
    entries: Iterable[Any], pool: Any, timeout: float, own_node: str | None, own_gauges: Sequence[Any] = (),
) -> list[dict[str, Any]]:
    """entries: the controller's ActorEntry objects (name, kind, node_id, alive, handle);
    own_gauges: the controller's own state (partitions, offline partitions)."""
    entries = list(entries)
    alive = Counter((e.kind.value, e.alive) for e in entries)
    gauges = list(own_gauges)
    gauges += [("actors", {"actor_kind": kind, "alive": str(is_alive).lower()}, float(n)) for (kind, is_alive), n in alive.items()]
    own = {"name": "controller", "kind": "controller", "node_id": own_node, "metrics": REGISTRY.snapshot(gauges)}

    async def one(entry: Any) -> dict[str, Any]:
        base = {"name": entry.name, "kind": entry.kind.value, "node_id": entry.node_id}
        try:
            return {**base, "metrics": await pool.metrics(entry.handle, timeout)}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # dead, timed out, or an actor without metrics: skipped, counted
            return {**base, "error": f"{type(exc).__name__}: {exc}"[:200]}

    live = [e for e in entries if e.alive and e.handle is not None]
    return [own, *await asyncio.gather(*(one(e) for e in live))]
