"""Timers are values in an operation's Result, armed by the runtime only once the records are durable."""

from __future__ import annotations

import asyncio

import pytest

from cluster.log import PartitionLog
from cluster.runtime import TIMER_RETRY_BACKOFF_MS, StorageError
from coordinator.classic.messages import HeartbeatRequest, LeaveGroupRequest, LeavingMember
from coordinator.classic.rebalance import heartbeat_key
from coordinator.share.heartbeat import session_key
from coordinator.share.messages import ShareGroupHeartbeatRequest
from kernel.timer import Cancel, Schedule, ShardCall
from tests.full_disk import FullDisk
from tests.unit.classic.context import Context
from tests.unit.classic.test_rebalance_scenarios import stable_group_of
from tests.unit.share.context import ShareContext, topic
from tests.unit.test_runtime import EXPIRY_MS, TP, make_runtime


def test_a_heartbeat_answers_with_the_session_timer_it_rearms():
    ctx = Context()
    (m1,) = stable_group_of(ctx, 1)
    result = ctx.shard.heartbeat(HeartbeatRequest("g", 1, m1))
    assert result.records == []
    assert result.timers == [Schedule(heartbeat_key("g", m1), 10_000, ShardCall("expire_heartbeat", ("g", m1)))]


def test_a_leave_cancels_the_session_timer_and_a_share_heartbeat_rearms_its_own():
    ctx = Context()
    m1, m2 = stable_group_of(ctx, 2)
    result = ctx.shard.leave_group(LeaveGroupRequest("g", (LeavingMember(m1),)))
    assert Cancel(heartbeat_key("g", m1)) in result.timers

    share = ShareContext(topic("foo", 1), share_session_timeout_ms=45_000)
    share.join("m1", ["foo"])
    result = share.shard.share_group_heartbeat(ShareGroupHeartbeatRequest("g", "m1", 1, None, None, "c", "/h"))
    assert result.timers == [Schedule(session_key("g", "m1"), 45_000, ShardCall("expire_share_session", ("g", "m1")))]


def test_a_failed_write_arms_none_of_its_timers_and_a_failed_timer_operation_is_retried(tmp_path):
    async def main():
        disk = FullDisk()
        rt = make_runtime(tmp_path, log_opener=lambda path, cfg: PartitionLog.open(path, cfg, disk))
        await rt.load(TP, 1)
        with disk.filled(), pytest.raises(StorageError):
            await rt.write(TP, 1, lambda t: rt.shard(TP).incr("a"))
        assert rt.partitions[TP].timers == {}  # the failed increment's expiry was never armed

        assert await rt.write(TP, 1, lambda t: rt.shard(TP).incr("a")) == 1
        with disk.filled(), pytest.raises(StorageError):
            rt.wakeups.advance(EXPIRY_MS)  # the expiry runs, and its tombstone cannot be written
            await rt.write(TP, 1, lambda t: rt.shard(TP).get("a"))  # in the same batch: it fails too
        assert rt.shard(TP).values == {"a": 1}
        rt.wakeups.advance(TIMER_RETRY_BACKOFF_MS)  # Kafka retries a failed timer write after a back-off
        assert await rt.write(TP, 1, lambda t: rt.shard(TP).get("a")) is None
        await rt.close()

    asyncio.run(main())
