"""An operation still waiting for its commit is answered on its own (Deferred), not with its batch.

A gateway (its real protocol, handlers, CoordinatorClient, router and batcher) and a group
coordinator body run in this process, as in test_heartbeat_walk. One `__consumer_offsets`
partition stops committing (a replicated log whose follower is slow or gone: its high watermark
stays put until the ISR shrinks). An OffsetCommit to it and a Heartbeat to a group of the other
partition arrive in the same loop tick, so they travel in one call to the coordinator: the
Heartbeat is answered at once, the commit once its partition commits again. Before Deferred the
call returned with both, so every operation batched with a stalled one waited for it (and with two
calls under way per coordinator, everything after them).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.actors.group_coordinator import GroupCoordinator
from cluster.config import Config
from cluster.gateway.apis import ApiKey, response_class
from cluster.gateway.gateway import Gateway
from cluster.gateway.server import KafkaProtocol, ServerStats
from cluster.leadership import Leadership
from cluster.metadata import CONSUMER_OFFSETS, TopicInfo
from coordinator.hashing import group_partition
from tests.unit.test_heartbeat_walk import InProcessHandle, Wire, frame
from kio.serial import entity_reader

NAME = "group-coordinator-0"


def group_on(partition: int) -> str:
    return next(f"deferred-{i}" for i in range(1000) if group_partition(f"deferred-{i}", 2) == partition)


class Connection:
    """One client connection to the gateway: requests written, the next answer awaited."""

    def __init__(self, gateway: Gateway) -> None:
        self.wire = Wire()
        self.protocol = KafkaProtocol(gateway.dispatch, 1 << 20, ServerStats())
        self.protocol.connection_made(self.wire)
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> asyncio.Future:
        """Write the request now (in this tick); the future of its decoded answer."""
        self.correlation_id += 1
        self.wire.waiting = waiting = asyncio.get_running_loop().create_future()
        self.protocol.data_received(frame(api_key, version, self.correlation_id, body))

        async def answer() -> Any:
            payload = await waiting
            cls = response_class(api_key, version)
            _, offset = entity_reader(cls.__header_schema__)(payload, 0)
            return entity_reader(cls)(payload, offset)[0]

        return asyncio.ensure_future(answer())


async def member(conn: Connection, group: str) -> tuple[str, int]:
    joined = await conn.send(ApiKey.JOIN_GROUP, 3, {
        "group_id": group, "session_timeout": timedelta(seconds=30), "rebalance_timeout": timedelta(seconds=30),
        "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    assert joined.error_code == ErrorCode.none, joined
    synced = await conn.send(ApiKey.SYNC_GROUP, 3, {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "assignments": [{"member_id": joined.member_id, "assignment": b""}]})
    assert synced.error_code == ErrorCode.none, synced
    return joined.member_id, joined.generation_id


def test_an_operation_waiting_for_a_stalled_commit_does_not_hold_its_batch(tmp_path):
    async def main() -> None:
        config = Config.load(["offsets.topic.num.partitions=2", "group.initial.rebalance.delay.ms=0",
                              "offsets.commit.timeout.ms=60000"])
        body = GroupCoordinator(NAME, config, str(tmp_path))
        topics = {"t": TopicInfo("t", uuid.uuid4(), 1, False, {})}
        leadership = Leadership(1, "deferred", [], topics, {(CONSUMER_OFFSETS, p): (NAME, 1) for p in (0, 1)},
                                {NAME: InProcessHandle(body)})
        await body.update_leadership(leadership)
        await body.load([(CONSUMER_OFFSETS, 0, 1), (CONSUMER_OFFSETS, 1, 1)])
        gateway = Gateway(0, config, None, leadership)
        stalled, moving = group_on(0), group_on(1)
        first, second = Connection(gateway), Connection(gateway)
        stalled_member, stalled_generation = await member(first, stalled)
        moving_member, moving_generation = await member(second, moving)

        # Partition 0 stops committing where it is: its writes are appended, never committed.
        writer = body.host.runtime.writer
        real_committed = writer.committed
        held: dict[tuple[str, int], int] = {}

        def committed(partition: Any) -> int | None:
            value = real_committed(partition)
            return min(value, held[partition.tp]) if value is not None and partition.tp in held else value

        writer.committed = committed
        tp = (CONSUMER_OFFSETS, 0)
        held[tp] = body.host.runtime.partitions[tp].committed

        commit = first.send(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": stalled, "generation_id_or_member_epoch": stalled_generation, "member_id": stalled_member,
            "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]})
        beat = second.send(ApiKey.HEARTBEAT, 3, {"group_id": moving, "generation_id": moving_generation,
                                                  "member_id": moving_member, "group_instance_id": None})
        # The same tick: one call carries both. The heartbeat is answered while the commit waits.
        done, _ = await asyncio.wait({beat, commit}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        assert done == {beat}, (commit.result() if commit.done() else "the heartbeat waited for the stalled commit batched with it")
        assert beat.result().error_code == ErrorCode.none
        assert body._deferred  # the commit, held for the gateway to collect
        # Its partition commits again: the commit is answered, and its outcome is let go.
        del held[tp]
        body.host.runtime.committed(tp)
        answer = await asyncio.wait_for(commit, 10)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.none
        assert not body._deferred
        fetched = await asyncio.wait_for(first.send(ApiKey.OFFSET_FETCH, 7, {
            "group_id": stalled, "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": True}), 10)
        assert fetched.topics[0].partitions[0].committed_offset == 7

    asyncio.run(asyncio.wait_for(main(), 60))
