"""Members naming a pool share connections (loadtest/drivers/core.py): one per (pool, lane, broker),
every answer back to the member that asked, in its order; a lost pooled connection fails each
member's own requests; a member cannot close the pool. Against the in-process responder, no Ray."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.server import serve
from loadtest.drivers.aio import AsyncioDriver
from loadtest.members.classic import ClassicConfig, ClassicMember, ClassicState
from loadtest.members.machine import Broker, Machine, Millis, Pending
from loadtest.responder import Responder


class Asker(Machine):
    """Sends `count` FindCoordinator requests at once, each for a key of its own; keeps the answers."""

    def __init__(self, name: str, broker: Broker, count: int, pool: str | None) -> None:
        super().__init__(name, None, [broker], pool=pool)
        self.count = count
        self.keys: list[str] = []
        self.errors: list[ErrorCode] = []

    def start(self, now: Millis) -> None:
        for i in range(self.count):
            body = {"key_type": 0, "coordinator_keys": [f"{self.name}/{i}"]}
            self.send(now, ApiKey.FIND_COORDINATOR, 4, body, self.any_broker(), "bootstrap", self._answer)

    def _answer(self, response: Any, error: ErrorCode, now: Millis, _p: Pending) -> None:
        self.errors.append(error)
        if response is not None:
            self.keys.append(response.coordinators[0].key)


async def _responder() -> tuple[Any, Any, Broker]:
    responder = Responder("127.0.0.1", 0, 2)
    server, stats = await serve(responder.dispatch, "127.0.0.1", 0, 1 << 20)
    responder.port = server.sockets[0].getsockname()[1]
    return server, stats, Broker("127.0.0.1", responder.port)


async def _until(predicate, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


def test_pooled_members_share_one_connection_and_each_gets_its_own_answers_in_order():
    async def run() -> None:
        server, stats, broker = await _responder()
        driver = AsyncioDriver()
        askers = [Asker(f"m{i}", broker, 5, pool="idle") for i in range(20)]
        for asker in askers:
            driver.start(asker)
        await _until(lambda: all(len(a.keys) == 5 for a in askers))
        assert list(driver.connections) == [("idle", "bootstrap", broker)]
        assert stats.connections == 1
        for asker in askers:
            assert asker.keys == [f"{asker.name}/{i}" for i in range(5)]
            assert set(asker.errors) == {ErrorCode.none}
        await driver.close()
        await _until(lambda: stats.connections == 0)
        server.close()

    asyncio.run(run())


def test_members_without_a_pool_keep_their_own_connections():
    async def run() -> None:
        server, stats, broker = await _responder()
        driver = AsyncioDriver()
        askers = [Asker(f"m{i}", broker, 2, pool=None) for i in range(4)]
        for asker in askers:
            driver.start(asker)
        await _until(lambda: all(len(a.keys) == 2 for a in askers))
        assert stats.connections == 4
        await driver.close()
        server.close()

    asyncio.run(run())


def test_classic_members_in_pools_reach_stable_over_a_connection_per_pool_and_lane():
    async def run() -> None:
        server, stats, broker = await _responder()
        driver = AsyncioDriver()
        members = [ClassicMember(f"c{i}", [broker], ClassicConfig(f"g{i}", ["t"], fetch=False), pool=f"p{i % 2}")
                   for i in range(10)]
        for member in members:
            driver.start(member)
        await _until(lambda: all(m.state is ClassicState.STABLE and m.positions for m in members))
        pools = {key[0] for key in driver.connections}
        assert pools == {"p0", "p1"}
        # per pool: bootstrap (FindCoordinator, Metadata), coordinator (groups, OffsetFetch), fetch (ListOffsets)
        assert stats.connections == len(driver.connections) <= 6
        # one member leaving and being forgotten leaves the pool's connections to the others
        await driver.stop(members[0])
        assert members[0].stopped and len(driver.connections) == stats.connections
        before = members[1].rebalances
        members[1]._rejoin(driver.now(), "test")  # a rejoin goes over the same pooled connection
        driver.service(members[1])
        await _until(lambda: members[1].state is ClassicState.STABLE and members[1].rebalances > before)
        await driver.close()
        assert driver.connections == {}
        server.close()

    asyncio.run(run())


def test_a_member_cannot_close_a_pooled_connection():
    async def run() -> None:
        server, stats, broker = await _responder()
        driver = AsyncioDriver()
        askers = [Asker(f"m{i}", broker, 1, pool="idle") for i in range(2)]
        for asker in askers:
            driver.start(asker)
        await _until(lambda: all(a.keys for a in askers))
        conn = driver.connections[("idle", "bootstrap", broker)]
        askers[0].close_connection(broker, "bootstrap")  # as a timeout or a moved coordinator would
        driver.service(askers[0])
        assert driver.connections[("idle", "bootstrap", broker)] is conn and not conn.closed
        await driver.close()
        server.close()

    asyncio.run(run())


def test_a_lost_pooled_connection_fails_each_members_own_requests():
    async def run() -> None:
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        driver = AsyncioDriver()
        askers = [Asker(f"m{i}", Broker("127.0.0.1", port), 3, pool="idle") for i in range(3)]
        for asker in askers:
            driver.start(asker)
        await _until(lambda: all(len(a.errors) == 3 for a in askers))
        for asker in askers:
            assert asker.errors == [ErrorCode.network_exception] * 3 and asker.in_flight == 0
        assert driver.connections == {}
        await driver.close()

    asyncio.run(run())
