"""SharePartitionManager: share partitions on the partition leader, without Ray: a real log, a real share coordinator
shard in process (tests/local_persister.py), a manual clock for acquisition locks."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

from kernel.clock import ManualClock
from sharestate.inflight import AcknowledgeType as A
from sharestate.inflight import RecordState as R
from sharestate.state_batches import AcknowledgementBatch
from sharestate.records import StateBatch

from cluster.actors.partition_leader import PartitionLeader
from cluster.config import Config
from cluster.recordbatch import encode_records, iter_batches
from cluster.runtime import ManualWakeups
from cluster.share.requests import ShareFetchCall, ShareItem
from tests.local_persister import LocalPersister
from cluster.calls import ProduceItem

TOPIC_ID = uuid.UUID("6f1a4b1e-2c4d-4e8f-9a0b-1c2d3e4f5a6b")
GROUP = "g"
LOCK = 30_000
CONFIG = {
    "share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": str(LOCK),
    "group.share.delivery.count.limit": "3",
}


def batch(n: int, first: int = 0) -> bytes:
    return encode_records([(i, f"k{first + i}".encode(), f"v{first + i}".encode()) for i in range(n)], 1_700_000_000_000)


class Harness:
    def __init__(self, tmp_path: Path, persister: LocalPersister | None = None, epoch: int = 1, **config: str) -> None:
        self.clock = ManualClock(1_000_000)
        self.wakeups = ManualWakeups(self.clock)
        self.persister = persister or LocalPersister()
        self.epoch = epoch
        self.tmp_path = tmp_path
        self.leader = PartitionLeader(
            "partition-leader-0",
            Config.load([f"{k}={v}" for k, v in {**CONFIG, **config}.items()]),
            tmp_path,
            persister=self.persister,
            clock=self.clock,
            wakeups=self.wakeups,
        )

    async def start(self, initialize: bool = True) -> "Harness":
        await self.leader.load([("t", 0, self.epoch)])
        if initialize and self.persister.state(GROUP, TOPIC_ID, 0) is None:
            from sharestate.messages import InitializeShareGroupStateRequest

            await self.persister.initialize(InitializeShareGroupStateRequest(GROUP, TOPIC_ID, 0, state_epoch=0))
        return self

    async def produce(self, n: int) -> None:
        (out,) = await self.leader.produce([ProduceItem("t", 0, self.epoch, batch(n))])
        assert out.error_code == ErrorCode.none

    async def fetch(
        self, member: str, max_records: int = 500, acks=(), max_wait_ms: int = 0, fetch: bool = True, wake_key=None,
        gateway: int = 0,
    ):
        item = ShareItem("t", 0, self.epoch, TOPIC_ID, tuple(acks), fetch)
        (out,) = await self.leader.share_fetch(
            ShareFetchCall(
                GROUP, member, (item,), max_wait_ms=max_wait_ms, max_records=max_records, wake_key=wake_key,
                gateway=gateway,
            )
        )
        return out

    def share(self):
        return self.leader.shares.hosts[(GROUP, "t", 0)].share

    def durable(self):
        return self.persister.state(GROUP, TOPIC_ID, 0)

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)


def ack(first: int, last: int, kind: A) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, (int(kind),))


def ranges(out) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in out.acquired]


def test_fetch_acquires_whole_batches_and_an_accept_is_written_before_it_succeeds(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(3)
        await h.produce(4)
        out = await h.fetch("m1", max_records=2)
        # max_records may be exceeded to keep a log batch whole (Kafka acquires by batch).
        assert out.error_code == ErrorCode.none and ranges(out) == [(0, 2, 1)]
        assert [h.base_offset for _, h in iter_batches(out.records)] == [0]
        other = await h.fetch("m2")
        assert ranges(other) == [(3, 6, 1)]  # never the same records to two members
        out = await h.fetch("m1", acks=[ack(0, 2, A.ACCEPT)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.none
        assert h.durable().start_offset == 3 and h.durable().state_batches == ()
        assert h.persister.writes[-1].state_batches == (StateBatch(0, 2, R.ACKNOWLEDGED.value, 1),)
        assert h.persister.writes[-1].leader_epoch == 1
        await h.leader.shutdown()

    asyncio.run(main())


def test_release_and_lock_expiry_make_records_available_again_with_a_higher_delivery_count(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(2)
        await h.produce(2)
        assert ranges(await h.fetch("m1")) == [(0, 1, 1), (2, 3, 1)]
        # The fetch runs while the release is written: the records come back once it is durable.
        out = await h.fetch("m1", acks=[ack(0, 1, A.RELEASE)], max_wait_ms=5000)
        assert out.acknowledge_error_code == ErrorCode.none
        assert ranges(out) == [(0, 1, 2)]  # released records come straight back, delivery count 2
        assert h.durable().state_batches == (StateBatch(0, 1, R.AVAILABLE.value, 1),)
        h.wakeups.advance(LOCK)  # both locks expire
        await h.settle()
        assert h.share().offsets()[2] == (R.AVAILABLE, 1, "")
        # The third delivery of 0-1 is their last (limit 3): one record a fetch (throttled
        # delivery), and nothing joins it.
        assert ranges(await h.fetch("m2")) == [(0, 0, 3)]
        assert ranges(await h.fetch("m2")) == [(1, 1, 3)]
        assert ranges(await h.fetch("m2")) == [(2, 3, 2)]
        # Released on their last delivery: archived.
        out = await h.fetch("m2", acks=[ack(0, 1, A.RELEASE), ack(2, 3, A.ACCEPT)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.none
        assert h.durable().start_offset == 4
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_refused_write_fails_the_acknowledgement_and_rolls_it_back(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(3)
        await h.fetch("m1")
        h.persister.refuse_writes = ErrorCode.coordinator_not_available
        out = await h.fetch("m1", acks=[ack(0, 2, A.ACCEPT)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.coordinator_not_available
        assert h.share().offsets()[0] == (R.ACQUIRED, 1, "m1")  # still the member's to acknowledge
        h.persister.refuse_writes = None
        out = await h.fetch("m1", acks=[ack(0, 2, A.ACCEPT)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.none and h.durable().start_offset == 3
        await h.leader.shutdown()

    asyncio.run(main())


def test_acknowledging_records_of_another_member_is_invalid_record_state(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(3)
        await h.fetch("m1")
        out = await h.fetch("m2", acks=[ack(0, 2, A.ACCEPT)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.invalid_record_state
        assert h.persister.writes == []
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_waiting_fetch_is_completed_by_new_records_and_by_wake(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        waiting = asyncio.ensure_future(h.fetch("m1", max_wait_ms=10_000))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await h.produce(2)
        out = await asyncio.wait_for(waiting, 5)
        assert ranges(out) == [(0, 1, 1)]
        waiting = asyncio.ensure_future(h.fetch("m2", max_wait_ms=10_000, wake_key="w1"))
        await asyncio.sleep(0.05)
        h.leader.share_wake(["w1"])
        out = await asyncio.wait_for(waiting, 5)
        assert out.acquired == ()
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_waiting_fetch_gets_records_another_member_released(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(2)
        await h.fetch("m1")
        waiting = asyncio.ensure_future(h.fetch("m2", max_wait_ms=10_000))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert h.leader.share_release(GROUP, "m1", [("t", 0)]) == 1  # m1's session closed
        out = await asyncio.wait_for(waiting, 5)
        assert ranges(out) == [(0, 1, 1)]  # m1 never processed them: its delivery is given back
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_new_leader_redelivers_what_was_not_acknowledged_and_fences_the_old_one(tmp_path):
    async def main():
        persister = LocalPersister()
        old = await Harness(tmp_path / "a", persister, epoch=1).start()
        await old.produce(2)
        await old.produce(2)
        await old.produce(2)
        assert ranges(await old.fetch("m1")) == [(0, 1, 1), (2, 3, 1), (4, 5, 1)]
        await old.fetch("m1", acks=[ack(0, 1, A.ACCEPT), ack(4, 5, A.RELEASE)], fetch=False)
        # The partition moves: same log (shared data directory), a higher leader epoch.
        new = Harness(tmp_path / "a", persister, epoch=2)
        await new.start()
        out = await new.fetch("m2")
        # 2-3 were delivered but never acknowledged durably (the gap), 4-5 were released.
        assert ranges(out) == [(2, 3, 1), (4, 5, 2)]
        assert new.durable().leader_epoch == 2
        # The old leader's member acknowledges late: its write is fenced by the leader epoch.
        late = await old.fetch("m1", acks=[ack(2, 3, A.ACCEPT)], fetch=False)
        assert late.acknowledge_error_code == ErrorCode.not_leader_or_follower
        assert (GROUP, "t", 0) not in old.leader.shares.hosts
        assert new.durable().start_offset == 2
        await new.leader.shutdown()

    asyncio.run(main())


def test_auto_offset_reset_latest_starts_at_the_log_end(tmp_path):
    async def main():
        h = await Harness(tmp_path, **{"share.auto.offset.reset": "latest"}).start()
        await h.produce(3)
        assert (await h.fetch("m1")).acquired == ()
        await h.produce(2)
        assert ranges(await h.fetch("m1")) == [(3, 4, 1)]
        await h.leader.shutdown()

    asyncio.run(main())


def test_an_uninitialized_share_partition_is_an_error_and_is_tried_again(tmp_path):
    async def main():
        h = await Harness(tmp_path).start(initialize=False)
        await h.produce(1)
        out = await h.fetch("m1")
        assert out.error_code == ErrorCode.unknown_server_error and out.acquired == ()
        assert (GROUP, "t", 0) not in h.leader.shares.hosts
        from sharestate.messages import InitializeShareGroupStateRequest

        await h.persister.initialize(InitializeShareGroupStateRequest(GROUP, TOPIC_ID, 0, state_epoch=0))
        assert ranges(await h.fetch("m1")) == [(0, 0, 1)]
        await h.leader.shutdown()

    asyncio.run(main())


def test_acknowledgements_arriving_together_share_one_write(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        for _ in range(4):
            await h.produce(1)
        await h.fetch("m1")
        outs = await asyncio.gather(
            *(h.fetch("m1", acks=[ack(i, i, A.ACCEPT)], fetch=False) for i in range(4))
        )
        assert all(o.acknowledge_error_code == ErrorCode.none for o in outs)
        # Acknowledgements arriving together become one write, its start offset past all four.
        assert len(h.persister.writes) == 1 and h.persister.writes[0].start_offset == 4
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_share_partition_is_evicted_only_once_no_gateway_has_a_session_for_the_group(tmp_path):
    """Eviction follows the group's sessions on every gateway, not one gateway's: members on
    gateway 1 still hold records when gateway 0's last session for the group ends."""

    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(2)
        await h.produce(2)
        assert ranges(await h.fetch("m0", max_records=1, gateway=0)) == [(0, 1, 1)]
        assert ranges(await h.fetch("m1", max_records=1, gateway=1)) == [(2, 3, 1)]
        h.leader.share_evict(GROUP, [("t", 0)], gateway=0)  # gateway 0's last session ended
        assert h.share().offsets()[2] == (R.ACQUIRED, 1, "m1")
        out = await h.fetch("m1", acks=[ack(2, 3, A.ACCEPT)], fetch=False, gateway=1)
        assert out.acknowledge_error_code == ErrorCode.none
        h.leader.share_evict(GROUP, [("t", 0)], gateway=1)
        assert (GROUP, "t", 0) not in h.leader.shares.hosts
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_fetch_reads_the_log_only_as_far_as_its_records_need(tmp_path, monkeypatch):
    """The request's max_bytes (librdkafka: 50 MiB) is not read from disk on every fetch to
    acquire max_records of it; bytes per record are learnt from what the share partition served."""
    from cluster.partition import UserPartition

    reads: list[int] = []
    read = UserPartition.read

    def recording(self, offset, max_bytes, up_to=None):
        reads.append(max_bytes)
        return read(self, offset, max_bytes, up_to)

    monkeypatch.setattr(UserPartition, "read", recording)

    async def main():
        h = await Harness(tmp_path).start()
        for i in range(40):
            await h.produce(100)
        out = await h.fetch("m1", max_records=250)
        assert ranges(out) == [(0, 99, 1), (100, 199, 1), (200, 299, 1)]  # whole batches, as before
        assert reads[-1] <= 1 << 20
        out = await h.fetch("m1", max_records=250)
        assert ranges(out) == [(300, 399, 1), (400, 499, 1), (500, 599, 1)]
        assert reads[-1] <= 64 * 1024  # learnt: some 20 B per record here
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_fetch_reads_no_batch_past_what_it_could_acquire(tmp_path, monkeypatch):
    """With one-record batches, a fetch reads max_records offsets past the in-flight window and no
    further (it parsed every header of a 64 KiB read before); every in-flight offset may be taken
    by others, so what it acquires is what a read to max_bytes would give: released records
    first, then new ones past the window."""
    from cluster.partition import UserPartition

    batches_read: list[list[int]] = []
    read = UserPartition.read

    def recording(self, offset, max_bytes, up_to=None):
        out = read(self, offset, max_bytes, up_to)
        batches_read.append([header.base_offset for _, header in iter_batches(out.records or b"")])
        return out

    monkeypatch.setattr(UserPartition, "read", recording)

    async def main():
        h = await Harness(tmp_path).start()
        for _ in range(200):
            await h.produce(1)
        assert ranges(await h.fetch("m1", max_records=5)) == [(i, i, 1) for i in range(5)]
        assert batches_read[-1] == [0, 1, 2, 3, 4]
        assert ranges(await h.fetch("m2", max_records=3)) == [(5, 5, 1), (6, 6, 1), (7, 7, 1)]
        assert batches_read[-1] == [5, 6, 7]
        await h.fetch("m1", acks=[ack(2, 2, A.RELEASE)], fetch=False)
        # From offset 2: the window 2..7 (m1 and m2 hold all but 2), then two past it.
        assert ranges(await h.fetch("m2", max_records=2)) == [(2, 2, 2), (8, 8, 1)]
        assert batches_read[-1] == [2, 3, 4, 5, 6, 7, 8, 9]
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_fetch_that_acquires_every_batch_it_read_answers_the_read_bytes_without_a_copy(tmp_path, monkeypatch):
    from cluster.partition import UserPartition

    served: list[bytes] = []
    read = UserPartition.read

    def recording(self, offset, max_bytes, up_to=None):
        out = read(self, offset, max_bytes, up_to)
        served.append(out.records)
        return out

    monkeypatch.setattr(UserPartition, "read", recording)

    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(3)
        await h.produce(4)
        out = await h.fetch("m1")
        assert ranges(out) == [(0, 6, 1)] or ranges(out) == [(0, 2, 1), (3, 6, 1)]
        assert out.records is served[-1]
        await h.fetch("m1", acks=[ack(3, 6, A.RELEASE)], fetch=False)
        await h.produce(2)
        out = await h.fetch("m2", max_records=4)  # 3-6 again, not 0-2 (held by m1) nor 7-8 (over the budget)
        assert ranges(out) == [(3, 6, 2)]
        assert [b.base_offset for _, b in iter_batches(out.records)] == [3]
        await h.leader.shutdown()

    asyncio.run(main())
