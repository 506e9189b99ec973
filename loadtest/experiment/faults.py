"""Faults on schedule: resolve what a scenario's fault hits, inject it, say what it affected.

A fault names its target the way a user thinks of it (the coordinator of group G, the share
coordinator of a share partition, the leader of T-P, a gateway, an actor, a random one); at
injection time the cluster's leadership map (the operator API's `status` and `actors`) turns
that into actor names, and the actor's partitions into the groups and partitions whose
leadership moves, which the `fault` row records for the checker (docs/experiments.md).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from cluster.admin_client import AdminError, admin_call
from coordinator.hashing import group_partition, share_state_partition
from loadtest.experiment.fault_kinds import KINDS, FaultError
from loadtest.experiment.scenario import FaultSpec, Scenario

CONSUMER_OFFSETS = "__consumer_offsets"
SHARE_GROUP_STATE = "__share_group_state"
_KIND_PREFIX = {
    "group-coordinator": "group-coordinator",
    "share-coordinator": "share-coordinator",
    "partition-leader": "partition-leader",
    "gateway": "gateway",
}


MOVE_TIMEOUT_S = 120.0
MOVE_POLL_S = 0.25


@dataclass(slots=True)
class Injected:
    fault_id: int
    spec: FaultSpec
    started_ms: float
    target: str
    actors: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)  # "topic-partition" whose leader moved
    brokers: list[str] = field(default_factory=list)
    moved: list[tuple[str, int]] = field(default_factory=list)  # every partition whose leader it takes away
    # target (group, "topic-partition", "group:topic-partition") -> the partition whose leadership
    # change it waits for (loadtest/experiment/recovery.py); empty for a fault that moves none
    waits_for: dict[str, tuple[str, int]] = field(default_factory=dict)
    ended_ms: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        detail = {"action": self.spec.action, "selector": self.spec.selector(), "actors": self.actors,
                  "groups": self.groups, "partitions": self.partitions, "brokers": self.brokers, **self.detail}
        return {"time": self.started_ms, "kind": "fault", "role": "runner", "fault_id": self.fault_id,
                "target": self.target, "detail": detail}


class Admin:
    """The operator API over any gateway that answers (the one asked may be the one killed)."""

    def __init__(self, bootstrap: str) -> None:
        self.addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]

    async def call(self, op: str, timeout: float = 30.0, **args: Any) -> Any:
        last: Exception | None = None
        for address in self.addresses:
            try:
                return await asyncio.to_thread(admin_call, address, op, timeout, **args)
            except AdminError as exc:
                last = exc
                if "cannot reach" not in str(exc):
                    raise
        raise AdminError(str(last) if last else "no gateway answered")


class FaultInjector:
    move_timeout_s = MOVE_TIMEOUT_S  # how long a node's partitions may take to move (led_elsewhere)

    def __init__(self, scenario: Scenario, admin: Admin, seed: int) -> None:
        self.scenario = scenario
        self.admin = admin
        self.rng = random.Random(seed)
        self.settings = scenario.cluster.config

    def _num(self, name: str, default: int) -> int:
        return int(self.settings.get(name, default))

    async def resolve(self, fault_id: int, spec: FaultSpec, cluster: Any = None) -> Injected:
        """The actors (or partition) the fault hits, and what their partitions are: known before it
        is injected, so that its recovery is watched from the start."""
        status = await self.admin.call("status")
        actors = await self.admin.call("actors")
        leaders = {(lead["topic"], lead["partition"]): lead["actor"] for lead in status["leaders"]}
        topic_ids = {t["name"]: t["topic_id"] for t in status["topics"]}
        now = time.time() * 1000
        injected = Injected(fault_id, spec, now, target="")
        partition = self._partition_of(spec, topic_ids)
        kind = KINDS[spec.action]
        if kind.target == "actor":
            name = self._actor_of(spec, partition, leaders, actors)
            injected.target = name
            injected.actors = [name]
            moved = [tp for tp, a in leaders.items() if a == name]
        elif kind.target == "partition":
            injected.target = f"{partition[0]}-{partition[1]}"
            injected.actors = [leaders[partition]]
            moved = [partition]
        elif kind.target == "cluster":
            injected.target = "cluster"
            injected.actors = sorted(a["name"] for a in actors if a["alive"])
            moved = list(leaders)
        else:  # a node
            if cluster is None or cluster.nodes is None:
                raise FaultError(f"{spec.action} needs the Ray nodes the experiment started")
            node_id = cluster.nodes.node_id(spec.node)
            injected.target = f"node-{spec.node}"
            injected.actors = sorted(a["name"] for a in actors if a.get("node_id") == node_id and a["alive"])
            injected.detail["node_id"] = node_id
            moved = [tp for tp, a in leaders.items() if a in injected.actors]
        injected.moved = moved
        self._affected(injected, moved, topic_ids, actors)
        return injected

    def _partition_of(self, spec: FaultSpec, topic_ids: dict[str, str]) -> tuple[str, int] | None:
        if spec.coordinator_of is not None:
            return CONSUMER_OFFSETS, group_partition(spec.coordinator_of, self._num("offsets.topic.num.partitions", 50))
        if spec.share_coordinator_of is not None:
            t = spec.share_coordinator_of
            if t.topic not in topic_ids:
                raise FaultError(f"topic {t.topic!r} does not exist")
            n = self._num("share.coordinator.state.topic.num.partitions", 50)
            return SHARE_GROUP_STATE, share_state_partition(t.group, uuid.UUID(topic_ids[t.topic]), t.partition, n)
        if spec.leader_of is not None:
            return spec.leader_of.topic, spec.leader_of.partition
        return None

    def _actor_of(self, spec: FaultSpec, partition: tuple[str, int] | None, leaders: dict, actors: list[dict]) -> str:
        live = {a["name"]: a for a in actors if a["alive"]}
        if partition is not None:
            name = leaders.get(partition)
            if name is None:
                raise FaultError(f"{partition[0]}-{partition[1]} has no leader right now")
            return name
        if spec.gateway is not None:
            return f"gateway-{spec.gateway}"
        if spec.actor is not None:
            if spec.actor not in live:
                raise FaultError(f"no live actor named {spec.actor!r}")
            return spec.actor
        kinds = spec.random if isinstance(spec.random, list) else list(_KIND_PREFIX)
        candidates = sorted(n for n, a in live.items() if a["kind"] in kinds)
        if not candidates:
            raise FaultError(f"no live actor of kinds {kinds}")
        return self.rng.choice(candidates)

    def _affected(self, injected: Injected, moved: list[tuple[str, int]], topic_ids: dict[str, str],
                  actors: list[dict]) -> None:
        moved_set = set(moved)
        offsets_n = self._num("offsets.topic.num.partitions", 50)
        state_n = self._num("share.coordinator.state.topic.num.partitions", 50)
        groups = list(self.scenario.all_groups())
        waits = injected.waits_for
        for g in groups:
            if (tp := (CONSUMER_OFFSETS, group_partition(g, offsets_n))) in moved_set:
                waits[g] = tp
        injected.groups = sorted(g for g in groups if g in waits)
        partitions = {f"{t}-{p}" for t, p in moved if not t.startswith("__")}
        # The coordinators' partitions it takes away, whether or not the scenario's groups hash to
        # them: a node's loss costs its share of both internal topics' leaders.
        injected.detail["internal_partitions"] = sorted(f"{t}-{p}" for t, p in moved if t.startswith("__"))
        waits.update({f"{t}-{p}": (t, p) for t, p in moved if not t.startswith("__")})
        # A share coordinator's partitions stand for the share partitions whose state they hold.
        for g, spec in self.scenario.share_group_specs().items():
            for topic in spec.topics:
                if topic not in topic_ids:
                    continue
                for p in range(self.scenario.partitions()[topic]):
                    tp = (SHARE_GROUP_STATE, share_state_partition(g, uuid.UUID(topic_ids[topic]), p, state_n))
                    if tp in moved_set:
                        injected.detail.setdefault("share_partitions", []).append(f"{g}:{topic}-{p}")
                        waits[f"{g}:{topic}-{p}"] = tp
        injected.partitions = sorted(partitions)
        if not KINDS[injected.spec.action].moves_leadership:
            waits.clear()  # a paused leader keeps its partitions
        by_name = {a["name"]: a for a in actors}
        injected.brokers = sorted(by_name[n]["address"] for n in injected.actors if n in by_name and by_name[n].get("address"))

    async def inject(self, injected: Injected, cluster: Any) -> None:
        """Do it. Returns when the fault is over where it has an end (a pause, a restart, a node's
        partitions moved): fault_kinds.py."""
        await KINDS[injected.spec.action].inject(self, injected, cluster)

    async def led_elsewhere(self, injected: Injected, timeout_s: float | None = None) -> float | None:
        """When the controller first names, for every partition the fault took away, a leader that
        is not one of the actors it hit (a replacement is always a new name); None: not in time."""
        gone = set(injected.actors)
        deadline = time.monotonic() + (self.move_timeout_s if timeout_s is None else timeout_s)
        while time.monotonic() < deadline:
            try:
                # Without the groups' listing: a coordinator of the lost node holds it until Ray
                # declares the actor dead, seconds after the controller moved its partitions.
                status = await self.admin.call("status", timeout=10, groups=False)
            except AdminError:  # the gateway asked was on the lost node: the next one is tried next time
                status = None
            if status is not None:
                leaders = {(lead["topic"], lead["partition"]): lead["actor"] for lead in status["leaders"]}
                if all(leaders.get(tp) not in gone and tp in leaders for tp in injected.moved):
                    return time.time() * 1000
            await asyncio.sleep(MOVE_POLL_S)
        return None

    async def another_actor(self, current: str) -> str:
        kind = current.rsplit("-", 1)[0]
        actors = await self.admin.call("actors")
        others = sorted(a["name"] for a in actors if a["alive"] and a["name"] != current and a["name"].rsplit("-", 1)[0] == kind)
        if not others:
            raise FaultError(f"no other live {kind} to move to")
        return self.rng.choice(others)
