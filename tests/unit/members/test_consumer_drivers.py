"""The consumer member on both drivers, against the do-nothing responder (loadtest/responder.py):
asyncio (experiments, benchmarks) in this process, gevent (locust) with the responder in a
process of its own (one thread cannot run both event loops). It joins, reads from the start,
commits with its epoch and leaves at epoch -1, on real sockets. No Ray."""

from __future__ import annotations

import asyncio

import pytest

from cluster.gateway.server import serve
from loadtest.bench.systems import responder as responder_process
from loadtest.drivers.aio import AsyncioDriver
from loadtest.members.consumer import ConsumerConfig, ConsumerMember, ConsumerState
from loadtest.members.machine import Broker, parse_bootstrap
from loadtest.members.producer import ProducerConfig, ProducerMember
from loadtest.responder import CANNED_RECORDS, Responder

TOPIC = "orders"


def config(**settings) -> ConsumerConfig:
    return ConsumerConfig("g", **{"topics": [TOPIC], "commit_interval_ms": 100, **settings})


def read_and_committed(member: ConsumerMember) -> bool:
    return member.state is ConsumerState.STABLE and len(member.committed) == 2 and \
        all(offset >= CANNED_RECORDS for offset in member.committed.values())


def api_names(rows: list[dict]) -> set[str]:
    return {r["api"] for r in rows if r["kind"] == "response" and r["error"] == "NONE"}


async def _until(predicate, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("subscription", [{"topics": [TOPIC]}, {"topics": [], "topic_regex": "ord.*"}])
def test_consumer_members_run_on_the_asyncio_driver(subscription):
    async def run() -> None:
        responder = Responder("127.0.0.1", 0, 2)
        responder.topic_id(TOPIC)
        server, _stats = await serve(responder.dispatch, "127.0.0.1", 0, 1 << 20)
        responder.port = server.sockets[0].getsockname()[1]
        broker = Broker("127.0.0.1", responder.port)
        rows: list[dict] = []
        driver = AsyncioDriver(sink=rows.extend)
        producer = ProducerMember("p", [broker], ProducerConfig(TOPIC, rate=2_000))
        member = ConsumerMember("g/k000", [broker], config(**subscription))
        driver.start(producer)
        driver.start(member)
        await _until(lambda: read_and_committed(member))
        assert member.assignment == {TOPIC: [0, 1]} and member.member_epoch == 1
        await driver.stop(member)
        assert member.state is ConsumerState.STOPPED
        assert {"ConsumerGroupHeartbeat", "OffsetFetch", "Fetch", "OffsetCommit"} <= api_names(rows)
        leave = [r for r in rows if r["kind"] == "request" and r["api"] == "ConsumerGroupHeartbeat"][-1]
        assert leave["time"] >= [r for r in rows if r["kind"] == "commit"][-1]["time"]
        await driver.stop(producer)
        await driver.close()
        server.close()

    asyncio.run(run())


def test_a_consumer_member_runs_on_the_gevent_driver_as_locust_runs_it():
    gevent = pytest.importorskip("gevent")
    from loadtest.drivers.green import GeventDriver

    with responder_process(partitions=2) as bootstrap:
        rows: list[dict] = []
        driver = GeventDriver(sink=rows.extend)
        brokers = parse_bootstrap(bootstrap)
        producer = ProducerMember("p", brokers, ProducerConfig(TOPIC, rate=2_000))
        member = ConsumerMember("g/k000", brokers, config())
        stop = [False]
        greenlets = [gevent.spawn(driver.run, producer, lambda: stop[0], 0.05),
                     gevent.spawn(driver.run, member, lambda: stop[0], 0.05)]
        with gevent.Timeout(20):
            while not read_and_committed(member):
                gevent.sleep(0.01)
        stop[0] = True
        gevent.joinall(greenlets, timeout=15)
        assert member.state is ConsumerState.STOPPED and producer.stopped
        assert {"ConsumerGroupHeartbeat", "OffsetFetch", "Fetch", "OffsetCommit"} <= api_names(rows)
        driver.close_pools()
