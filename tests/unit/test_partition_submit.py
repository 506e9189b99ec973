"""A leader queues every request of one call before it waits (UserPartition.submit, no task each)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from cluster.partition import ProduceOutcome
from cluster.recordbatch import iter_batches
from tests.unit.test_partition_leader import batch, leader_with
from cluster.calls import FetchItem, ProduceItem


def test_submit_answers_a_rejected_request_at_once_and_queues_a_valid_one(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 1))
        partition = leader.partitions[("t", 0)]
        rejected = partition.submit(b"")
        assert type(rejected) is ProduceOutcome and rejected.error_code == ErrorCode.corrupt_message
        queued = partition.submit(batch(2))
        assert isinstance(queued, asyncio.Future) and not queued.done()
        assert (await queued).base_offset == 0
        await leader.shutdown()

    asyncio.run(main())


def test_one_call_over_several_partitions_answers_in_order_and_shares_the_appends(tmp_path):
    async def main():
        leader = await leader_with(tmp_path, ("t", 0, 1), ("t", 1, 1))
        writes: list[int] = []
        for partition in leader.partitions.values():
            log = partition.log
            stage = log.stage

            def counted(batches, *args, _stage=stage, **kwargs):
                writes.append(len(batches))
                return _stage(batches, *args, **kwargs)

            log.stage = counted
        out = await leader.produce([
            ProduceItem("t", 0, 1, batch(2)),
            ProduceItem("t", 1, 1, batch(1)),
            ProduceItem("t", 7, 1, batch(1)),  # not led here
            ProduceItem("t", 0, 1, b"\x00"),  # rejected by its checks
            ProduceItem("t", 0, 1, batch(3)),
            ProduceItem("t", 1, 1, batch(4)),
        ])
        assert [(o.error_code, o.base_offset) for o in out] == [
            (ErrorCode.none, 0),
            (ErrorCode.none, 0),
            (ErrorCode.not_leader_or_follower, -1),
            (ErrorCode.corrupt_message, -1),
            (ErrorCode.none, 2),
            (ErrorCode.none, 1),
        ]
        # Both requests of a partition went into its one append.
        assert sorted(writes) == [2, 2]
        (fetched,) = await leader.fetch([FetchItem("t", 0, 1, -1, 0, 1 << 20)], 0, 1, 1 << 20)
        assert [h.record_count for _, h in iter_batches(fetched.records)] == [2, 3]
        await leader.shutdown()

    asyncio.run(main())
