"""Classic-group measurements used by `python -m loadtest.bench` (issue: classic consumer groups).

- request rates: heartbeats/s and OffsetCommits/s from N light members in G groups, closed loop;
- rebalance time: from the last JoinGroup of a rebalance to every member Stable, by group size;
- reload: time to replay a `__consumer_offsets` partition log of R records into a shard;
- memory per idle member: bytes of coordinator state per Stable member (tracemalloc).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kio.schema.errors import ErrorCode

from cluster.log import LogConfig, PartitionLog
from cluster.recordbatch import encode_records
from cluster.runtime import CoordinatorRuntime, RuntimeConfig
from coordinator.classic.messages import JoinGroupRequest, SyncGroupRequest
from coordinator.clock import ManualClock
from coordinator.config import GroupCoordinatorConfig
from coordinator.records import CODEC, offset_commit_record
from coordinator.shard import GroupCoordinatorShard
from coordinator.timer import ManualTimer
from loadtest.client.classic_member import ClassicMember, MemberConfig, MemberState
from loadtest.client.cluster_client import ClusterClient

TOPIC = "bench-groups"


async def _stable_members(cluster: ClusterClient, members: int, groups: int, prefix: str) -> list[ClassicMember]:
    await cluster.create_topic(TOPIC, 10)
    config = lambda i: MemberConfig(f"{prefix}-{i % groups}", [TOPIC], session_timeout_ms=30_000)  # noqa: E731
    crowd = [ClassicMember(cluster, config(i)) for i in range(members)]
    await asyncio.gather(*(m.join() for m in crowd))
    # A member that joined early may have been told to rejoin by a later one: settle everyone.
    while any(m.state is not MemberState.STABLE for m in crowd):
        await asyncio.gather(*(m.join() for m in crowd if m.state is not MemberState.STABLE))
    return crowd


async def _closed_loop(crowd: list[ClassicMember], seconds: float, request) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop(member: ClassicMember) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            if await request(member):
                done += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop(m) for m in crowd))
    return done / (time.perf_counter() - start)


async def group_request_rates(bootstrap: str, members: int, groups: int, seconds: float) -> dict[str, float]:
    cluster = ClusterClient(bootstrap)
    crowd = await _stable_members(cluster, members, groups, "rates")

    async def heartbeat(m: ClassicMember) -> bool:
        return await m.heartbeat() == ErrorCode.none

    offsets = itertools.count()

    async def commit(m: ClassicMember) -> bool:
        partitions = m.assignment.get(TOPIC) or [0]
        answer = await m.commit({(TOPIC, partitions[0]): next(offsets)})
        return set(answer.values()) == {ErrorCode.none}

    out = {
        "heartbeat_rps": await _closed_loop(crowd, seconds, heartbeat),
        "commit_rps": await _closed_loop(crowd, seconds, commit),
    }
    await asyncio.gather(*(m.leave() for m in crowd))
    await cluster.close()
    return out


async def rebalance_time(bootstrap: str, size: int) -> float:
    """Milliseconds from the last JoinGroup of a rebalance to the last member reaching Stable."""
    cluster = ClusterClient(bootstrap)
    crowd = await _stable_members(cluster, size, 1, f"rebalance-{size}")
    joined_at: list[float] = []
    stable_at: list[float] = []

    async def rejoin(m: ClassicMember) -> None:
        joined_at.append(time.perf_counter())
        await m.join()
        stable_at.append(time.perf_counter())

    async def follow(m: ClassicMember) -> None:
        # As a real member learns of a rebalance: its heartbeat answers REBALANCE_IN_PROGRESS.
        while m.state is MemberState.STABLE:
            await m.heartbeat()
            if m.state is MemberState.STABLE:
                await asyncio.sleep(0.02)
        await rejoin(m)

    newcomer = ClassicMember(cluster, MemberConfig(crowd[0].config.group_id, [TOPIC], session_timeout_ms=30_000))
    await asyncio.gather(rejoin(newcomer), *(follow(m) for m in crowd))
    elapsed = (max(stable_at) - max(joined_at)) * 1000
    await asyncio.gather(*(m.leave() for m in [*crowd, newcomer]))
    await cluster.close()
    return elapsed


def reload_time(records: int) -> dict[str, float]:
    """Replay of a `__consumer_offsets` partition holding `records` OffsetCommit records."""
    with tempfile.TemporaryDirectory(prefix="raygroups-reload-") as data:
        path = Path(data) / "__consumer_offsets-0"
        log = PartitionLog.open(path, LogConfig(compacted=True, segment_bytes=8 << 20))
        per_batch = 100
        for start in range(0, records, per_batch):
            entries = CODEC.encode_all(
                offset_commit_record(f"group-{(start + i) // 100}", "topic", (start + i) % 100, start + i, -1, "", 1, -1)
                for i in range(min(per_batch, records - start))
            )
            log.append([bytearray(encode_records([(n, k, v) for n, (k, v) in enumerate(entries)], 1))], 0)
        size = log.size_bytes
        log.close()

        async def load() -> float:
            clock = ManualClock(0)
            runtime = CoordinatorRuntime(
                codec=CODEC,
                shard_factory=lambda tp, c, t: GroupCoordinatorShard(tp, c, t, GroupCoordinatorConfig(), str),
                config=RuntimeConfig(data_dir=Path(data), log_config=LogConfig(compacted=True)),
                executor=ThreadPoolExecutor(2),
                clock=clock,
            )
            start = time.perf_counter()
            await runtime.load(("__consumer_offsets", 0), 1)
            elapsed = time.perf_counter() - start
            shard = runtime.shard(("__consumer_offsets", 0))
            assert sum(len(o) for o in shard.offsets.values()) == records
            await runtime.close()
            return elapsed

        seconds = asyncio.run(load())
    return {"records": records, "log_bytes": size, "seconds": seconds, "records_per_s": records / seconds}


def memory_per_member(members: int, per_group: int = 10) -> dict[str, float]:
    """Bytes of shard state per Stable, idle member (groups of per_group), with its session timer."""
    clock = ManualClock(0)
    timer = ManualTimer(clock)
    ids = itertools.count()
    shard = GroupCoordinatorShard(
        ("__consumer_offsets", 0), clock, timer, GroupCoordinatorConfig(initial_rebalance_delay_ms=0),
        lambda prefix: f"{prefix}-{next(ids):012d}-0000-0000-0000-000000000000",
    )
    tokens = itertools.count(1)

    def run(result):
        for record in result.records:
            shard.replay(record)
        return result

    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for g in range(members // per_group):
        group_id = f"group-{g:06d}"
        protocols = (("range", b"\x00\x01\x00\x00\x00\x01\x00\x05topic\xff\xff\xff\xff\x00\x00\x00\x00"),)
        for _ in range(per_group):
            req = JoinGroupRequest(group_id, 10_000, 30_000, "", None, "consumer", protocols, "client-id", "/10.0.0.1",
                                   requires_known_member_id=False)
            run(shard.join_group(req, next(tokens)))
        while (due := timer.pop_expired()) is not None:
            run(due[1]())
        group = shard.groups[group_id]
        assignment = tuple((m, b"\x00\x01" + b"\x00" * 20) for m in group.members)
        run(shard.sync_group(SyncGroupRequest(group_id, 1, group.leader_id, None, "consumer", "range", assignment), next(tokens)))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    stable = sum(g.state.value == "Stable" for g in shard.groups.values())
    assert stable == members // per_group, "every group must be Stable for the figure to mean anything"
    return {"members": members, "bytes_per_member": grown / members}
