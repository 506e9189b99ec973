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


from cluster.log import LogConfig, PartitionLog
from cluster.recordbatch import encode_records
from cluster.runtime import CoordinatorRuntime, RuntimeConfig
from coordinator.classic.messages import JoinGroupRequest, SyncGroupRequest
from kernel.clock import ManualClock
from coordinator.config import GroupCoordinatorConfig
from coordinator.records import CODEC, offset_commit_record
from coordinator.shard import GroupCoordinatorShard
from cluster.runtime.timers import TimerTable
from cluster.runtime.wakeups import ManualWakeups
from cluster.gateway.apis import ApiKey
from loadtest.bench import pinning
from loadtest.bench.processes import TOPIC, LocalFleet, ProcessFleet, Spec, fleet, until_settled
from loadtest.bench.protocols import Placement
from loadtest.drivers.crowd import Crowd
from loadtest.members.machine import parse_bootstrap

# Idle members share this many connections per lane and broker: a socket each ran the one client
# process out of open files at 10,000 groups (9,900 idle members, three lanes each).
IDLE_POOLS = 8


async def _create_topic(crowd: Crowd, bootstrap: str, partitions: int = 10) -> None:
    broker = parse_bootstrap(bootstrap)[0]
    await crowd.driver.call(broker, ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": TOPIC, "num_partitions": partitions,
                            "replication_factor": 1, "assignments": [], "configs": []}], "timeout": 30_000,
                            "validate_only": False})


async def _window(members: LocalFleet | ProcessFleet, seconds: float,
                  placement: Placement | None) -> tuple[float, float, float, float]:
    """The next `seconds`, measured: (start ms, end ms, the client's CPU seconds in it, all its
    processes; the server's cores busy in it, every process of the system, NaN unplaced)."""
    server_pids = placement.server_pids(members) if placement is not None else set()
    server = pinning.cpu_seconds(server_pids)
    cpu = await members.cpu()
    started = time.time() * 1000
    await asyncio.sleep(seconds)
    ended = time.time() * 1000
    cpu = await members.cpu() - cpu
    server_cores = pinning.spent(server, pinning.cpu_seconds(server_pids)) / seconds if placement else float("nan")
    return started, ended, cpu, server_cores


async def _rate(members: LocalFleet | ProcessFleet, api: str, seconds: float,
                placement: Placement | None = None) -> tuple[float, float, float]:
    """Answers/s of `api` without error over the next `seconds`, from the members' observations;
    the client's CPU µs per answer (all its processes): near 1e6 / rate per process, the client is
    the limit; and the server's cores busy meanwhile (every process of the system; NaN unplaced)."""
    started, ended, cpu, server_cores = await _window(members, seconds, placement)
    answers = await members.count(api, started, ended)
    return answers / seconds, cpu * 1e6 / answers if answers else float("inf"), server_cores


async def group_request_rates(bootstrap: str, members: int, groups: int, seconds: float,
                              processes: int = 1, placement: Placement | None = None) -> dict[str, float]:
    """Heartbeats/s and OffsetCommits/s of `members` Stable members in `groups` groups, each member
    keeping one request in flight (its interval 0: closed loop), as many light clients would; a
    group's members all in one of `processes` client processes. With a placement, the system runs
    on the server's cores and the client on its own, and the server's busy cores are measured."""
    f = fleet(bootstrap, processes)
    try:
        if placement is not None:
            placement.pin(f)
        await _create_topic(f.crowd, bootstrap)
        beating = [Spec(f"hb-{i}", f"rates-hb-{i % groups}", i % groups,
                        config={"heartbeat_interval_ms": 0, "commit_interval_ms": 0}) for i in range(members)]
        await f.start(beating)
        await until_settled(f, 120)
        heartbeat_rps, heartbeat_client_us, heartbeat_server_cores = await _rate(f, "Heartbeat", seconds, placement)
        await f.stop([s.name for s in beating])
        committing = [Spec(f"oc-{i}", f"rates-oc-{i % groups}", i % groups,
                           config={"heartbeat_interval_ms": 3_000, "commit_interval_ms": 1, "commit_back_to_back": True})
                      for i in range(members)]
        await f.start(committing)
        await until_settled(f, 120)
        commit_rps, commit_client_us, commit_server_cores = await _rate(f, "OffsetCommit", seconds, placement)
    finally:
        await f.close()
    return {"heartbeat_rps": heartbeat_rps, "commit_rps": commit_rps, "heartbeat_client_us": heartbeat_client_us,
            "commit_client_us": commit_client_us, "heartbeat_server_cores": heartbeat_server_cores,
            "commit_server_cores": commit_server_cores,
            "heartbeat_client_cores": heartbeat_rps * heartbeat_client_us / 1e6,
            "commit_client_cores": commit_rps * commit_client_us / 1e6}


async def latency_at_load(bootstrap: str, members: int, groups: int, seconds: float, heartbeat_ms: int = 3_000,
                          commit_ms: int = 5_000, processes: int = 1,
                          placement: Placement | None = None) -> dict[str, float]:
    """p50/p99/p999 of Heartbeat and OffsetCommit round trips at a fixed offered load: `members`
    Stable members in `groups` groups, each heartbeating every `heartbeat_ms` and committing its
    position every `commit_ms` (the interval runs from the last answer: with answers ≪ the
    interval, the load is the open loop's, members / interval per second). Measured over the
    `seconds` after every member is Stable, from the members' own round trips (request sent to
    answer read), with the rates offered and the client's and server's busy cores."""
    from loadtest.bench.latency import quantiles

    f = fleet(bootstrap, processes)
    try:
        if placement is not None:
            placement.pin(f)
        await _create_topic(f.crowd, bootstrap)
        specs = [Spec(f"m-{i}", f"load-{i % groups}", i % groups,
                      config={"heartbeat_interval_ms": heartbeat_ms, "commit_interval_ms": commit_ms,
                              "session_timeout_ms": max(30_000, 3 * heartbeat_ms)})
                 for i in range(members)]
        # The groups start spread over one heartbeat interval: members that all started at once
        # heartbeat in one burst every interval (2,000 within 0.4 s of every 3 s, seen), which
        # measures a queue, not the offered load. A group's members beat together, as after a
        # rebalance; the groups' phases are spread, as independent clients' are.
        step = heartbeat_ms / 1000 / groups
        for g in range(groups):
            await f.start([s for s in specs if s.process == g])
            await asyncio.sleep(step)
        await until_settled(f, 300)
        await f.quiet(True)  # the client's own full collections would be measured as the system's p99
        await asyncio.sleep(1.0)  # what that last collection held up is answered before the window
        started, ended, cpu, server_cores = await _window(f, seconds, placement)
        await f.quiet(False)
        result: dict[str, float] = {"client_cores": cpu / seconds, "server_cores": server_cores}
        for api, key in (("Heartbeat", "heartbeat"), ("OffsetCommit", "commit")):
            samples = await f.latencies(api, started, ended)
            if not samples:
                raise RuntimeError(f"no {api} answered without error in {seconds:g} s")
            result[f"{key}_rps"] = len(samples) / seconds
            result.update(quantiles([ms * 1000 for ms in samples], key))
    finally:
        await f.close()
    return result


async def heartbeat_cost(bootstrap: str, groups: int, members: int, active_groups: int, seconds: float,
                         processes: int = 1) -> dict[str, float]:
    """Microseconds per heartbeat (1 / heartbeats/s) of `members` closed-loop members in
    `active_groups` groups while the coordinators also hold `groups - active_groups` idle groups of one
    member each (a long session, heartbeating once a minute: they cost memory and lookups, not load)."""
    f = fleet(bootstrap, processes)
    try:
        await _create_topic(f.crowd, bootstrap)
        idle = [Spec(f"idle-{g}", f"cost-idle-{g}", g, f"idle-{g % IDLE_POOLS}",
                     {"session_timeout_ms": 600_000, "rebalance_timeout_ms": 600_000, "heartbeat_interval_ms": 60_000,
                      "commit_interval_ms": 0}) for g in range(groups - active_groups)]
        await f.start(idle)
        await until_settled(f, 600)
        beating = [Spec(f"hb-{i}", f"cost-hb-{i % active_groups}", i % active_groups,
                        config={"heartbeat_interval_ms": 0, "commit_interval_ms": 0}) for i in range(members)]
        await f.start(beating)
        await until_settled(f, 120)
        rate, _client_us, _server = await _rate(f, "Heartbeat", seconds)
    finally:
        await f.close()
    return {"heartbeat_rps": rate, "us_per_heartbeat": 1e6 / rate if rate else float("inf")}


async def rebalance_time(bootstrap: str, size: int, processes: int = 1, placement: Placement | None = None) -> float:
    """Milliseconds from the last JoinGroup of a rebalance to the last member Stable in the new
    generation, when one member joins a Stable group of `size` (the others hear of it through
    heartbeats every 20 ms); the members spread over `processes` client processes, the times
    merged from all of them. With a placement, the system runs on the server's cores and the
    members on the client's."""
    f = fleet(bootstrap, processes)
    try:
        if placement is not None:
            placement.pin(f)
        await _create_topic(f.crowd, bootstrap)
        group = f"rebalance-{size}-{time.monotonic_ns()}"
        config = {"heartbeat_interval_ms": 20, "commit_interval_ms": 0}
        await f.start([Spec(f"m{i}", group, i, config=config) for i in range(size)])
        generation = (await until_settled(f, 120, one_group=True)).min_generation
        started = time.time() * 1000
        await f.start([Spec("newcomer", group, size, config=config)])
        try:
            await until_settled(f, 120, one_group=True, newer_than=generation)
        except RuntimeError:
            raise RuntimeError("the rebalance did not complete") from None
        joins = await f.times("request", started, api="JoinGroup")
        stable = await f.times("rebalance_end", started)
    finally:
        await f.close()
    return max(stable) - max(joins)


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
                shard_factory=lambda tp, c: GroupCoordinatorShard(tp, c, config=GroupCoordinatorConfig(), new_member_id=str),
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


SUBSCRIPTION = (("range", bytearray(b"\x00\x01\x00\x00\x00\x01\x00\x05topic\xff\xff\xff\xff\x00\x00\x00\x00")),)


def memory_per_member(members: int, per_group: int = 10) -> dict[str, float]:
    """Bytes of shard state per Stable, idle member (groups of per_group), with its session timer
    as the runtime keeps it (cluster/runtime/timers.TimerTable: the key's entry and its heap slot)."""
    clock = ManualClock(0)
    due: list[tuple[object, int]] = []
    wakeups = ManualWakeups(clock)
    timers = TimerTable(wakeups, lambda key, seq: due.append((key, seq)))
    ids = itertools.count()
    shard = GroupCoordinatorShard(
        ("__consumer_offsets", 0), clock, config=GroupCoordinatorConfig(initial_rebalance_delay_ms=0),
        new_member_id=lambda prefix: f"{prefix}-{next(ids):012d}-0000-0000-0000-000000000000",
    )
    tokens = itertools.count(1)

    def run(result):
        for record in result.records:
            shard.replay(record)
        timers.apply(result.timers, clock.now_ms())  # timers are values in a Result: the bench arms them
        return result

    def run_due() -> None:
        while True:  # the expiries due now, as the event loop would run them (the clock stays at 0)
            wakeups.advance(0)
            fired, due[:] = list(due), []
            if not fired:
                return
            for key, _seq in fired:
                run(timers[key].operation(shard))
            timers.expired(fired)

    # What the event loop's one wakeup per partition costs is not per member: leave out the manual
    # stand-in for it (a heap of cancelled handles that the loop would drop).
    outside = [tracemalloc.Filter(False, "*/cluster/runtime/wakeups.py"), tracemalloc.Filter(False, "*/kernel/timer.py")]
    tracemalloc.start()
    before = tracemalloc.take_snapshot().filter_traces(outside)
    for g in range(members // per_group):
        group_id = f"group-{g:06d}"
        for _ in range(per_group):
            # Fresh objects per request, as the gateway decodes them: equal, never shared.
            protocols = tuple(("".join(list(name)), bytes(meta)) for name, meta in SUBSCRIPTION)
            req = JoinGroupRequest(group_id, 10_000, 30_000, "", None, "consumer", protocols, "".join(("client", "-id")),
                                   f"/10.0.0.{1}", requires_known_member_id=False)
            run(shard.join_group(req, next(tokens)))
        run_due()
        group = shard.groups[group_id]
        assignment = tuple((m, b"\x00\x01" + b"\x00" * 20) for m in group.members)
        run(shard.sync_group(SyncGroupRequest(group_id, 1, group.leader_id, None, "consumer", "range", assignment), next(tokens)))
    after = tracemalloc.take_snapshot().filter_traces(outside)
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    stable = sum(g.state.value == "Stable" for g in shard.groups.values())
    assert stable == members // per_group, "every group must be Stable for the figure to mean anything"
    return {"members": members, "bytes_per_member": grown / members}
