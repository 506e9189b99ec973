"""The classic protocol against KIP-848's consumer protocol, in one run of one cluster
(`python -m loadtest.bench protocols-rebalance | protocols-heartbeat`; docs/performance.md).

- rebalance time: one member joins a Stable group of N; from its first JoinGroup (classic) or
  ConsumerGroupHeartbeat (consumer) to every member settled again: Stable, in one generation (a
  consumer member's epoch), a position for each partition it owns, and every partition owned. The
  topic has two partitions per member, so the newcomer takes some from the others: an eager
  classic group revokes and reads back every partition, a cooperative one revokes only what moves
  but in a second rebalance, a consumer group moves only what moves, each owner revoking before
  the newcomer is given it. The members' own clocks time it (processes._SettleClock).
- heartbeat cost: N idle members (Stable, no fetching, no commits) of one protocol, in groups of
  G, heartbeating back to back; heartbeats/s, the server's CPU per heartbeat (every process of
  the cluster, from /proc) and the client's.

Both protocols run against the same cluster, one after the other, the order alternating round by
round; where the machine allows it the cluster is pinned to its cores and the client to others
(pinning.py).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

from cluster.gateway.apis import ApiKey
from loadtest.bench import pinning
from loadtest.bench.processes import LocalFleet, ProcessFleet, Spec, fleet, until_settled
from loadtest.drivers.crowd import Crowd
from loadtest.members.machine import parse_bootstrap

HEARTBEAT_API = {"classic": "Heartbeat", "consumer": "ConsumerGroupHeartbeat"}
JOIN_API = {"classic": "JoinGroup", "consumer": "ConsumerGroupHeartbeat"}


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a protocol, and for a classic group the leader's assignor
    (a consumer group's is the coordinator's `server_assignor`, None: the group's default)."""

    protocol: str
    assignor: str | None = None

    @property
    def label(self) -> str:
        return f"{self.protocol} ({self.assignor or ('uniform' if self.protocol == 'consumer' else 'range')})"

    def config(self, heartbeat_ms: int) -> dict[str, Any]:
        if self.protocol == "consumer":
            # The interval is the coordinator's (group.consumer.heartbeat.interval.ms).
            return {"commit_interval_ms": 0, **({"server_assignor": self.assignor} if self.assignor else {})}
        return {"commit_interval_ms": 0, "heartbeat_interval_ms": heartbeat_ms, "assignor": self.assignor or "range"}


def parse_sides(text: str) -> list[Side]:
    """"classic:range,classic:cooperative-sticky,consumer" -> Sides."""
    sides = []
    for part in text.split(","):
        protocol, _, assignor = part.strip().partition(":")
        if protocol not in HEARTBEAT_API:
            raise SystemExit(f"unknown protocol {protocol!r}: classic[:assignor] or consumer[:server assignor]")
        sides.append(Side(protocol, assignor or None))
    return sides


def consumer_settings(heartbeat_ms: int, initial_delay_ms: int = 0) -> dict[str, object]:
    """The cluster's settings for consumer members heartbeating every `heartbeat_ms` (the lowest
    interval a group may set goes down with it). The initial delay holds back only the first join
    of an Empty classic group: it lets a large group form in one generation, and does not touch a
    join into a Stable one."""
    return {"group.initial.rebalance.delay.ms": initial_delay_ms, "group.consumer.heartbeat.interval.ms": heartbeat_ms,
            "group.consumer.min.heartbeat.interval.ms": min(heartbeat_ms, 5_000)}


async def create_topic(crowd: Crowd, bootstrap: str, topic: str, partitions: int) -> None:
    broker = parse_bootstrap(bootstrap)[0]
    await crowd.driver.call(broker, ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": partitions,
                            "replication_factor": 1, "assignments": [], "configs": []}], "timeout": 60_000,
                            "validate_only": False})


class Placement:
    """The cluster on the server's cores, this process and the client processes on the client's;
    and the CPU each side spends. `cores` None: nothing is pinned (CPU is still read)."""

    def __init__(self, cores: pinning.Cores | None) -> None:
        self.cores = cores

    def server_pids(self, f: LocalFleet | ProcessFleet | None = None) -> set[int]:
        """Every process this one started but the fleet's client processes (None: no fleet)."""
        return pinning.descendants(os.getpid(), leave_out=f.pids if f is not None else [])

    def pin(self, f: LocalFleet | ProcessFleet | None = None) -> None:
        if self.cores is None:
            return
        for pid in self.server_pids(f):
            pinning.pin(pid, self.cores.server)
        for pid in [os.getpid(), *(f.pids if f is not None else [])]:
            pinning.pin(pid, self.cores.client)

    def describe(self) -> str:
        return self.cores.describe() if self.cores else "not pinned (needs Linux and two cores)"


async def rebalance_once(bootstrap: str, side: Side, size: int, heartbeat_ms: int, placement: Placement,
                         processes: int = 1, timeout_s: float = 180, steady_s: float = 2.0) -> dict[str, float]:
    """One member joins a settled group of `size` on a fresh topic of 2 × size partitions: ms from
    its first JoinGroup / ConsumerGroupHeartbeat to every member settled again, ms to that request's
    answer (a classic group's join phase complete; a consumer group's new target computed), the
    partitions whose reading started over (positions fetched again), the generations it took, and
    the server's cores busy with the group's heartbeats before the join (over `steady_s`)."""
    f = fleet(bootstrap, processes)
    try:
        placement.pin(f)
        stamp = time.monotonic_ns()
        topic, group, partitions = f"protocols-{size}-{stamp}", f"protocols-{side.protocol}-{size}-{stamp}", 2 * size
        await create_topic(f.crowd, bootstrap, topic, partitions)
        config = side.config(heartbeat_ms)

        def spec(name: str, i: int) -> Spec:
            return Spec(name, group, i, config=config, protocol=side.protocol, topic=topic, timed=True)

        await f.start([spec(f"m{i}", i) for i in range(size)])
        try:
            before = await until_settled(f, timeout_s, one_group=True, owned=partitions)
        except RuntimeError as e:
            raise RuntimeError(f"{side.label}: the group of {size} did not form: {e}") from None
        server = placement.server_pids(f)
        cpu_before, steady_from = pinning.cpu_seconds(server), time.monotonic()
        await asyncio.sleep(steady_s)
        steady = pinning.spent(cpu_before, pinning.cpu_seconds(server)) / (time.monotonic() - steady_from)
        started = time.time() * 1000
        await f.start([spec("newcomer", size)])
        try:
            after = await until_settled(f, timeout_s, one_group=True, newer_than=before.min_generation, owned=partitions)
        except RuntimeError:
            raise RuntimeError(f"{side.label}: the group of {size} did not settle after the join") from None
        first = min(await f.times("request", started, api=JOIN_API[side.protocol], member="newcomer"))
        answered = min(await f.times("response", started, api=JOIN_API[side.protocol], member="newcomer", error="NONE"))
        settled = await f.settled_since()
        restarted = len(await f.times("position", started))
    finally:
        await f.close()
    if any(t is None for t in settled):
        raise RuntimeError(f"{side.label}: a member of the group of {size} was not settled")
    return {"ms": max(t for t in settled if t is not None) - first, "first_answer_ms": answered - first,
            "restarted": restarted, "generations": after.min_generation - before.min_generation,
            "steady_server_cores": steady}


async def heartbeat_cost(bootstrap: str, side: Side, members: int, group_size: int, seconds: float,
                         heartbeat_ms: int, placement: Placement, processes: int = 1) -> dict[str, float]:
    """`members` idle members of `side` in groups of `group_size` (one partition each), heartbeating
    `heartbeat_ms` after each answer: heartbeats/s over `seconds`, the cluster's CPU per heartbeat
    and per second, and the client's CPU per heartbeat.

    Each member has its own connections, as a real consumer does. Members of a classic group
    cannot share one: a broker answers a connection's requests in order, so a JoinGroup parked
    there until its group's join phase completes holds back every answer behind it, among them
    the heartbeat answers that would tell the group's other members to rejoin (and with enough
    answers outstanding the gateway stops reading the connection): the group does not form until
    rebalance timeouts run out. heartbeat-scaling's idle members share connections because each
    is alone in its group, whose join completes at once."""
    f = fleet(bootstrap, processes)
    try:
        placement.pin(f)
        stamp = time.monotonic_ns()
        topic = f"heartbeats-{side.protocol}-{stamp}"
        await create_topic(f.crowd, bootstrap, topic, group_size)
        config = side.config(heartbeat_ms)
        if side.protocol == "classic":
            config = {**config, "session_timeout_ms": 30_000}
        specs = [Spec(f"hb{i}", f"heartbeats-{side.protocol}-{stamp}-{i // group_size}", i // group_size,
                      config=config, protocol=side.protocol, topic=topic) for i in range(members)]
        await f.start(specs)
        await until_settled(f, 300, owned=(members // group_size) * group_size)
        server = placement.server_pids(f)
        server_before, client_before = pinning.cpu_seconds(server), await f.cpu()
        t0 = time.time() * 1000
        await asyncio.sleep(seconds)
        t1 = time.time() * 1000
        server_after = pinning.cpu_seconds(placement.server_pids(f))
        client = await f.cpu() - client_before
        answers = await f.count(HEARTBEAT_API[side.protocol], t0, t1)
    finally:
        await f.close()
    server_cpu = pinning.spent(server_before, server_after)
    window = (t1 - t0) / 1000
    per = (lambda cpu: cpu * 1e6 / answers) if answers else (lambda _cpu: float("inf"))
    return {"heartbeats_per_s": answers / window, "server_us": per(server_cpu), "server_cores": server_cpu / window,
            "client_us": per(client), "client_cores": client / window,
            "per_server_core": answers / server_cpu if server_cpu else float("inf")}
