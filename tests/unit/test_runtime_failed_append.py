"""A failed append under the real group coordinator shard (issue 9, first fix).

The runtime must put the partition back exactly as it was before the failed batch, and nothing
queued behind that batch (a session expiry, the offsets cleanup) may act on the discarded state:
its records would reach the log and undo what the revert restored.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from kio.schema.errors import ErrorCode

from cluster.log import LogConfig, LogWriteError, PartitionLog
from cluster.runtime import CoordinatorRuntime, ManualWakeups, RuntimeConfig, StorageError
from coordinator.classic.messages import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from coordinator.classic.state import ClassicGroupState
from coordinator.config import GroupCoordinatorConfig
from coordinator.records import CODEC
from coordinator.shard import GroupCoordinatorShard
from kernel.clock import ManualClock

TP = ("__consumer_offsets", 0)
SESSION_MS = 10_000


class ControlledLog(PartitionLog):
    """A log whose appends can be held at the door and made to fail, one switch for every instance."""

    hold = threading.Event()  # set: appends go through; clear: they wait in the executor
    entered = threading.Event()  # an append is waiting at the door
    fail = False

    def append(self, batches, leader_epoch):
        failing = type(self).fail  # decided when the append starts, not when it is let through
        type(self).entered.set()
        type(self).hold.wait(5)
        type(self).entered.clear()
        if failing:
            raise LogWriteError("injected: the disk refused the write")
        return super().append(batches, leader_epoch)


def make_runtime(tmp_path, config: GroupCoordinatorConfig) -> CoordinatorRuntime:
    ControlledLog.hold.set()
    ControlledLog.entered.clear()
    ControlledLog.fail = False
    clock = ManualClock(1_000_000)
    ids = itertools.count(1)

    def factory(tp, clock):
        return GroupCoordinatorShard(tp, clock, config=config, new_member_id=lambda p: f"{p}-{next(ids)}")

    return CoordinatorRuntime(
        codec=CODEC,
        shard_factory=factory,
        config=RuntimeConfig(data_dir=tmp_path, log_config=LogConfig(compacted=True, segment_bytes=1 << 20)),
        executor=ThreadPoolExecutor(2),
        clock=clock,
        wakeups=ManualWakeups(clock),
        log_opener=lambda path, cfg: ControlledLog.open(path, cfg),
    )


def call(rt: CoordinatorRuntime, method: str, request):
    return asyncio.ensure_future(rt.write(TP, None, lambda token: getattr(rt.shard(TP), method)(request, token)))


async def barrier(rt: CoordinatorRuntime) -> None:
    """Everything queued before this has run (and its timers are armed)."""
    await rt.write(TP, None, lambda token: rt.shard(TP).list_groups((), (), token))


async def append_waiting() -> None:
    while not ControlledLog.entered.is_set():
        await asyncio.sleep(0.001)


async def queued(rt: CoordinatorRuntime, n: int) -> None:
    while len(rt.partitions[TP].queue) < n:
        await asyncio.sleep(0.001)


def commit(group_id: str, offsets: dict[tuple[str, int], int], member_id: str = "", generation: int = -1):
    topics: dict[str, list[CommitPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append(CommitPartition(partition, offset))
    return OffsetCommitRequest(group_id, generation, member_id, None, tuple((t, tuple(ps)) for t, ps in topics.items()))


async def stable_group_of_two(rt: CoordinatorRuntime) -> tuple[str, str]:
    def join(client: str) -> JoinGroupRequest:
        return JoinGroupRequest("g", SESSION_MS, 30_000, "", None, "consumer", (("range", b"m"),),
                                client_id=client, requires_known_member_id=False)

    joins = [call(rt, "join_group", join("a"))]
    await barrier(rt)
    joins.append(call(rt, "join_group", join("b")))
    await barrier(rt)
    rt.wakeups.advance(0)  # the initial delayed join: b arrived during it, so it waits once more
    await barrier(rt)
    rt.wakeups.advance(0)
    answers = [await j for j in joins]
    a, b = answers[0].member_id, answers[1].member_id
    assert answers[0].leader == a and answers[0].generation_id == 1
    sync_a = await call(rt, "sync_group", SyncGroupRequest("g", 1, a, None, "consumer", "range", ((a, b"A"), (b, b"B"))))
    sync_b = await call(rt, "sync_group", SyncGroupRequest("g", 1, b, None, "consumer", "range", ()))
    assert sync_a.error_code == ErrorCode.none and sync_b.assignment == b"B"
    return a, b


def test_a_session_expiry_queued_behind_a_failed_append_does_not_act_on_the_discarded_state(tmp_path):
    """LeaveGroup(a) + OffsetCommit fail together; b's heartbeat, then b's session deadline, queue
    behind them. b heartbeated in time, so the group stays Stable at generation 1 with a and b."""

    async def main():
        rt = make_runtime(tmp_path, GroupCoordinatorConfig(initial_rebalance_delay_ms=0))
        await rt.load(TP, 1)
        a, b = await stable_group_of_two(rt)
        rt.wakeups.advance(SESSION_MS // 2)
        assert (await call(rt, "heartbeat", HeartbeatRequest("g", 1, a))).error_code == ErrorCode.none

        ControlledLog.hold.clear()
        ControlledLog.fail = True
        leave = call(rt, "leave_group", LeaveGroupRequest("g", (LeavingMember(a),)))
        committed = call(rt, "commit_offsets", commit("g", {("t", 0): 5}, b, 1))
        await append_waiting()
        heartbeat_b = call(rt, "heartbeat", HeartbeatRequest("g", 1, b))
        await queued(rt, 1)
        rt.wakeups.advance(SESSION_MS // 2)  # b's deadline passes while the append is in flight
        ControlledLog.fail = False
        ControlledLog.hold.set()
        for failed in (leave, committed):
            with pytest.raises(StorageError):
                await failed
        assert (await heartbeat_b).error_code == ErrorCode.none
        await barrier(rt)

        group = rt.shard(TP).groups["g"]
        assert (group.state, group.generation_id, set(group.members)) == (ClassicGroupState.STABLE, 1, {a, b})
        await rt.unload(TP)
        await rt.load(TP, 2)
        group = rt.shard(TP).groups["g"]
        assert (group.state, group.generation_id, set(group.members)) == (ClassicGroupState.STABLE, 1, {a, b})
        await rt.close()

    asyncio.run(main())


def test_the_offsets_cleanup_after_a_failed_append_keeps_an_offset_committed_again(tmp_path):
    """The cleanup queued behind a failed batch must see the state after the revert, and so must every
    cleanup after it: an offset committed again after the revert lives its full retention."""

    async def main():
        config = GroupCoordinatorConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
        rt = make_runtime(tmp_path, config)
        await rt.load(TP, 1)
        await call(rt, "commit_offsets", commit("s", {("t", 0): 5}))

        ControlledLog.hold.clear()
        ControlledLog.fail = True
        failed = call(rt, "commit_offsets", commit("s", {("t", 1): 1}))
        await append_waiting()
        rt.wakeups.advance(10_000)  # the cleanup falls due behind the failing batch
        ControlledLog.fail = False
        ControlledLog.hold.set()
        with pytest.raises(StorageError):
            await failed
        await barrier(rt)

        await call(rt, "commit_offsets", commit("s", {("t", 0): 7}))  # at +10 s: retained until +70 s
        for _ in range(6):  # to +65 s: the first commit of ("t", 0) would have expired at +60 s
            rt.wakeups.advance(9_000 if _ == 5 else 10_000)
            await barrier(rt)
        offsets = rt.shard(TP).offsets["s"]
        assert offsets[("t", 0)].offset == 7 and ("t", 1) not in offsets
        await rt.unload(TP)
        await rt.load(TP, 2)
        assert rt.shard(TP).offsets["s"][("t", 0)].offset == 7
        await rt.close()

    asyncio.run(main())
