"""The latency benchmark's own arithmetic and encodings (loadtest/bench/latency.py): quantiles by
nearest rank, and the consumer-protocol bytes of its one-member group, which real brokers parse."""

from __future__ import annotations

import math

from coordinator.consumer.protocol import decode_assignment, decode_subscription
from loadtest.bench.latency import _assignment, _subscription, quantiles


def test_quantiles_are_nearest_rank_in_milliseconds():
    samples = [float(us) for us in range(1, 1001)]  # 1 us .. 1000 us
    assert quantiles(samples, "hb") == {"hb_p50_ms": 0.501, "hb_p99_ms": 0.991, "hb_p999_ms": 1.0}
    assert quantiles([250.0], "x") == {"x_p50_ms": 0.25, "x_p99_ms": 0.25, "x_p999_ms": 0.25}


def test_the_groups_subscription_and_assignment_are_well_formed():
    assert decode_subscription(_subscription("latency-1")).topics == ("latency-1",)
    assert decode_assignment(_assignment("latency-1")) == {"latency-1": (0,)}


def test_unloaded_round_trips_time_every_api_spaced_out_against_a_responder():
    import asyncio
    import threading

    from loadtest.bench.latency import unloaded_round_trips
    from loadtest.responder import Responder
    from cluster.gateway.server import serve

    # The responder on a loop of its own thread: the latency client blocks on its socket.
    loop = asyncio.new_event_loop()

    async def start() -> tuple[asyncio.AbstractServer, str]:
        responder = Responder("127.0.0.1", 0, 2)
        server, _ = await serve(responder.dispatch, "127.0.0.1", 0, 1 << 20)
        responder.port = server.sockets[0].getsockname()[1]
        return server, f"127.0.0.1:{responder.port}"

    async def stop(server: asyncio.AbstractServer) -> None:
        server.close()
        await server.wait_closed()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server, bootstrap = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        got = unloaded_round_trips(bootstrap, samples=5, warmup=1, gap_s=0.002)
    finally:
        asyncio.run_coroutine_threadsafe(stop(server), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    for api in ("api_versions", "metadata", "heartbeat", "produce", "commit", "join"):
        assert 0 < got[f"{api}_p50_ms"] <= got[f"{api}_p99_ms"] <= got[f"{api}_p999_ms"]
    # The responder serves no share groups and says so in ApiVersions: that figure is NaN (failed).
    assert all(math.isnan(got[f"share_fetch_{q}_ms"]) for q in ("p50", "p99", "p999"))
