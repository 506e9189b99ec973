"""ReplicaManager: three (and four) hosts in one event loop, each with real logs in its own
directory, linked in-process, and a controller that keeps the registrations with the real
registration functions and pushes them to the hosts. The product's links cross Ray; these call the
other manager directly, and a closed host answers nothing, as a dead actor does."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from cluster.log import LogConfig, PartitionLog
from cluster.runtime.wakeups import SystemClock
from cluster.replication.log_replica import ReplicaFetched, ReplicationConfig
from cluster.replication.manager import FetcherConfig, ReplicaManager
from cluster.replication.registration import PartitionRegistration, reassign
from tests.unit.log_helpers import batch, one, records
from tests.unit.replication.controller_side import TP, ControllerSide, Link

# A lag time well past any stall a busy machine gives a fetcher, so that only the test meant to
# shrink the ISR does.
CONFIG = ReplicationConfig(min_insync_replicas=2, lag_time_max_ms=1_500, fetch_max_bytes=1 << 20)
FAST = FetcherConfig(max_wait_ms=50, backoff_ms=20, alter_retry_ms=20)


class Cluster(ControllerSide):
    """Managers as the hosts."""

    def __init__(self, tmp_path, replicas=(0, 1, 2), config: ReplicationConfig = CONFIG,
                 log_config: LogConfig = LogConfig()) -> None:
        super().__init__(replicas)
        self.tmp_path = tmp_path
        self.config = config
        self.log_config = log_config
        self.link_wrapper = lambda link: link

    async def start(self, replica: int) -> ReplicaManager:
        self.incarnations[replica] = self.incarnations.get(replica, -1) + 1
        manager = ReplicaManager(
            replica, self.incarnations[replica], self.tmp_path / str(replica), self.log_config, self.config, SystemClock(),
            lambda source: self.link_wrapper(Link(self, source)), self, FAST,
        )
        self.hosts[replica] = manager
        await self.push()
        return manager

    async def push_to(self, replica: int) -> None:
        manager = self.hosts.get(replica)
        if manager is not None:
            await manager.apply({TP: self.registration})

    async def close_host(self, manager: ReplicaManager) -> None:
        await manager.close()


async def until(predicate, timeout: float = 20.0) -> None:
    """Wait for a state, polling (no fixed sleep decides a test)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("the state was not reached in time")
        await asyncio.sleep(0.01)


def log_bytes(manager: ReplicaManager) -> bytes:
    log = manager.replicas[TP].log
    return log.read(0, 1 << 30) if log.end_offset else b""


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@pytest.fixture
def cluster(tmp_path):
    return Cluster(tmp_path)


def test_acks_all_is_answered_once_the_followers_hold_the_write(cluster):
    async def main():
        for r in (0, 1, 2):
            await cluster.start(r)
        error, offsets = await cluster.leader().append(TP, [one(1), one(2)], acks_all=True, timeout_ms=10_000)
        assert (error, offsets) == (ErrorCode.none, [0, 1])
        await until(lambda: all(log_bytes(m) == log_bytes(cluster.leader()) for m in cluster.hosts.values()))
        error, hw, records = cluster.leader().read(TP, 0, 1 << 20)
        assert error is ErrorCode.none and hw == 2 and records == log_bytes(cluster.leader())
        await cluster.close()

    run(main())


def test_the_leaders_loss_elects_an_in_sync_follower_and_nothing_acknowledged_is_lost(cluster):
    async def main():
        for r in (0, 1, 2):
            await cluster.start(r)
        for i in range(5):
            error, _ = await cluster.leader().append(TP, [one(i)], acks_all=True, timeout_ms=10_000)
            assert error is ErrorCode.none
        acknowledged = log_bytes(cluster.leader())
        await cluster.stop(0)
        assert cluster.registration.leader == 1 and cluster.registration.leader_epoch == 1
        await until(lambda: cluster.hosts[1].replicas[TP].leader is not None)
        error, offsets = await cluster.leader().append(TP, [one(9)], acks_all=True, timeout_ms=10_000)
        assert (error, offsets) == (ErrorCode.none, [5])
        assert log_bytes(cluster.leader()).startswith(acknowledged)
        await until(lambda: log_bytes(cluster.hosts[2]) == log_bytes(cluster.hosts[1]))
        # The old leader comes back as a follower and catches up.
        await cluster.start(0)
        await until(lambda: log_bytes(cluster.hosts[0]) == log_bytes(cluster.hosts[1]))
        await until(lambda: set(cluster.registration.isr) == {0, 1, 2})
        await cluster.close()

    run(main())


def test_acks_all_stops_when_the_isr_is_below_the_minimum(cluster):
    async def main():
        for r in (0, 1, 2):
            await cluster.start(r)
        assert (await cluster.leader().append(TP, [one(1)], acks_all=True, timeout_ms=10_000))[0] is ErrorCode.none
        # Two followers stop fetching without the controller noticing (their hosts hang). Once the
        # leader's log moves past them (an acks=1 write), it drops them from the ISR after the lag
        # time (Kafka's isCaughtUp: a follower at the log end stays in sync), and acks=all is refused.
        for r in (1, 2):
            manager = cluster.hosts.pop(r)
            await manager.close()
        error, offsets = await cluster.leader().append(TP, [one(2)], acks_all=False, timeout_ms=10_000)
        assert error is ErrorCode.none and offsets == [1]
        await until(lambda: cluster.registration.isr == (0,))
        error, _ = await cluster.leader().append(TP, [one(3)], acks_all=True, timeout_ms=10_000)
        assert error is ErrorCode.not_enough_replicas
        await cluster.close()

    run(main())


def test_an_unreplicated_acks_all_write_times_out(tmp_path):
    async def main():
        # A lag time far past the test, so that the ISR still names the followers when the write
        # times out (this test is about the timeout, not the shrink).
        cluster = Cluster(tmp_path, config=ReplicationConfig(min_insync_replicas=2, lag_time_max_ms=600_000))
        await cluster.start(0)  # the followers never come up
        error, _ = await cluster.leader().append(TP, [one(1)], acks_all=True, timeout_ms=300)
        assert error is ErrorCode.request_timed_out
        error, hw, records = cluster.leader().read(TP, 0, 1 << 20)
        assert (error, records) == (ErrorCode.none, b"")  # nothing committed is shown
        await cluster.close()

    run(main())


def test_a_partition_moves_to_a_new_replica_by_copying_its_log(tmp_path):
    async def main():
        cluster = Cluster(tmp_path)
        for r in (0, 1, 2):
            await cluster.start(r)
        for i in range(4):
            assert (await cluster.leader().append(TP, [one(i)], acks_all=True, timeout_ms=10_000))[0] is ErrorCode.none
        before = log_bytes(cluster.leader())
        await cluster.start(3)
        moved, error = reassign(cluster.registration, (3, 1, 2), cluster.alive())
        assert error is ErrorCode.none
        await cluster.register(moved)
        await until(lambda: not cluster.registration.reassigning)
        assert cluster.registration.replicas == (3, 1, 2) and cluster.registration.leader == 3
        await until(lambda: not (tmp_path / "0" / "orders-0").exists())  # the old replica deletes its log
        assert TP not in cluster.hosts[0].replicas
        await until(lambda: cluster.hosts[3].replicas[TP].leader is not None)
        assert log_bytes(cluster.hosts[3]).startswith(before)
        assert (await cluster.leader().append(TP, [one(9)], acks_all=True, timeout_ms=10_000))[0] is ErrorCode.none
        await cluster.close()

    run(main())


def test_a_stale_push_neither_deletes_nor_demotes(cluster):
    """The review's case: a push older than what the host applied, one without this replica, must
    not delete its log (the partition would come back empty and lead)."""
    async def main():
        for r in (0, 1, 2):
            await cluster.start(r)
        assert (await cluster.leader().append(TP, [one(1)], acks_all=True, timeout_ms=10_000))[0] is ErrorCode.none
        old = PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 0)  # partition epoch 0: older than any applied
        await cluster.hosts[0].apply({TP: old})
        replica = cluster.hosts[0].replicas.get(TP)
        assert replica is not None and replica.log.end_offset == 1 and replica.leader is not None
        await cluster.close()

    run(main())


def test_two_pushes_at_once_open_the_log_once(tmp_path, monkeypatch):
    async def main():
        cluster = Cluster(tmp_path)
        manager = await cluster.start(0)
        opened = []
        original = PartitionLog.open

        def counting(path, config):
            opened.append(path)
            return original(path, config)

        monkeypatch.setattr(PartitionLog, "open", staticmethod(counting))
        other = ("orders", 1)
        registration = PartitionRegistration.new((0, 1, 2))
        await asyncio.gather(manager.apply({other: registration}), manager.apply({other: registration}))
        assert len(opened) == 1 and other in manager.replicas
        await cluster.close()

    run(main())


def test_a_corrupt_answer_stops_neither_that_partition_nor_the_others(cluster):
    """The review's case: one partition's answer fails to apply (a CRC error); the fetcher goes on,
    and fetches that partition again."""
    class Corrupting:
        def __init__(self, link):
            self.link, self.spoiled = link, 0

        async def replica_fetch(self, items, max_wait_ms):
            answers = await self.link.replica_fetch(items, max_wait_ms)
            if self.spoiled < 3 and answers and answers[0].records:
                self.spoiled += 1
                bad = bytearray(answers[0].records)
                bad[-1] ^= 0xFF
                answers[0] = ReplicaFetched(answers[0].error_code, answers[0].high_watermark,
                                            answers[0].log_start_offset, records=bytes(bad))
            return answers

    async def main():
        cluster.link_wrapper = Corrupting
        for r in (0, 1, 2):
            await cluster.start(r)
        error, _ = await cluster.leader().append(TP, [one(1), one(2)], acks_all=True, timeout_ms=20_000)
        assert error is ErrorCode.none
        await until(lambda: all(log_bytes(m) == log_bytes(cluster.leader()) for m in cluster.hosts.values()))
        await cluster.close()

    run(main())


def test_an_isr_change_proposed_after_the_push_overtook_its_answer_is_still_sent(tmp_path):
    """The review's case: the controller's push reaches the leader before its AlterPartition
    answer, clearing that change; the change a later fetch proposes must still be sent."""
    class SlowAnswers(Cluster):
        async def alter_partition(self, tp, request):
            answer = await super().alter_partition(tp, request)
            await self.push()  # the push first ...
            await asyncio.sleep(0.05)  # ... the answer later
            return answer

    async def main():
        cluster = SlowAnswers(tmp_path)
        for r in (0, 1):
            await cluster.start(r)
        await until(lambda: set(cluster.registration.isr) <= {0, 1})
        await cluster.start(2)
        await cluster.leader().append(TP, [one(1)], acks_all=False, timeout_ms=1_000)
        await until(lambda: set(cluster.registration.isr) == {0, 1, 2})
        await cluster.close()

    run(main())


def test_a_followers_copy_of_a_compacted_log_is_compacted_below_its_high_watermark(tmp_path):
    """Kafka's cleaner runs on every replica: a follower's copy of a compacted topic (a
    coordinator's __consumer_offsets on another node) is compacted once its segments roll, below
    its own high watermark, and keeps the latest value of every key, as the leader's does."""
    cluster = Cluster(tmp_path, log_config=LogConfig(compacted=True, segment_bytes=700))

    async def main():
        for r in (0, 1, 2):
            await cluster.start(r)
        written = 0
        for round_ in range(40):
            for key in range(4):
                error, _ = await cluster.leader().append(
                    TP, [batch([(b"key-%d" % key, b"value-%d-%d" % (key, round_))])], acks_all=True, timeout_ms=10_000)
                assert error is ErrorCode.none
                written += 1
        leader = cluster.leader()
        followers = [m for m in cluster.hosts.values() if m is not leader]
        end = leader.replicas[TP].log.end_offset
        await until(lambda: all(m.replicas[TP].log.end_offset == end for m in followers))
        for manager in followers:
            copy = records(manager.replicas[TP].log)
            assert len(copy) < written  # compacted (the leader's log is not: nothing compacts it here)
            latest = {key: value for _, key, value in copy}
            assert latest == {b"key-%d" % k: b"value-%d-39" % k for k in range(4)}
        assert len(records(leader.replicas[TP].log)) == written
        await cluster.close()

    run(main())
