"""Coordinators on replicated logs (issue 25, step 4), without Ray: three CoordinatorHosts, each
keeping one replica of a coordinator partition in its own data directory, linked in-process, and
the controller side the partition leaders' tests use. What a client of the coordinator sees:
an operation answered only once the in-sync replicas hold its records, COORDINATOR_NOT_AVAILABLE
with nothing written below min.insync.replicas, a write that cannot commit timing out with its
state kept, and a new leader that loads its own log and serves what was committed."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from kernel.result import Result

from cluster.actors.coordinator_host import CoordinatorHost
from cluster.calls import CoordinatorItem, Failed
from cluster.calls.kinds import ActorKind
from cluster.config import Config
from cluster.replication.registration import reconcile
from cluster.runtime import PartitionStatus
from tests.unit.replication.controller_side import TP, PushedHosts, run
from tests.unit.replication.test_manager import until
from tests.unit.test_runtime import CODEC, CounterShard

SETTINGS = {
    "min.insync.replicas": 2,
    "replica.lag.time.max.ms": 1_500,
    "replica.fetch.wait.max.ms": 50,
    "replica.fetch.backoff.ms": 20,
    "offsets.commit.timeout.ms": 1_000,
}

class Counters(CounterShard):
    """The runtime tests' counters without their expiry timers: nothing but the test writes."""

    def incr(self, name: str) -> Result:
        result = super().incr(name)
        return Result(result.records, result.response)

    def on_loaded(self) -> Result:
        return Result()


# An operation as the actors see one (cluster/calls/operations.py): one counter up by one.
INCR = SimpleNamespace(run=lambda shard, name, token: shard.incr(name), reads=False)
GET = SimpleNamespace(run=lambda shard, name, token: shard.get(name), reads=True)


class World(PushedHosts):
    """Coordinator hosts, pushed as the controller's keeper pushes (ReplicaPush)."""

    def __init__(self, tmp_path, replicas=(0, 1, 2), shard=None, **settings) -> None:
        super().__init__(replicas)
        self.tmp_path = tmp_path
        self.config = Config({**SETTINGS, **settings})
        self.shard = shard or Counters

    def make_host(self, replica: int) -> CoordinatorHost:
        return CoordinatorHost(f"group-coordinator-{replica}", ActorKind.GROUP_COORDINATOR, CODEC, self.shard,
                               self.config, self.tmp_path / str(replica))

    async def serving(self) -> CoordinatorHost:
        """The leader's host, once it has loaded the partition at the current epoch."""
        def loaded() -> bool:
            host = self.hosts.get(self.registration.leader)
            partition = host.runtime.partitions.get(TP) if host is not None else None
            return partition is not None and partition.epoch == self.epoch and partition.status is PartitionStatus.ACTIVE
        await until(loaded)
        return self.leader()


async def call(host: CoordinatorHost, op, epoch: int, name: str = "a"):
    return await host.execute(TP[0], CoordinatorItem(op, TP[1], epoch, name))


def log_end(host: CoordinatorHost) -> int:
    return host.replicas.manager.replicas[TP].log.end_offset


def test_an_operation_is_answered_once_every_in_sync_replica_holds_its_records(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = await w.serving()
        assert await call(leader, INCR, w.epoch) == 1
        # Answered means replicated: every follower's log holds the record.
        for r in (1, 2):
            assert log_end(w.hosts[r]) == 1
        assert await call(leader, INCR, w.epoch) == 2
        # Followers serve nothing: a client that asks one is sent to look the coordinator up.
        answer = await call(w.hosts[1], GET, w.epoch)
        assert isinstance(answer, Failed) and answer.error_code is ErrorCode.not_coordinator

    run(World(tmp_path), test)


def test_below_min_insync_replicas_a_write_is_refused_before_anything_is_written(tmp_path):
    async def test(w: World):
        await w.start(0)  # the others never come: the controller takes them out of the ISR
        await w.register(reconcile(w.registration, w.alive()))
        await w.push_to(0)
        assert w.registration.isr == (0,)
        leader = await w.serving()
        refused = await call(leader, INCR, w.epoch)
        assert isinstance(refused, Failed) and refused.error_code is ErrorCode.coordinator_not_available
        assert log_end(leader) == 0 and leader.runtime.shard(TP).values == {}  # reverted, nothing written
        # A follower comes, catches up and joins: writes are taken again.
        await w.start(1)
        await until(lambda: 1 in w.registration.isr)
        assert await call(leader, INCR, w.epoch) == 1

    run(World(tmp_path), test)


def test_a_write_the_followers_never_get_times_out_keeps_its_state_and_commits_when_they_return(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = await w.serving()
        assert await call(leader, INCR, w.epoch) == 1
        # Both followers vanish without the controller knowing yet: the leader appends, and the
        # high watermark cannot pass the write.
        stopped = {r: w.hosts.pop(r) for r in (1, 2)}
        for host in stopped.values():
            await host.shutdown()
        timed_out = await call(leader, INCR, w.epoch)
        assert isinstance(timed_out, Failed) and timed_out.error_code is ErrorCode.coordinator_not_available
        assert "not committed within 1000 ms" in timed_out.message
        assert log_end(leader) == 2 and leader.runtime.shard(TP).values == {"a": 2}  # kept, as in Kafka
        # A read waits for the pending write's commit (or times out the same way).
        reading = asyncio.ensure_future(call(leader, GET, w.epoch))
        # A follower returns and catches up: the write commits, and a read sees it.
        await w.start(1)
        await until(lambda: leader.replicas.manager.replicas[TP].high_watermark == 2)
        assert await call(leader, GET, w.epoch) == 2
        read = await reading
        assert read == 2 or (isinstance(read, Failed) and read.error_code is ErrorCode.coordinator_not_available)

    run(World(tmp_path), test)


def test_a_new_leader_loads_its_own_log_and_serves_every_committed_write(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = await w.serving()
        for n in range(1, 6):
            assert await call(leader, INCR, w.epoch) == n
        old_epoch, old_leader = w.epoch, w.registration.leader
        await w.stop(old_leader)  # the controller elects an in-sync follower
        assert w.registration.leader != old_leader and w.epoch > old_epoch
        successor = await w.serving()
        assert await call(successor, GET, w.epoch) == 5
        assert await call(successor, INCR, w.epoch) == 6
        # The old epoch is fenced on the new leader.
        stale = await call(successor, INCR, old_epoch)
        assert isinstance(stale, Failed) and stale.error_code is ErrorCode.not_coordinator

    run(World(tmp_path), test)


def test_a_leader_demoted_under_a_waiting_write_answers_not_coordinator_and_unloads_first(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = await w.serving()
        assert await call(leader, INCR, w.epoch) == 1
        old = w.registration.leader
        stopped = {r: w.hosts.pop(r) for r in (0, 1, 2) if r != old}
        for host in stopped.values():
            await host.shutdown()
        waiting = asyncio.ensure_future(call(leader, INCR, w.epoch))
        await until(lambda: log_end(leader) == 2)
        # The controller moves leadership away (to a replica whose host is away, so nothing is
        # fetched): the push demotes the replica here, which unloads the partition first.
        other = next(iter(stopped))
        await w.register(dataclasses.replace(w.registration, leader=other, leader_epoch=w.epoch + 1,
                                             partition_epoch=w.registration.partition_epoch + 1))
        answer = await asyncio.wait_for(waiting, 20)
        assert isinstance(answer, Failed) and answer.error_code is ErrorCode.not_coordinator
        assert TP not in leader.runtime.partitions

    run(World(tmp_path), test)


class GatedCounters(Counters):
    """Counters whose replay waits for the test's gate while `held` (a long load, held mid-way)."""

    gate = threading.Event()
    held = False

    def replay(self, record) -> None:
        if GatedCounters.held:
            GatedCounters.gate.wait(10)
        super().replay(record)


def test_a_leader_demoted_mid_load_stops_its_replay_first_and_keeps_its_replicas_log_open(tmp_path):
    """A demotion during a new leader's replay: the unload waits for the replay to stop (a
    follower's truncation must not cut under it) and leaves the log open, the replica's, which
    goes on following: the next leader's writes reach it."""
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = await w.serving()
        for n in range(1, 4):
            assert await call(leader, INCR, w.epoch) == n
        GatedCounters.gate.clear()
        GatedCounters.held = True
        await w.stop(w.registration.leader)
        loading = w.leader()
        await until(lambda: TP in loading.runtime.partitions)  # its replay has begun, and waits
        demoted_id = w.registration.leader
        other = next(r for r in w.registration.isr if r != demoted_id)
        await w.register(dataclasses.replace(w.registration, leader=other, leader_epoch=w.epoch + 1,
                                             partition_epoch=w.registration.partition_epoch + 1))
        await asyncio.sleep(0.05)
        # The demotion waits for the replay: the replica here still leads (on_demote first).
        assert loading.replicas.manager.replicas[TP].leads
        GatedCounters.held = False
        GatedCounters.gate.set()
        await until(lambda: TP not in loading.runtime.partitions)
        successor = await w.serving()
        assert await call(successor, GET, w.epoch) == 3
        assert await call(successor, INCR, w.epoch) == 4  # in sync: the demoted copy fetched it
        replica = loading.replicas.manager.replicas[TP]
        assert not replica.log._closed and replica.log.end_offset == 4

    run(World(tmp_path, shard=GatedCounters), test)
