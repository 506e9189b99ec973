"""Fetch and ListOffsets of an internal partition on the coordinator actor that leads it (issue 10:
they closed the connection): the stored batches as they are, positions as a partition leader
gives them, NOT_LEADER_OR_FOLLOWER while loading or at another epoch, KIP-320 fencing."""

from __future__ import annotations

import asyncio
import time

from kio.schema.errors import ErrorCode

from cluster.calls.kinds import ActorKind
from cluster.actors.coordinator_host import CoordinatorHost
from cluster.config import Config
from cluster.metadata import CODEC, ClusterMetadata, TopicSpec
from cluster.recordbatch import parse_header
from cluster.runtime import PartitionStatus
from cluster.calls import FetchItem, ListOffsetsItem, LogEnd

TOPIC = "__consumer_offsets"
TP = (TOPIC, 3)


def _batches(data: bytes) -> list:
    headers, at = [], 0
    while at < len(data):
        header = parse_header(data[at:])
        headers.append(header)
        at += 12 + header.batch_length
    return headers


async def _host(tmp_path) -> CoordinatorHost:
    host = CoordinatorHost("gc-0", ActorKind.GROUP_COORDINATOR, CODEC, ClusterMetadata, Config(), tmp_path)
    await host.load([(TOPIC, 3, 5)])
    for name in ("a", "b", "c"):
        meta = host.runtime.shard(TP)
        await host.runtime.write(TP, 5, lambda _t, n=name: meta.create_topics([TopicSpec(n, 2)]))
    return host


def test_fetch_serves_the_stored_batches_and_list_offsets_the_positions(tmp_path):
    async def main():
        host = await _host(tmp_path)
        end = host.runtime.partitions[TP].log.end_offset
        assert end == 9  # three batches of a topic record and two epoch records
        [outcome] = await host.fetch([FetchItem(TOPIC, 3, 5, -1, 0, 1 << 20)], 0, 1, 1 << 20)
        assert outcome.error_code == ErrorCode.none and outcome.high_watermark == end and outcome.log_start_offset == 0
        assert [(h.base_offset, h.last_offset) for h in _batches(outcome.records)] == [(0, 2), (3, 5), (6, 8)]
        [later] = await host.fetch([FetchItem(TOPIC, 3, 5, 5, 3, 1 << 20)], 0, 1, 1 << 20)
        assert _batches(later.records)[0].base_offset == 3
        [beyond] = await host.fetch([FetchItem(TOPIC, 3, 5, -1, end + 1, 1 << 20)], 0, 1, 1 << 20)
        assert beyond.error_code == ErrorCode.offset_out_of_range

        answers = host.list_offsets([ListOffsetsItem(TOPIC, 3, 5, -1, -1), ListOffsetsItem(TOPIC, 3, 5, 5, -2), ListOffsetsItem(TOPIC, 3, 5, -1, 0)])
        assert answers[0] == LogEnd(ErrorCode.none, end, -1, 5)
        assert answers[1] == LogEnd(ErrorCode.none, 0, -1, 5)
        assert answers[2].error_code == ErrorCode.none and answers[2].offset == 0
        await host.shutdown()

    asyncio.run(main())


def test_another_epoch_a_partition_not_led_or_loading_answer_not_leader_and_fencing_as_kip_320(tmp_path):
    async def main():
        host = await _host(tmp_path)
        outcomes = await host.fetch(
            [FetchItem(TOPIC, 3, 4, -1, 0, 100), FetchItem(TOPIC, 7, 0, -1, 0, 100), FetchItem(TOPIC, 3, 5, 4, 0, 100), FetchItem(TOPIC, 3, 5, 6, 0, 100)],
            0, 1, 1 << 20)
        assert [o.error_code for o in outcomes] == [
            ErrorCode.not_leader_or_follower, ErrorCode.not_leader_or_follower,
            ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch]
        offsets = host.list_offsets([ListOffsetsItem(TOPIC, 3, 4, -1, -1), ListOffsetsItem(TOPIC, 3, 5, 4, -1)])
        assert [o.error_code for o in offsets] == [ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch]

        host.runtime.partitions[TP].status = PartitionStatus.LOADING  # as a load in progress leaves it
        [loading] = await host.fetch([FetchItem(TOPIC, 3, 5, -1, 0, 100)], 0, 1, 1 << 20)
        [listing] = host.list_offsets([ListOffsetsItem(TOPIC, 3, 5, -1, -1)])
        assert loading.error_code == ErrorCode.not_leader_or_follower
        assert listing.error_code == ErrorCode.not_leader_or_follower
        host.runtime.partitions[TP].status = PartitionStatus.ACTIVE
        await host.shutdown()

    asyncio.run(main())


def test_a_fetch_at_the_end_waits_its_max_wait_instead_of_answering_at_once(tmp_path):
    async def main():
        host = await _host(tmp_path)
        started = time.monotonic()
        [outcome] = await host.fetch([FetchItem(TOPIC, 3, 5, -1, 9, 100)], 200, 1, 1 << 20)
        waited = time.monotonic() - started
        assert outcome.error_code == ErrorCode.none and outcome.records == b"" and outcome.high_watermark == 9
        assert 0.15 <= waited < 2
        await host.shutdown()

    asyncio.run(main())
