"""The kinds of fault a scenario may schedule, one entry each: what it hits, what it does to
leadership, when it is over, and how it is injected. The scenario's validation, the injector and
the runner read these properties instead of testing the action's name, and the checker takes
from here which faults move leadership (docs/experiments.md lists the kinds for users).

Adding a kind is one entry here (and its name in scenario.Action, which msgspec checks when it
parses a scenario; tests/unit/experiment/test_fault_kinds.py holds the two equal).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

Target = Literal["actor", "partition", "cluster", "node"]


class FaultError(RuntimeError):
    """A fault that could not be injected (the run goes on; the note says why)."""


@dataclass(frozen=True, slots=True)
class FaultKind:
    action: str
    # actor: one selector naming an actor (or a partition, whose leader it is); partition: a
    # selector naming a partition; cluster and node: no selector (a node by its index).
    target: Target
    inject: Callable[[Any, Any, Any], Awaitable[None]]  # (injector, injected, cluster)
    moves_leadership: bool  # afterwards another actor leads what it hit
    lasts: bool = False  # it has a duration (duration_s): the actor goes on after it
    own_cluster: bool = False  # needs the cluster (and Ray nodes) the experiment starts itself
    # Its hit actors may answer until it is over: no success counts as a recovery before its end.
    recovery_after_end: bool = False

    @property
    def over_once_injected(self) -> bool:
        """Done when injected, with no end of its own to wait for (the runner's progress)."""
        return not self.lasts and self.target != "cluster"


async def _kill(injector: Any, injected: Any, cluster: Any) -> None:
    await injector.admin.call("kill", name=injected.target)


async def _pause(injector: Any, injected: Any, cluster: Any) -> None:
    seconds = injected.spec.duration_s
    result = await injector.admin.call("pause", timeout=seconds + 60, name=injected.target, seconds=seconds)
    injected.detail.update(stopped_at=result["stopped_at"], resumed_at=result["resumed_at"])
    injected.ended_ms = result["resumed_at"] * 1000


async def _move(injector: Any, injected: Any, cluster: Any) -> None:
    topic, partition = injected.target.rsplit("-", 1)
    destination = injected.spec.to or await injector.another_actor(injected.actors[0])
    injected.detail["to"] = destination
    await injector.admin.call("move", topic=topic, partition=int(partition), actor=destination)


async def _restart_cluster(injector: Any, injected: Any, cluster: Any) -> None:
    if cluster is None:
        raise FaultError("restart-cluster needs the cluster the experiment started")
    await asyncio.to_thread(cluster.kill)
    await asyncio.sleep(injected.spec.down_s)
    await asyncio.to_thread(cluster.start)
    injected.ended_ms = time.time() * 1000


async def _kill_node(injector: Any, injected: Any, cluster: Any) -> None:
    if cluster is None or cluster.nodes is None:
        raise FaultError("kill-node needs the Ray nodes the experiment started")
    # Ray's remove_node kills the node's processes at once, then waits for each to exit, which
    # took ten seconds and more here. On this loop it stopped every member the experiment runs
    # for that long (their heartbeats, commits and fetches all live here), so the run measured
    # its own stall as the cluster's recovery: it runs on a thread (only starting nodes needs
    # the main thread, for Ray's signal handlers).
    removal = asyncio.create_task(asyncio.to_thread(cluster.nodes.remove, injected.spec.node))
    try:
        # The lost node's actors may answer for a second or so after it is removed, until Ray
        # sees them gone: the fault is over only once the controller has moved their partitions.
        injected.ended_ms = await injector.led_elsewhere(injected)
    finally:
        await removal  # its failure is the fault's; the run goes on only once the node is gone
    if injected.ended_ms is None:
        raise FaultError(
            f"the partitions of node {injected.spec.node}'s actors were not moved within {injector.move_timeout_s:.0f} s"
        )


KINDS: dict[str, FaultKind] = {
    k.action: k
    for k in (
        FaultKind("kill", "actor", _kill, moves_leadership=True),
        FaultKind("pause", "actor", _pause, moves_leadership=False, lasts=True),
        FaultKind("move", "partition", _move, moves_leadership=True),
        FaultKind("restart-cluster", "cluster", _restart_cluster, moves_leadership=True, own_cluster=True),
        FaultKind("kill-node", "node", _kill_node, moves_leadership=True, own_cluster=True, recovery_after_end=True),
    )
}

# The actions after which another actor leads what the fault hit (a pause keeps the leader).
MOVES_LEADERSHIP = frozenset(action for action, kind in KINDS.items() if kind.moves_leadership)
