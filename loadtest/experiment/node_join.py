"""Waiting for the Ray worker nodes an experiment adds to take their share of the partitions.

The load starts only once every node leads some partition and the leadership has stopped moving:
a node-loss fault then hits partitions that were there, and no balancing move the checks cannot
see (only faults are recorded as leadership moves) happens under load.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

Leaders = dict[tuple[str, int], str]


@dataclass(slots=True)
class Spread:
    settled: bool
    waited_s: float
    nodes_without_leaders: list[str]


def leaders_of(status: dict[str, Any]) -> Leaders:
    return {(lead["topic"], lead["partition"]): lead["actor"] for lead in status["leaders"]}


def nodes_without_leaders(node_ids: list[str], actors: list[dict[str, Any]], leaders: Leaders) -> list[str]:
    """The nodes none of whose live actors leads a partition."""
    node_of = {a["name"]: a.get("node_id") for a in actors if a["alive"]}
    leading = {node_of.get(actor) for actor in leaders.values()}
    return [n for n in node_ids if n not in leading]


async def wait_spread(admin: Any, node_ids: list[str], timeout_s: float = 120.0, settle_s: float = 5.0,
                      poll_s: float = 1.0) -> Spread:
    """Until every node leads a partition and the leadership was the same for `settle_s`."""
    started = time.monotonic()
    last: Leaders | None = None
    same_since = started
    missing = list(node_ids)
    while time.monotonic() - started < timeout_s:
        try:
            leaders = leaders_of(await admin.call("status"))
            missing = nodes_without_leaders(node_ids, await admin.call("actors"), leaders)
        except Exception:  # a gateway busy with the join: ask again
            await asyncio.sleep(poll_s)
            continue
        now = time.monotonic()
        if leaders != last:
            last, same_since = leaders, now
        if not missing and now - same_since >= settle_s:
            return Spread(True, now - started, [])
        await asyncio.sleep(poll_s)
    return Spread(False, time.monotonic() - started, missing)


async def wait_replicas(admin: Any, node_ids: list[str], timeout_s: float = 120.0, poll_s: float = 0.5) -> list[str]:
    """Until every node keeps its logs as a replica of its own (per-node storage: the controller
    registered its data directory) with a partition leader up there to host the topics'
    replicas (placed only where one is); the nodes still without one."""
    started = time.monotonic()
    missing = list(node_ids)
    while time.monotonic() - started < timeout_s:
        try:
            using = {a.get("node_id") for a in await admin.call("actors")
                     if a["alive"] and a["kind"] == "partition-leader" and "replica_id" in a}
        except Exception:  # a gateway busy with the join: ask again
            using = set()
        missing = [n for n in node_ids if n not in using]
        if not missing:
            return []
        await asyncio.sleep(poll_s)
    return missing


async def join_workers(nodes: Any, admin: Any, console: Any, notes: list[str], per_node: bool = False) -> list[str]:
    """Add the worker nodes (`RayNodes`, from the main thread: Ray's node code wants it) once the
    cluster runs on the head, and wait for them to lead their share; their node ids. With per-node
    storage they lead nothing before the topics are created (their replicas are placed then),
    so this waits for their replicas, and the caller for the spread once it created the topics."""
    with console.status("worker nodes joining; waiting for them to take their part…"):
        workers = nodes.add_workers()
        if per_node:
            missing = await wait_replicas(admin, workers)
            if missing:
                notes.append(f"{len(missing)} worker node(s) kept no replica of their own within 120 s")
            return workers
        spread = await wait_spread(admin, workers)
    report_spread(spread, len(workers), console, notes)
    return workers


def report_spread(spread: Spread, workers: int, console: Any, notes: list[str]) -> None:
    if spread.settled:
        console.print(f"{workers} worker node(s) joined; partitions spread in {spread.waited_s:.1f} s")
    else:
        notes.append(f"after {spread.waited_s:.0f} s, {len(spread.nodes_without_leaders)} worker node(s) still led "
                     "no partition or the leadership still moved; the load started anyway")
