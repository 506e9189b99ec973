"""The partition leader without Ray: produce validation, a full disk, epochs, long-poll fetch."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from cluster.actors.partition_leader import PartitionLeader
from cluster.config import Config
from cluster.log import FileOps, PartitionLog
from cluster.recordbatch import encode_records, iter_batches, parse_header
from tests.full_disk import FullDisk
from cluster.calls import FetchItem, ListOffsetsItem, ProduceItem



def batch(n: int, tag: str = "v") -> bytes:
    return encode_records([(i, f"k{i}".encode(), f"{tag}{i}".encode()) for i in range(n)], 1_700_000_000_000 + n)


async def leader_with(tmp_path: Path, *partitions: tuple[str, int, int], file_ops: FileOps | None = None) -> PartitionLeader:
    leader = PartitionLeader(
        "partition-leader-0",
        Config({"message.max.bytes": 4096}),
        tmp_path,
        log_opener=lambda path, cfg: PartitionLog.open(path, cfg, file_ops),
    )
    await leader.load(list(partitions))
    return leader


def test_offsets_are_assigned_in_order_and_fetch_returns_the_stored_batches(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 3))
        out = await leader.produce([ProduceItem("t", 0, 3, batch(2)), ProduceItem("t", 0, 3, batch(3))])
        assert [(o.error_code, o.base_offset) for o in out] == [(ErrorCode.none, 0), (ErrorCode.none, 2)]
        (fetched,) = await leader.fetch([FetchItem("t", 0, 3, -1, 0, 1 << 20)], 0, 1, 1 << 20)
        assert fetched.high_watermark == 5
        headers = [h for _, h in iter_batches(fetched.records)]
        assert [(h.base_offset, h.record_count, h.partition_leader_epoch) for h in headers] == [(0, 2, 3), (2, 3, 3)]
        await leader.shutdown()

    asyncio.run(main())


def test_a_full_disk_fails_the_produce_and_changes_nothing(tmp_path):
    async def main():
        disk = FullDisk()
        leader = await leader_with(tmp_path, ("t", 0, 1), file_ops=disk)
        await leader.produce([ProduceItem("t", 0, 1, batch(2))])
        with disk.filled():
            (failed,) = await leader.produce([ProduceItem("t", 0, 1, batch(4))])
        assert failed.error_code == ErrorCode.kafka_storage_error and "No space" in failed.message
        assert leader.partitions[("t", 0)].log.end_offset == 2
        (ok,) = await leader.produce([ProduceItem("t", 0, 1, batch(1))])
        assert ok.base_offset == 2
        (fetched,) = await leader.fetch([FetchItem("t", 0, 1, -1, 0, 1 << 20)], 0, 1, 1 << 20)
        assert [h.record_count for _, h in iter_batches(fetched.records)] == [2, 1]
        await leader.shutdown()

    asyncio.run(main())


@pytest.mark.parametrize(
    "mutate, error",
    [
        (lambda b: b[:-3], ErrorCode.corrupt_message),  # truncated
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), ErrorCode.corrupt_message),  # CRC
        (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.unsupported_for_message_format),  # magic 1
        (lambda b: b"", ErrorCode.corrupt_message),
    ],
)
def test_invalid_batches_are_rejected_without_writing(tmp_path, mutate, error):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 1))
        (out,) = await leader.produce([ProduceItem("t", 0, 1, mutate(batch(2)))])
        assert out.error_code == error
        assert leader.partitions[("t", 0)].log.end_offset == 0
        await leader.shutdown()

    asyncio.run(main())


def test_oversize_batch_gets_message_too_large(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 1))
        big = encode_records([(0, b"k", b"x" * 5000)], 1)
        (out,) = await leader.produce([ProduceItem("t", 0, 1, big)])
        assert out.error_code == ErrorCode.message_too_large
        await leader.shutdown()

    asyncio.run(main())


def test_stale_routing_epoch_and_client_leader_epochs_are_fenced(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 5))
        (stale,) = await leader.produce([ProduceItem("t", 0, 4, batch(1))])
        assert stale.error_code == ErrorCode.not_leader_or_follower
        (unknown,) = await leader.produce([ProduceItem("t", 9, 5, batch(1))])
        assert unknown.error_code == ErrorCode.not_leader_or_follower
        fenced, ahead, fine = await leader.fetch(
            [FetchItem("t", 0, 5, 4, 0, 100), FetchItem("t", 0, 5, 6, 0, 100), FetchItem("t", 0, 5, 5, 0, 100)], 0, 0, 1000
        )
        assert fenced.error_code == ErrorCode.fenced_leader_epoch
        assert ahead.error_code == ErrorCode.unknown_leader_epoch
        assert fine.error_code == ErrorCode.none
        assert (await leader.list_offsets([ListOffsetsItem("t", 0, 5, 4, -1)]))[0].error_code == ErrorCode.fenced_leader_epoch
        await leader.shutdown()

    asyncio.run(main())


def test_fetch_long_poll_wakes_on_new_records_and_times_out_otherwise(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 1), ("t", 1, 1))
        loop = asyncio.get_running_loop()
        start = loop.time()
        (idle,) = await leader.fetch([FetchItem("t", 0, 1, -1, 0, 1000)], 200, 1, 1000)
        assert idle.records == b"" and loop.time() - start >= 0.19
        waiting = asyncio.ensure_future(leader.fetch([FetchItem("t", 0, 1, -1, 0, 1000), FetchItem("t", 1, 1, -1, 0, 1000)], 5000, 1, 1000))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        start = loop.time()
        await leader.produce([ProduceItem("t", 1, 1, batch(1))])
        quiet, woke = await waiting
        assert woke.records and quiet.records == b"" and loop.time() - start < 1
        await leader.shutdown()

    asyncio.run(main())


def test_fetch_waits_for_min_bytes_even_when_every_partition_has_some_data(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 1))
        await leader.produce([ProduceItem("t", 0, 1, batch(1))])
        one = len(batch(1))
        waiting = asyncio.ensure_future(leader.fetch([FetchItem("t", 0, 1, -1, 0, 1000)], 30_000, 2 * one, 1000))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()  # one batch is there, but less than min_bytes
        await leader.produce([ProduceItem("t", 0, 1, batch(1))])
        (both,) = await asyncio.wait_for(waiting, 10)
        assert [h.base_offset for _, h in iter_batches(both.records)] == [0, 1]
        await leader.shutdown()

    asyncio.run(main())


def test_max_bytes_limits_the_response_but_always_returns_a_first_batch(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 1), ("t", 1, 1))
        later = encode_records([(i, b"k", b"v%d" % i) for i in range(3)], 1_700_000_000_003 + 1000)
        for p in (0, 1):
            await leader.produce([ProduceItem("t", p, 1, batch(3)), ProduceItem("t", p, 1, later), ProduceItem("t", p, 1, batch(3))])
        size = len(batch(3))
        first, second = await leader.fetch([FetchItem("t", 0, 1, -1, 0, 10_000), FetchItem("t", 1, 1, -1, 0, 10_000)], 0, 1, size // 2)
        # KIP-74: one whole batch even over the limit; then the budget is spent.
        assert len(first.records) == size and second.records == b"" and second.high_watermark == 9
        offsets = await leader.list_offsets([ListOffsetsItem("t", 0, 1, -1, ts) for ts in (-2, -1, -3, -4, -5)])
        # Earliest, latest, the first record carrying the largest timestamp (the middle batch), the
        # earliest local offset (the log start: no tiered storage) and no latest tiered offset.
        assert [o.offset for o in offsets] == [0, 9, 3, 0, -1]
        assert [o.leader_epoch for o in offsets] == [1, 1, 1, 1, -1]
        await leader.shutdown()

    asyncio.run(main())


def test_a_load_retried_while_the_first_open_is_stuck_joins_it_and_opens_the_log_once(tmp_path):
    # The controller retries a load that timed out; the retry must not open the directory twice.
    opens: list[Path] = []
    release = threading.Event()

    def slow_open(path: Path, cfg) -> PartitionLog:
        opens.append(path)
        release.wait(10)
        return PartitionLog.open(path, cfg)

    async def main():
        leader = PartitionLeader("partition-leader-0", Config({"message.max.bytes": 4096}), tmp_path, log_opener=slow_open)
        first = asyncio.ensure_future(leader.load([("t", 0, 1)]))
        while not opens:
            await asyncio.sleep(0.001)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(leader.load([("t", 0, 1)]), 0.01)  # the caller gives up; the open goes on
        retry = asyncio.ensure_future(leader.load([("t", 0, 2)]))
        release.set()
        assert await first == [] and await retry == []
        assert len(opens) == 1
        assert leader.partitions[("t", 0)].epoch == 2
        await leader.shutdown()

    asyncio.run(main())


def test_a_load_retried_at_the_same_epoch_keeps_the_share_partitions_and_what_members_hold(tmp_path):
    """The controller retries a load that did not answer in time at the same epoch (reconciler
    `_retry_loads`); the partition is already open, and nobody else led it in between, so the share
    partitions must not read their durable state again: that would hand out the records members
    hold a second time, with the same delivery count, under one leader epoch."""
    from sharestate.inflight import AcknowledgeType, RecordState
    from tests.unit.test_share_partition_manager import Harness, ack, ranges

    async def main():
        harness = await Harness(tmp_path).start()
        await harness.produce(3)
        assert ranges(await harness.fetch("m1")) == [(0, 2, 1)]
        host = harness.leader.shares.hosts[("g", "t", 0)]
        await harness.leader.load([("t", 0, harness.epoch)])  # the retried load
        assert harness.leader.shares.hosts[("g", "t", 0)] is host
        assert ranges(await harness.fetch("m2")) == []  # m1 still holds 0-2
        out = await harness.fetch("m1", acks=[ack(0, 2, AcknowledgeType.ACCEPT)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.none
        assert {o: s[0] for o, s in harness.share().offsets().items()} == {}
        assert harness.durable().start_offset == 3
        # A newer epoch (it led elsewhere in between) does read the durable state again.
        await harness.produce(1)
        assert ranges(await harness.fetch("m1")) == [(3, 3, 1)]
        harness.epoch += 1
        await harness.leader.load([("t", 0, harness.epoch)])
        assert ("g", "t", 0) not in harness.leader.shares.hosts
        assert ranges(await harness.fetch("m2")) == [(3, 3, 1)]
        assert RecordState.ACQUIRED in {s[0] for s in harness.share().offsets().values()}
        await harness.leader.shutdown()

    asyncio.run(main())
