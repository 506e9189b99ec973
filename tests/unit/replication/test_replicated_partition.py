"""Replicated user partitions served by partition leaders (issue 25), without Ray: three
PartitionLeader objects, each keeping one replica in its own data directory, linked in-process,
and a controller side that keeps the registration with the real registration functions and pushes
it as the controller's keeper does (ReplicaPush). What a client sees: acks=all answered once the
in-sync replicas hold the write, NOT_ENOUGH_REPLICAS below min.insync.replicas, reads below the
high watermark, idempotent retries recognised by the next leader, and a leader that stopped
leading refusing writes."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from cluster.actors.partition_leader import PartitionLeader
from cluster.calls import FetchItem, ListOffsetsItem, ProduceItem
from cluster.config import Config
from cluster.recordbatch import iter_batches
from cluster.replication.push import ReplicaPush
from cluster.replication.registration import PartitionRegistration, reconcile
from tests.raw_producer import producer_batch
from tests.unit.replication.controller_side import TP, Link, PushedHosts, run
from tests.unit.replication.test_manager import until

SETTINGS = {
    "message.max.bytes": 1 << 20,
    "min.insync.replicas": 2,
    "replica.lag.time.max.ms": 1_500,
    "replica.fetch.wait.max.ms": 50,
    "replica.fetch.backoff.ms": 20,
}


class World(PushedHosts):
    """Partition leaders as the hosts, pushed as the controller's keeper pushes (ReplicaPush)."""

    def __init__(self, tmp_path, replicas=(0, 1, 2), **settings) -> None:
        super().__init__(replicas)
        self.tmp_path = tmp_path
        self.config = Config({**SETTINGS, **settings})

    def make_host(self, replica: int) -> PartitionLeader:
        return PartitionLeader(f"partition-leader-{replica}", self.config, self.tmp_path / str(replica))


async def produce(host: PartitionLeader, epoch: int, records: bytes, acks_all: bool = True, timeout_ms: int = 10_000):
    (outcome,) = await host.produce([ProduceItem(*TP, epoch, records, acks_all, timeout_ms)])
    return outcome


async def fetch(host: PartitionLeader, epoch: int, offset: int = 0, wait_ms: int = 0):
    (outcome,) = await host.fetch([FetchItem(*TP, epoch, -1, offset, 1 << 20)], wait_ms, 1, 1 << 20)
    return outcome


def offsets_in(records: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(records)]


def test_acks_all_is_answered_once_every_in_sync_replica_holds_it_and_consumers_then_see_it(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = w.leader()
        # A consumer's long poll, waiting before anything is written, wakes when the high watermark moves.
        polling = asyncio.ensure_future(fetch(leader, w.epoch, wait_ms=20_000))
        await asyncio.sleep(0)
        first = await produce(leader, w.epoch, producer_batch(7, 0, 0, count=3))
        polled = await asyncio.wait_for(polling, 10)
        assert (polled.high_watermark, offsets_in(polled.records)) == (3, [0])
        assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
        # Answered means replicated: every follower's log holds it, and the leader shows it.
        for r in (1, 2):
            assert w.hosts[r].replicas.replicas[TP].log.end_offset == 3
        read = await fetch(leader, w.epoch)
        assert (read.error_code, read.high_watermark, offsets_in(read.records)) == (ErrorCode.none, 3, [0])
        # A follower serves nothing to consumers: it does not lead.
        assert (await fetch(w.hosts[1], w.epoch)).error_code == ErrorCode.not_leader_or_follower
        (latest,) = await leader.list_offsets([ListOffsetsItem(*TP, w.epoch, -1, -1)])
        assert (latest.error_code, latest.offset) == (ErrorCode.none, 3)

    run(World(tmp_path), test)


def test_below_min_insync_replicas_acks_all_is_refused_and_acks_1_is_kept_but_not_shown(tmp_path):
    async def test(w: World):
        await w.start(0)  # the others never come: the controller takes them out of the ISR
        await w.register(reconcile(w.registration, w.alive()))
        await w.push_to(0)
        assert w.registration.isr == (0,)
        leader = w.leader()
        refused = await produce(leader, w.epoch, producer_batch(7, 0, 0))
        assert refused.error_code == ErrorCode.not_enough_replicas
        kept = await produce(leader, w.epoch, producer_batch(8, 0, 0), acks_all=False)
        assert (kept.error_code, kept.base_offset) == (ErrorCode.none, 0)
        # KAFKA-15583: what fewer replicas than promised hold is not exposed to consumers.
        read = await fetch(leader, w.epoch)
        assert read.error_code == ErrorCode.none and read.records == b""
        # A follower comes, catches up and joins: the write becomes visible, acks=all works again.
        await w.start(1)
        await until(lambda: 1 in w.registration.isr)
        await until(lambda: leader.replicas.replicas[TP].leader.high_watermark == 1)
        ok = await produce(leader, w.epoch, producer_batch(7, 0, 0))
        assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 1)
        assert offsets_in((await fetch(leader, w.epoch)).records) == [0, 1]

    run(World(tmp_path), test)


def test_a_write_the_followers_never_get_times_out(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = w.leader()
        assert (await produce(leader, w.epoch, producer_batch(7, 0, 0))).error_code == ErrorCode.none
        # Both followers stop fetching (their hosts are gone, the controller not yet told).
        for r in (1, 2):
            await w.hosts.pop(r).shutdown()
        late = await produce(leader, w.epoch, producer_batch(7, 0, 1), timeout_ms=300)
        assert late.error_code == ErrorCode.request_timed_out

    run(World(tmp_path, **{"replica.lag.time.max.ms": 60_000}), test)


def test_the_next_leader_serves_at_its_epoch_and_knows_the_retries_the_last_one_took(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        old, old_epoch = w.leader(), w.epoch
        taken = await produce(old, old_epoch, producer_batch(7, 0, 0, count=2))
        assert taken.error_code == ErrorCode.none
        await w.stop(0)  # the controller elects from the ISR
        assert w.registration.leader == 1 and w.epoch == old_epoch + 1
        new = w.leader()
        await until(lambda: TP in new.partitions and new.partitions[TP].epoch == w.epoch)
        # The producer retries the batch it had no answer for: a duplicate, answered with its offset.
        retried = await produce(new, w.epoch, producer_batch(7, 0, 0, count=2))
        assert (retried.error_code, retried.base_offset) == (ErrorCode.none, 0)
        after = await produce(new, w.epoch, producer_batch(7, 0, 2))
        assert (after.error_code, after.base_offset) == (ErrorCode.none, 2)
        # Routed at the old epoch, a request is fenced, not served.
        assert (await produce(new, old_epoch, producer_batch(7, 0, 3))).error_code == ErrorCode.not_leader_or_follower
        assert offsets_in((await fetch(new, w.epoch)).records) == [0, 2]

    run(World(tmp_path), test)


def test_a_leader_told_it_follows_refuses_writes_and_answers_waiting_ones(tmp_path):
    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        old, old_epoch = w.leader(), w.epoch
        # Its followers stall (gone without the controller's knowledge): an acks=all write waits.
        for r in (1, 2):
            await w.hosts.pop(r).shutdown()
        waiting = asyncio.ensure_future(produce(old, old_epoch, producer_batch(7, 0, 0)))
        await until(lambda: old.replicas.replicas[TP].log.end_offset == 1)
        # The controller moves leadership away (an election it made elsewhere): the write is
        # answered NOT_LEADER_OR_FOLLOWER, since the new leader may not have it.
        w.registration = PartitionRegistration((0, 1, 2), (1, 2), 1, old_epoch + 1, w.registration.partition_epoch + 1)
        await w.push_to(0)
        assert (await waiting).error_code == ErrorCode.not_leader_or_follower
        assert TP not in old.partitions
        assert (await produce(old, old_epoch + 1, producer_batch(7, 0, 1))).error_code == ErrorCode.not_leader_or_follower

    run(World(tmp_path, **{"replica.lag.time.max.ms": 60_000}), test)


def test_two_pushes_at_once_install_one_serving_partition(tmp_path):
    """The keeper's pass and an AlterPartition's push can reach a host together: one of them
    must not find the partition unserved while the other rebuilds its producer state."""

    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = w.leader()
        first = leader.partitions[TP]
        moved = PartitionRegistration((0, 1, 2), (0, 1, 2), 0, w.epoch + 1, w.registration.partition_epoch + 1)
        w.registration = moved
        await asyncio.gather(w.push_to(0), w.push_to(0), w.push_to(0))
        serving = leader.partitions[TP]
        assert serving is first and serving.epoch == moved.leader_epoch and not serving.closed
        outcome = await produce(leader, moved.leader_epoch, producer_batch(7, 0, 0))
        assert outcome.error_code == ErrorCode.none

    run(World(tmp_path), test)


def test_a_write_waiting_for_its_followers_survives_an_epoch_bump_that_keeps_its_leader(tmp_path):
    """Kafka keeps a delayed produce across a new epoch on the same leader: the write is safe there."""

    async def test(w: World):
        for r in (0, 1, 2):
            await w.start(r)
        leader = w.leader()
        paused = w.hosts.pop(2)  # one follower stops fetching, unknown to the controller: no HW
        await paused.shutdown()
        follower = w.hosts.pop(1)
        await follower.shutdown()
        waiting = asyncio.ensure_future(produce(leader, w.epoch, producer_batch(7, 0, 0), timeout_ms=20_000))
        await until(lambda: leader.replicas.replicas[TP].log.end_offset == 1)
        bumped = PartitionRegistration((0, 1, 2), (0, 1, 2), 0, w.epoch + 1, w.registration.partition_epoch + 1)
        w.registration = bumped
        await w.push_to(0)
        assert not waiting.done()
        await w.start(1)  # a follower back: the write reaches the ISR's... the HW needs both
        await w.start(2)
        assert (await asyncio.wait_for(waiting, 20)).error_code == ErrorCode.none

    run(World(tmp_path, **{"replica.lag.time.max.ms": 60_000}), test)


def test_a_copy_left_by_a_deleted_topic_is_removed_when_the_name_is_used_again(tmp_path):
    import uuid

    from cluster.log.partition_metadata import read_topic_id

    async def test(w: World):
        old, new = uuid.uuid4(), uuid.uuid4()
        host = PartitionLeader("partition-leader-0", w.config, tmp_path / "0")
        w.hosts[0], w.incarnations[0] = host, 1
        push = lambda reg, topic_id: ReplicaPush(0, 1, {TP: reg}, {}, {TP[0]: topic_id})  # noqa: E731
        single = PartitionRegistration.new((0,))
        await host.apply_replicas(push(single, old), lambda s: Link(w, s), w)
        assert (await produce(host, 0, producer_batch(7, 0, 0), acks_all=False)).error_code == ErrorCode.none
        directory = tmp_path / "0" / f"{TP[0]}-{TP[1]}"
        assert read_topic_id(directory) == old
        # The topic is deleted while this host is away, and made again: epochs start at 0 again.
        await host.apply_replicas(push(single, new), lambda s: Link(w, s), w)
        assert read_topic_id(directory) == new
        assert host.replicas.replicas[TP].log.end_offset == 0
        assert offsets_in((await fetch(host, 0)).records) == []
        # The same after a restart: a new process finds the old topic's directory and clears it.
        assert (await produce(host, 0, producer_batch(8, 0, 0), acks_all=False)).error_code == ErrorCode.none
        await host.shutdown()
        third = uuid.uuid4()
        host = w.hosts[0] = PartitionLeader("partition-leader-0", w.config, tmp_path / "0")
        await host.apply_replicas(push(single, third), lambda s: Link(w, s), w)
        assert read_topic_id(directory) == third and host.replicas.replicas[TP].log.end_offset == 0
        # Its own log, on the other hand, is kept across a restart.
        assert (await produce(host, 0, producer_batch(9, 0, 0), acks_all=False)).error_code == ErrorCode.none
        await host.shutdown()
        host = w.hosts[0] = PartitionLeader("partition-leader-0", w.config, tmp_path / "0")
        await host.apply_replicas(push(single, third), lambda s: Link(w, s), w)
        assert host.replicas.replicas[TP].log.end_offset == 1

    run(World(tmp_path, replicas=(0,), **{"min.insync.replicas": 1}), test)
