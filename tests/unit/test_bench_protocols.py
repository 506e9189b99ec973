"""The pieces of the classic-vs-consumer-protocol benchmark (loadtest/bench/protocols.py,
pinning.py, the fleet's consumer members), against the in-process responder (which answers a
ConsumerGroupHeartbeat as it answers a JoinGroup: each member alone, with every partition), no Ray."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from cluster.gateway.server import serve
from loadtest.bench import pinning
from loadtest.bench.processes import Spec, fleet, until_settled
from loadtest.bench.protocols import Side, consumer_settings, parse_sides
from loadtest.responder import Responder


async def _responder(partitions: int = 2) -> tuple[object, str]:
    responder = Responder("127.0.0.1", 0, partitions)
    server, _ = await serve(responder.dispatch, "127.0.0.1", 0, 1 << 20)
    responder.port = server.sockets[0].getsockname()[1]
    return server, f"127.0.0.1:{responder.port}"


@pytest.mark.parametrize("processes", [1, 2])
def test_timed_members_of_both_protocols_say_since_when_they_are_settled(processes: int) -> None:
    async def run() -> None:
        server, bootstrap = await _responder()
        f = fleet(bootstrap, processes)
        try:
            started = time.time() * 1000
            await f.start([Spec(f"{protocol}{i}", f"{protocol}-g{i}", i, config=Side(protocol).config(50),
                                protocol=protocol, timed=True) for protocol in ("classic", "consumer") for i in range(2)])
            status = await until_settled(f, 30, owned=8)  # every member holds both partitions
            assert status.members == 4 and status.owned == 8
            since = await f.settled_since()
            assert len(since) == 4 and all(t is not None and t >= started for t in since)
            assert await f.times("request", started, api="ConsumerGroupHeartbeat")
            assert await f.times("request", started, api="JoinGroup")
            await f.stop(["classic0"])
            assert len(await f.settled_since()) == 3
        finally:
            await f.close()
            server.close()

    asyncio.run(run())


def test_untimed_members_have_no_settle_clock() -> None:
    member = Spec("m", "g", protocol="consumer").build("127.0.0.1:9092")
    assert not hasattr(member, "settled_since")
    assert type(Spec("m", "g", timed=True).build("127.0.0.1:9092")).__name__ == "TimedClassic"


def test_sides_parse_and_configure_each_protocol() -> None:
    assert parse_sides("classic:range, classic:cooperative-sticky,consumer") == [
        Side("classic", "range"), Side("classic", "cooperative-sticky"), Side("consumer")]
    assert Side("consumer").label == "consumer (uniform)" and Side("consumer", "range").label == "consumer (range)"
    assert Side("classic").label == "classic (range)"
    assert Side("classic", "range").config(20)["heartbeat_interval_ms"] == 20
    assert "heartbeat_interval_ms" not in Side("consumer").config(20)  # the coordinator's
    assert Side("consumer", "range").config(20)["server_assignor"] == "range"
    assert consumer_settings(20)["group.consumer.heartbeat.interval.ms"] == 20
    assert consumer_settings(20)["group.consumer.min.heartbeat.interval.ms"] == 20
    with pytest.raises(SystemExit):
        parse_sides("eager")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_cores_split_and_cpu_is_read_per_process() -> None:
    mine = sorted(os.sched_getaffinity(0))
    given = pinning.split(str(mine[0]), str(mine[-1]))
    assert given == pinning.Cores(frozenset({mine[0]}), frozenset({mine[-1]}))
    default = pinning.split()
    if len(mine) >= 2:
        assert default is not None and default.server and default.client and not default.server & default.client
    else:
        assert default is None
    before = pinning.cpu_seconds([os.getpid()])
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    after = pinning.cpu_seconds([os.getpid(), 999_999_999])  # a pid that is not there is left out
    assert set(after) == {os.getpid()} and pinning.spent(before, after) >= 0
    assert pinning.pin(os.getpid(), frozenset(mine)) and not pinning.pin(999_999_999, frozenset(mine))
    assert os.getpid() not in pinning.descendants(os.getpid())
