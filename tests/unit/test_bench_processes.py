"""Light members in one client process or several (loadtest/bench/processes.py): the same questions
answered over a fleet, rates counted in one window and summed, times merged. Against the in-process
responder (every member is its own group's leader), no Ray."""

from __future__ import annotations

import asyncio
import time

from cluster.gateway.server import serve
from loadtest.bench.processes import LocalFleet, ProcessFleet, Spec, Status, fleet, until_settled
from loadtest.responder import Responder

BEAT = {"heartbeat_interval_ms": 0, "commit_interval_ms": 0}


async def _responder() -> tuple[object, str]:
    responder = Responder("127.0.0.1", 0, 2)
    server, _ = await serve(responder.dispatch, "127.0.0.1", 0, 1 << 20)
    responder.port = server.sockets[0].getsockname()[1]
    return server, f"127.0.0.1:{responder.port}"


def test_statuses_merge_by_summing_members_and_spanning_generations():
    merged = Status.merge([Status(3, 3, 2, 4), Status(0, 0, -1, -1), Status(2, 1, 1, 3)])
    assert merged == Status(5, 4, 1, 4)
    assert Status.merge([Status(0, 0, -1, -1)]) == Status(0, 0, -1, -1)


async def _exercise(f) -> tuple[int, list[float], int, int]:
    specs = [Spec(f"m{i}", f"g{i % 2}", i % 2, pool="p" if i < 2 else None, config=BEAT) for i in range(4)]
    await f.start(specs)
    settled = await until_settled(f, 30)
    started, cpu = time.time() * 1000, await f.cpu()
    await asyncio.sleep(0.3)
    ended = time.time() * 1000
    beats = await f.count("Heartbeat", started, ended)
    assert await f.cpu() > cpu  # the members' loop (or loops) worked
    latencies = await f.latencies("Heartbeat", started, ended)
    # by when each was sent, not answered: at most one per member (4) differs at each end
    assert latencies and abs(len(latencies) - beats) <= 8 and all(0 <= ms < 30_000 for ms in latencies)
    joins = await f.times("request", 0, api="JoinGroup")
    await f.stop(["m0"])
    left = (await f.status()).members
    return settled.members, joins, beats, left


def test_a_local_fleet_runs_members_and_answers_about_them():
    async def run() -> None:
        server, bootstrap = await _responder()
        f = fleet(bootstrap, 1)
        assert isinstance(f, LocalFleet)
        members, joins, beats, left = await _exercise(f)
        await f.close()
        server.close()
        assert members == 4 and len(joins) >= 4 and beats > 0 and left == 3

    asyncio.run(run())


def test_members_spread_over_client_processes_are_counted_and_timed_together():
    async def run() -> None:
        server, bootstrap = await _responder()
        f = fleet(bootstrap, 2)
        assert isinstance(f, ProcessFleet)
        try:
            members, joins, beats, left = await _exercise(f)
            per_process = [status.members for status in await f._all("status")]
        finally:
            await f.close()
        server.close()
        assert members == 4 and len(joins) >= 4 and beats > 0 and left == 3
        assert per_process == [1, 2]  # m0 (process 0) left; m2 in process 0, m1 and m3 in process 1
        assert all(not child.is_alive() for child in f._children)

    asyncio.run(run())


def test_latency_at_load_gives_quantiles_and_rates_of_both_apis():
    from loadtest.bench.groups import latency_at_load

    async def run() -> dict[str, float]:
        server, bootstrap = await _responder()
        try:
            return await latency_at_load(bootstrap, 4, 2, 1.0, heartbeat_ms=50, commit_ms=100)
        finally:
            server.close()

    got = asyncio.run(run())
    for key in ("heartbeat", "commit"):
        assert 0 <= got[f"{key}_p50_ms"] <= got[f"{key}_p99_ms"] <= got[f"{key}_p999_ms"]
        assert got[f"{key}_rps"] > 0
    # 4 members, one heartbeat each per 50 ms after the answer: at most 80 per second
    assert got["heartbeat_rps"] <= 80 and got["client_cores"] > 0


def test_a_quiet_client_makes_no_full_collections_and_gives_them_back_after():
    import gc

    from loadtest.bench.processes import Members

    async def run() -> None:
        members = Members("127.0.0.1:9")
        before = gc.get_threshold()
        members.quiet(True)
        try:
            assert gc.get_threshold()[2] > 1_000_000 and gc.get_freeze_count() > 0
        finally:
            members.quiet(False)
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0

    asyncio.run(run())
