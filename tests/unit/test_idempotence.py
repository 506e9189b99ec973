"""Idempotent producers on the partition leader, without Ray: Kafka's sequence and epoch rules,
retries answered from the last five batches, and the state rebuilt from the log by a new leader."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode

from cluster.actors.partition_leader import PartitionLeader
from cluster.config import Config
from cluster.log import FileOps, PartitionLog
from cluster.producer_state import INT32_MAX, ProducerStateManager, increment_sequence
from cluster.recordbatch import encode_records, iter_batches
from tests.raw_producer import producer_batch
from tests.full_disk import FullDisk
from cluster.calls import FetchItem, ProduceItem

PID = 4000
TP = ("t", 0)
EPOCH = 1  # the partition's leader epoch in every call



async def leader_on(tmp_path: Path, file_ops: FileOps | None = None) -> PartitionLeader:
    leader = PartitionLeader(
        "partition-leader-0",
        Config({"message.max.bytes": 1 << 20}),
        tmp_path,
        log_opener=lambda path, cfg: PartitionLog.open(path, cfg, file_ops),
    )
    await leader.load([(*TP, EPOCH)])
    return leader


async def produce(leader: PartitionLeader, *batches: bytes):
    """One Produce request carrying `batches` for partition t-0; returns (error, base offset)."""
    (outcome,) = await leader.produce([ProduceItem(*TP, EPOCH, b"".join(batches))])
    return outcome.error_code, outcome.base_offset


async def stored(leader: PartitionLeader) -> list[tuple[int, int, int, int]]:
    """(base offset, producer id, epoch, base sequence) of every batch in the log."""
    (fetched,) = await leader.fetch([FetchItem(*TP, EPOCH, -1, 0, 1 << 24)], 0, 1, 1 << 24)
    return [(h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence) for _, h in iter_batches(fetched.records)]


def end_offset(leader: PartitionLeader) -> int:
    return leader.partitions[TP].log.end_offset


def run(coro):
    return asyncio.run(coro)


def test_in_order_batches_are_appended_and_a_retry_of_any_of_the_last_five_is_answered_not_stored(tmp_path):
    async def main():
        leader = await leader_on(tmp_path)
        offsets = []
        for seq in range(0, 12, 2):  # six batches of two records: sequences 0-1, 2-3, ..., 10-11
            error, offset = await produce(leader, producer_batch(PID, 0, seq, 2))
            assert error == ErrorCode.none
            offsets.append(offset)
        assert offsets == [0, 2, 4, 6, 8, 10]
        # Retries of the last five batches: the original offset, no error, nothing appended.
        for seq, original in zip(range(2, 12, 2), offsets[1:]):
            assert await produce(leader, producer_batch(PID, 0, seq, 2)) == (ErrorCode.none, original)
        assert end_offset(leader) == 12
        # The sixth-last batch has left the cache: not a known retry, and not in sequence.
        assert (await produce(leader, producer_batch(PID, 0, 0, 2)))[0] == ErrorCode.out_of_order_sequence_number
        # A retry must match the whole sequence range, not just its start.
        assert (await produce(leader, producer_batch(PID, 0, 10, 1)))[0] == ErrorCode.out_of_order_sequence_number
        assert await produce(leader, producer_batch(PID, 0, 12, 1)) == (ErrorCode.none, 12)
        assert [b[3] for b in await stored(leader)] == [0, 2, 4, 6, 8, 10, 12]
        await leader.shutdown()

    run(main())


def test_a_gap_is_out_of_order_and_nothing_of_the_request_is_appended(tmp_path):
    async def main():
        leader = await leader_on(tmp_path)
        assert await produce(leader, producer_batch(PID, 0, 0, 3)) == (ErrorCode.none, 0)
        assert (await produce(leader, producer_batch(PID, 0, 4, 1)))[0] == ErrorCode.out_of_order_sequence_number
        # Every batch of a request is checked before any is appended: the good first batch stays out too.
        error, _ = await produce(leader, producer_batch(PID, 0, 3, 1), producer_batch(PID, 0, 5, 1))
        assert error == ErrorCode.out_of_order_sequence_number
        assert end_offset(leader) == 3
        # Two in-sequence batches in one request chain through each other.
        assert await produce(leader, producer_batch(PID, 0, 3, 2), producer_batch(PID, 0, 5, 1)) == (ErrorCode.none, 3)
        assert end_offset(leader) == 6
        await leader.shutdown()

    run(main())


def test_epochs_older_ones_are_fenced_and_a_new_one_starts_at_sequence_zero(tmp_path):
    async def main():
        leader = await leader_on(tmp_path)
        assert await produce(leader, producer_batch(PID, 3, 0, 2)) == (ErrorCode.none, 0)
        assert (await produce(leader, producer_batch(PID, 2, 2, 1)))[0] == ErrorCode.invalid_producer_epoch
        # KIP-360 epoch bump: the new epoch must restart the sequence at 0.
        assert (await produce(leader, producer_batch(PID, 4, 2, 1)))[0] == ErrorCode.out_of_order_sequence_number
        assert await produce(leader, producer_batch(PID, 4, 0, 1)) == (ErrorCode.none, 2)
        # The bump forgot the old epoch's batches: a late retry from epoch 3 is fenced, not a duplicate.
        assert (await produce(leader, producer_batch(PID, 3, 0, 2)))[0] == ErrorCode.invalid_producer_epoch
        assert await produce(leader, producer_batch(PID, 4, 1, 1)) == (ErrorCode.none, 3)
        assert end_offset(leader) == 4
        await leader.shutdown()

    run(main())


def test_sequences_wrap_from_int32_max_to_zero(tmp_path):
    async def main():
        leader = await leader_on(tmp_path)
        assert increment_sequence(INT32_MAX - 1, 2) == 0
        # A batch that ends on INT32_MAX, then one starting at 0; then one spanning the wrap.
        assert await produce(leader, producer_batch(PID, 0, INT32_MAX - 1, 2)) == (ErrorCode.none, 0)
        assert await produce(leader, producer_batch(PID, 0, 0, 1)) == (ErrorCode.none, 2)
        other = PID + 1
        assert await produce(leader, producer_batch(other, 0, INT32_MAX - 1, 3)) == (ErrorCode.none, 3)
        assert await produce(leader, producer_batch(other, 0, 1, 1)) == (ErrorCode.none, 6)
        assert await produce(leader, producer_batch(other, 0, INT32_MAX - 1, 3)) == (ErrorCode.none, 3)  # retry
        assert (await produce(leader, producer_batch(other, 0, 3, 1)))[0] == ErrorCode.out_of_order_sequence_number
        await leader.shutdown()

    run(main())


def test_a_producer_without_state_is_accepted_at_any_sequence(tmp_path):
    """Kafka 4.x answers no UNKNOWN_PRODUCER_ID: the producer's batches may have gone by retention (KIP-360)."""

    async def main():
        leader = await leader_on(tmp_path)
        assert await produce(leader, producer_batch(PID, 7, 41, 2)) == (ErrorCode.none, 0)
        assert await produce(leader, producer_batch(PID, 7, 43, 1)) == (ErrorCode.none, 2)
        # Producers are independent, and batches without a producer id are not checked at all.
        assert await produce(leader, producer_batch(PID + 1, 0, 0, 1)) == (ErrorCode.none, 3)
        plain = encode_records([(0, b"k", b"plain")], 1_700_000_000_000)
        assert await produce(leader, plain) == (ErrorCode.none, 4)
        assert await produce(leader, plain) == (ErrorCode.none, 5)
        await leader.shutdown()

    run(main())


def test_a_batch_with_a_producer_id_but_no_sequence_is_an_invalid_record(tmp_path):
    async def main():
        leader = await leader_on(tmp_path)
        assert (await produce(leader, producer_batch(PID, 0, -1, 1)))[0] == ErrorCode.invalid_record
        assert end_offset(leader) == 0
        await leader.shutdown()

    run(main())


def test_requests_in_one_group_commit_are_checked_in_arrival_order(tmp_path):
    """Five in-flight requests of one producer, and a retry sent while its original is still being written."""

    async def main():
        leader = await leader_on(tmp_path)
        part = leader.partitions[TP]
        # All of these queue up behind one append, so they are checked against each other.
        requests = [producer_batch(PID, 0, seq, 1) for seq in range(5)]
        requests.insert(3, producer_batch(PID, 0, 1, 1))  # retry of the second while it is in flight
        results = await asyncio.gather(*(produce(leader, r) for r in requests))
        assert results == [
            (ErrorCode.none, 0), (ErrorCode.none, 1), (ErrorCode.none, 2),
            (ErrorCode.none, 1),  # the retry: same offset as its original
            (ErrorCode.none, 3), (ErrorCode.none, 4),
        ]
        assert [b[3] for b in await stored(leader)] == [0, 1, 2, 3, 4]
        # A request that overtakes its predecessor is refused; the predecessor then goes through.
        late, early = await asyncio.gather(
            produce(leader, producer_batch(PID, 0, 6, 1)), produce(leader, producer_batch(PID, 0, 5, 1))
        )
        assert late[0] == ErrorCode.out_of_order_sequence_number and early == (ErrorCode.none, 5)
        assert part.producer_state.entry(PID).last_seq == 5
        await leader.shutdown()

    run(main())


def test_a_failed_write_changes_no_producer_state(tmp_path):
    async def main():
        disk = FullDisk()
        leader = await leader_on(tmp_path, file_ops=disk)
        assert await produce(leader, producer_batch(PID, 0, 0, 1)) == (ErrorCode.none, 0)
        with disk.filled():
            error, _ = await produce(leader, producer_batch(PID, 0, 1, 1))
        assert error == ErrorCode.kafka_storage_error
        # The producer retries the same batch: it is new to the leader, not a duplicate.
        assert await produce(leader, producer_batch(PID, 0, 1, 1)) == (ErrorCode.none, 1)
        assert await produce(leader, producer_batch(PID, 0, 1, 1)) == (ErrorCode.none, 1)
        assert end_offset(leader) == 2
        await leader.shutdown()

    run(main())


def test_a_new_leader_rebuilds_producer_state_from_the_log(tmp_path):
    """A retry reaching the new leader after a failover is still a duplicate; sequences and epochs carry on."""

    async def main():
        old = await leader_on(tmp_path)
        other = PID + 1
        for seq in range(0, 14, 2):
            await produce(old, producer_batch(PID, 2, seq, 2))
        await produce(old, producer_batch(other, 0, 0, 3))
        await produce(old, producer_batch(other, 1, 0, 1))  # epoch bump: epoch 0's batches forgotten
        await produce(old, encode_records([(0, b"k", b"plain")], 1_700_000_000_000))
        before = old.partitions[TP].producer_state.producers
        # The old leader dies without closing anything; the new one opens the same directory.
        new = await leader_on(tmp_path)
        assert new.partitions[TP].producer_state.producers == before
        assert await produce(new, producer_batch(PID, 2, 12, 2)) == (ErrorCode.none, 12)  # the lost answer's retry
        assert await produce(new, producer_batch(PID, 2, 4, 2)) == (ErrorCode.none, 4)
        assert (await produce(new, producer_batch(PID, 2, 2, 2)))[0] == ErrorCode.out_of_order_sequence_number
        assert (await produce(new, producer_batch(PID, 1, 14, 1)))[0] == ErrorCode.invalid_producer_epoch
        assert (await produce(new, producer_batch(other, 0, 0, 3)))[0] == ErrorCode.invalid_producer_epoch
        assert await produce(new, producer_batch(other, 1, 0, 1)) == (ErrorCode.none, 17)
        assert await produce(new, producer_batch(PID, 2, 14, 1)) == (ErrorCode.none, 19)
        assert end_offset(new) == 20
        await new.shutdown()
        await old.shutdown()

    run(main())


def test_rebuild_reads_headers_only_and_keeps_the_last_five_batches_per_producer(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    try:
        batches = [bytearray(producer_batch(PID, 0, seq, 1)) for seq in range(8)]
        batches.append(bytearray(encode_records([(0, b"k", b"v" * 10_000)], 1)))  # large: header read by pread
        batches += [bytearray(producer_batch(PID + 1, 5, seq, 2)) for seq in (0, 2)]
        log.append(batches, 0)
        headers = list(log.batch_headers())
        assert [h.base_offset for h in headers] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]
        state = ProducerStateManager.rebuild(headers)
        first = state.entry(PID)
        assert first.producer_epoch == 0
        assert [(b.first_seq, b.first_offset) for b in first.batches] == [(3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
        second = state.entry(PID + 1)
        assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in second.batches] == [
            (0, 1, 9, 10), (2, 3, 11, 12)
        ]
        assert set(state.producers) == {PID, PID + 1}
    finally:
        log.close()
