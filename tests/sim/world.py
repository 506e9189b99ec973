"""One simulated group coordinator partition: the real shard on the real runtime, over a memory disk.

Everything that could run concurrently in production (requests of many members, timer expiries,
an append in flight, a reload) interleaves here in an order chosen by the seed, and only there:
the executor runs blocking work when the schedule says, the clock moves when it says.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.log import LogConfig
from cluster.recordbatch import decode_records
from cluster.runtime import CoordinatorRuntime, RuntimeConfig
from coordinator.config import GroupCoordinatorConfig
from coordinator.records import CODEC, GroupMetadataKey
from coordinator.shard import GroupCoordinatorShard
from tests.sim import harness
from tests.sim.harness import Harness, Violation
from tests.sim.members import PARTITIONS, TOPIC, Phase, SimMember

TP = ("__consumer_offsets", 0)
CONFIG = GroupCoordinatorConfig(
    initial_rebalance_delay_ms=500,
    min_session_timeout_ms=1000,
    offsets_retention_ms=20_000,
    offsets_retention_check_interval_ms=3_000,
)


@dataclass
class Facts:
    """What members were told, by group incarnation (a group deleted and created again starts over)."""

    incarnation: dict[str, int] = field(default_factory=dict)
    assigned: dict[tuple[str, int, int], dict[str, tuple[int, ...]]] = field(default_factory=dict)
    max_generation: dict[tuple[str, int], int] = field(default_factory=dict)
    commits: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # (g, p) -> (offset, at)

    def inc(self, group_id: str) -> int:
        return self.incarnation.get(group_id, 0)


def new_shard(tp, clock, ids) -> GroupCoordinatorShard:
    return GroupCoordinatorShard(tp, clock, config=CONFIG, new_member_id=lambda prefix: f"{prefix}-{next(ids)}")


class World(Harness):
    def __init__(self, seed: int, groups: int = 2, members_per_group: int = 3) -> None:
        super().__init__(seed)
        self.ids = itertools.count()
        self.epoch = 1
        self.reloading: asyncio.Task | None = None
        self.facts = Facts()
        self.next_offset = itertools.count(1)
        self.members = [
            SimMember(f"m{g}.{i}", f"group-{g}") for g in range(groups) for i in range(members_per_group)
        ]
        self.disk_listener_seen = 0
        self.runtime = CoordinatorRuntime(
            codec=CODEC,
            shard_factory=functools.partial(new_shard, ids=self.ids),
            config=RuntimeConfig(data_dir=Path("/sim"), log_config=LogConfig(), compaction_records=10**9),
            executor=self.executor,
            clock=self.clock,
            wakeups=self.wakeups,
            log_opener=self.disk.open,
        )
        self._run(self._load())

    async def _load(self) -> None:
        await self.runtime.load(TP, self.epoch)

    def settled(self) -> None:
        # A group tombstone ends an incarnation: a group created again starts at generation 0.
        for path, batch in self.disk.appended[self.disk_listener_seen:]:
            for _offset, key, value in decode_records(batch):
                record = CODEC.decode(key, value)
                if isinstance(record.key, GroupMetadataKey) and record.value is None:
                    gid = record.key.group_id
                    self.facts.incarnation[gid] = self.facts.inc(gid) + 1
        self.disk_listener_seen = len(self.disk.appended)

    # -- the schedule ----------------------------------------------------------------------------

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.50:
            self._member_step(self.rng.choice(self.members))
        elif roll < 0.65:
            self.advance(self.rng.randint(50, 4000))
        elif roll < 0.93:
            self.trace.append("io")
            self.executor.run_next()
        elif roll < 0.98:
            self.trace.append("fail next append")
            self.disk.fail_appends += 1
        elif self.reloading is None or self.reloading.done():
            self.trace.append("crash and reload")
            self.epoch += 1
            self.reloading = self.loop.create_task(self._reload(self.epoch))
        self.settle()

    async def _reload(self, epoch: int) -> None:
        await self.runtime.unload(TP)
        await self.runtime.load(TP, epoch)

    def _member_step(self, member: SimMember) -> None:
        if member.outstanding is not None:
            return
        shard_op = None
        if member.phase is Phase.IDLE:
            if self.rng.random() < 0.5:
                member.crashed = False
                member.rejoin(forget_id=True)
            return
        if member.phase is Phase.JOINING:
            request = member.join()
            shard_op, kind = (lambda s, t, r=request: s.join_group(r, t)), "join"
        elif member.phase is Phase.SYNCING:
            request = member.sync()
            shard_op, kind = (lambda s, t, r=request: s.sync_group(r, t)), "sync"
        else:
            roll = self.rng.random()
            if roll < 0.6:
                request = member.heartbeat()
                shard_op, kind = (lambda s, t, r=request: s.heartbeat(r, t)), "heartbeat"
            elif roll < 0.85:
                if not member.assignment:
                    return
                request = member.commit(next(self.next_offset))
                shard_op, kind = (lambda s, t, r=request: s.commit_offsets(r, t)), "commit"
            elif roll < 0.93:
                request = member.leave()
                shard_op, kind = (lambda s, t, r=request: s.leave_group(r, t)), "leave"
                member.phase = Phase.IDLE  # a leaving member is gone whatever the answer
            else:
                self.trace.append(f"{member.name} crashes")
                member.phase, member.crashed = Phase.IDLE, True
                return
        self.trace.append(f"{member.name} {kind} {request}")
        epoch = self.epoch
        runtime = self.runtime

        async def call() -> Any:
            return await runtime.write(TP, epoch, lambda token: shard_op(runtime.shard(TP), token))

        task = self.loop.create_task(call())
        member.outstanding = task
        task.add_done_callback(lambda t, m=member, k=kind, r=request: self._answered(m, k, r, t))

    def _answered(self, member: SimMember, kind: str, request: Any, task: asyncio.Task) -> None:
        member.outstanding = None
        if task.cancelled():
            return
        if task.exception() is not None:
            self.trace.append(f"{member.name} {kind} failed: {type(task.exception()).__name__}")
            member.on_failure()
            return
        response = task.result()
        self.trace.append(f"{member.name} {kind} -> {response}")
        if member.phase is Phase.IDLE and kind != "leave":
            return  # it crashed meanwhile; nobody hears the answer
        facts, group = self.facts, member.group_id
        if kind == "join":
            # A join's generation is not durable yet (Kafka writes the group at the leader's sync),
            # so what a JoinGroup answer says may be undone by a failed write; a sync's may not.
            member.on_join(response)
        elif kind == "sync":
            member.on_sync(response)
            if response.error_code == ErrorCode.none:
                key = (group, facts.inc(group), request.generation_id)
                given = facts.assigned.setdefault(key, {})
                for other, parts in given.items():
                    if other != member.member_id and set(parts) & set(response.assignment):
                        raise Violation(f"{key}: partitions {set(parts) & set(response.assignment)} given to {other} and {member.member_id}")
                given[member.member_id] = tuple(response.assignment)
                gk = (group, facts.inc(group))
                facts.max_generation[gk] = max(facts.max_generation.get(gk, 0), request.generation_id)
        elif kind == "heartbeat":
            member.on_heartbeat(response)
        elif kind == "commit":
            for _topic, parts in response.topics:
                for partition, error in parts:
                    if error == ErrorCode.none:
                        offset = request.topics[0][1][0].offset
                        facts.commits[(group, partition)] = (offset, self.clock.now_ms())

    # -- invariants ------------------------------------------------------------------------------

    def quiescent(self) -> bool:
        partition = self.runtime.partitions.get(TP)
        return (
            not self.executor.jobs
            and (self.reloading is None or self.reloading.done())
            and partition is not None
            and partition.status.value == "active"
            and len(partition.queue) == 0
        )

    def check(self) -> None:
        partition = self.runtime.partitions.get(TP)
        if partition is None or partition.shard is None or partition.status.value != "active":
            return
        shard = partition.shard
        # Memory runs ahead of the log while a batch is in flight (replay, then append), and the
        # facts follow the log: compare them at rest.
        if not self.quiescent():
            return
        for (group, inc), generation in self.facts.max_generation.items():
            if inc != self.facts.inc(group):
                continue
            live = shard.groups.get(group)
            if live is None:
                raise Violation(f"{group} vanished from memory without a tombstone (members were told generation {generation})")
            if live.generation_id < generation:
                raise Violation(f"{group} is at generation {live.generation_id}, members were told {generation}")
        rebuilt = new_shard(TP, self.clock, self.ids)
        for batch in self.disk.files.get(self.runtime.config.data_dir / f"{TP[0]}-{TP[1]}", ()):
            for _offset, key, value in decode_records(batch):
                rebuilt.replay(CODEC.decode(key, value))
        self._compare(shard.durable_view(), rebuilt.durable_view())
        now = self.clock.now_ms()
        for (group, p), (offset, at) in self.facts.commits.items():
            value = rebuilt.offsets.get(group, {}).get((TOPIC, p))
            if value is None:
                if now - at < CONFIG.offsets_retention_ms:
                    raise Violation(f"{group} offset of partition {p} (committed {offset}, {now - at} ms ago) is gone")
            elif value.offset != offset and value.commit_timestamp <= at:
                raise Violation(f"{group} partition {p}: log says {value.offset}, the last acknowledged commit was {offset}")

    def _compare(self, live: dict, replayed: dict) -> None:
        """The log rebuilds the offsets, and every group at rest (Stable or Empty) exactly; a group
        in the middle of a rebalance holds members the log has not heard of yet, by design."""
        if live["offsets"] != replayed["offsets"]:
            raise Violation(f"offsets in memory {live['offsets']} != replayed from the log {replayed['offsets']}")
        for group_id in sorted(set(live["groups"]) | set(replayed["groups"])):
            mine, logged = live["groups"].get(group_id), replayed["groups"].get(group_id)
            if mine is not None and mine[0] not in ("Stable", "Empty"):
                continue
            if mine is not None and logged is None and mine[:3] == ("Empty", 0, None):
                continue  # created by a first JoinGroup that only handed out a member id: never written
            if mine != logged:
                raise Violation(f"{group_id}: in memory {mine}, replayed from the log {logged}")

def run(seed: int, steps: int = 400) -> World:
    """Run one seed; raise Violation (with the seed and the last steps) on the first broken invariant."""
    return harness.run(lambda: World(seed), seed, steps)


__all__ = ["run", "World", "Violation", "PARTITIONS"]
