"""Producer ids: blocks handed out by the controller's metadata (durable, never twice, across
restarts and compaction) and ids handed out by gateways from their blocks."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster.control.controller import METADATA_TP, Controller
from cluster.config import Config
from cluster.gateway.producer_ids import NoProducerIdBlock, ProducerIdAllocator
from cluster.log import LogConfig
from cluster.metadata import CODEC, PRODUCER_ID_BLOCK_SIZE, ClusterMetadata, ProducerIdsKey, ProducerIdsValue
from cluster.runtime import CoordinatorRuntime, RuntimeConfig
from kernel.codec import Record


def controller_on(data_dir) -> Controller:
    return Controller(Config({}), data_dir, "127.0.0.1", 0, "test")


def test_allocation_is_a_pure_operation_and_replay_moves_the_counter():
    meta = ClusterMetadata()
    first = meta.allocate_producer_ids("gateway-0")
    assert first.records == [Record(ProducerIdsKey(), ProducerIdsValue("gateway-0", PRODUCER_ID_BLOCK_SIZE))]
    assert (first.response.first_producer_id, first.response.last_producer_id) == (0, PRODUCER_ID_BLOCK_SIZE - 1)
    assert meta.next_producer_id == 0  # only replay changes state
    for record in first.records:
        meta.replay(CODEC.decode(*CODEC.encode(record)))
    second = meta.allocate_producer_ids("gateway-1").response
    assert (second.assigned_to, second.first_producer_id) == ("gateway-1", PRODUCER_ID_BLOCK_SIZE)


def test_the_controller_never_hands_out_a_block_twice_across_restarts(tmp_path):
    async def main():
        controller = controller_on(tmp_path)
        await controller.metadata.load(METADATA_TP, 0)
        blocks = await asyncio.gather(*(controller.allocate_producer_ids(f"gateway-{i % 2}") for i in range(5)))
        await controller.metadata.close()
        controller.executor.shutdown()
        restarted = controller_on(tmp_path)
        await restarted.metadata.load(METADATA_TP, 0)
        blocks.append(await restarted.allocate_producer_ids("gateway-0"))
        await restarted.metadata.close()
        restarted.executor.shutdown()
        firsts = [b.first_producer_id for b in blocks]
        assert sorted(firsts) == [i * PRODUCER_ID_BLOCK_SIZE for i in range(6)]
        assert firsts[-1] == 5 * PRODUCER_ID_BLOCK_SIZE  # the restart continued after the last block

    asyncio.run(main())


def test_compaction_keeps_the_latest_counter(tmp_path):
    async def main():
        executor = ThreadPoolExecutor(2)
        config = RuntimeConfig(tmp_path, LogConfig(compacted=True, segment_bytes=4096), compaction_records=7)
        runtime = CoordinatorRuntime(codec=CODEC, shard_factory=ClusterMetadata, config=config, executor=executor)
        await runtime.load(METADATA_TP, 0)
        for _ in range(40):
            await runtime.write(METADATA_TP, None, lambda _t: runtime.shard(METADATA_TP).allocate_producer_ids("g"))
        await runtime.close()
        reloaded = CoordinatorRuntime(codec=CODEC, shard_factory=ClusterMetadata, config=config, executor=executor)
        await reloaded.load(METADATA_TP, 0)
        assert reloaded.shard(METADATA_TP).next_producer_id == 40 * PRODUCER_ID_BLOCK_SIZE
        assert reloaded.partitions[METADATA_TP].log.segment_count < 40  # compaction did run
        await reloaded.close()
        executor.shutdown()

    asyncio.run(main())


def test_gateways_hand_out_unique_ids_from_their_blocks_and_fetch_the_next_block_ahead(tmp_path):
    async def main():
        controller = controller_on(tmp_path)
        await controller.metadata.load(METADATA_TP, 0)
        requests: list[str] = []

        def allocator(name: str) -> ProducerIdAllocator:
            async def request_block():
                requests.append(name)
                return await controller.allocate_producer_ids(name)

            return ProducerIdAllocator(request_block)

        gateways = [allocator("gateway-0"), allocator("gateway-1")]
        ids = await asyncio.gather(*(gateways[i % 2].next_id() for i in range(2500)))
        assert len(set(ids)) == 2500
        # Each gateway's ids come in order from its own blocks.
        mine = ids[0::2]
        assert mine == sorted(mine)
        # 1250 ids each: two blocks each, the second fetched ahead.
        assert requests.count("gateway-0") == 2 and requests.count("gateway-1") == 2
        # A third gateway: the next block is requested when 90% of the current one is handed out.
        third = allocator("gateway-2")
        first_ids = [await third.next_id() for _ in range(900)]
        assert requests.count("gateway-2") == 1
        await third.next_id()
        await asyncio.sleep(0)
        assert requests.count("gateway-2") == 2 and third.block.first_producer_id == first_ids[0]
        rest = [await third.next_id() for _ in range(150)]
        assert rest[98] == first_ids[0] + PRODUCER_ID_BLOCK_SIZE - 1 and rest[99] > rest[98]
        assert len(set(ids) | set(first_ids) | set(rest)) == 2500 + 900 + 150
        await controller.metadata.close()
        controller.executor.shutdown()

    asyncio.run(main())


def test_a_gateway_without_a_block_gets_a_retriable_error_and_recovers():
    async def main():
        blocks = iter([None, ClusterMetadata().allocate_producer_ids("g", size=3).response])

        async def request_block():
            block = next(blocks)
            if block is None:
                raise ConnectionError("controller unreachable")
            return block

        allocator = ProducerIdAllocator(request_block)
        with pytest.raises(NoProducerIdBlock):
            await allocator.next_id()
        assert [await allocator.next_id() for _ in range(2)] == [0, 1]

    asyncio.run(main())
