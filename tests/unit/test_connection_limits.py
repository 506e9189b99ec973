"""Connection limits without sockets (issue 10): queued.max.request.bytes across connections
(partial frames and queued requests counted, reading pauses past the bound and resumes once
answers free memory), max.connections.per.ip and max.connections, the rate-limited bad-input log."""

from __future__ import annotations

import asyncio
import logging
import struct

import msgpack

from cluster.gateway.apis import ADMIN_API_KEY
from cluster.gateway.auth.session import ListenerKind, Session
from cluster.gateway.connection import KafkaConnection, PauseReading, Reply, Request, ResumeReading
from cluster.gateway.connection_limits import ConnectionQuota, RequestMemory
from cluster.gateway.log_limit import RateLimitedLog
from cluster.gateway.server import KafkaProtocol, ServerStats


def admin_frame(correlation_id: int = 1, pad: int = 0) -> bytes:
    body = struct.pack(">hhih", ADMIN_API_KEY, 0, correlation_id, -1) + msgpack.packb({"op": "status", "pad": b"x" * pad})
    return struct.pack(">i", len(body)) + body


def operator_conn(memory: RequestMemory) -> KafkaConnection:
    return KafkaConnection(session=Session(ListenerKind.OPERATOR), memory=memory)


def test_a_partial_frame_reserves_its_whole_size_and_the_answer_gives_it_back():
    memory = RequestMemory(10_000)
    conn = operator_conn(memory)
    data = admin_frame(pad=1000)
    assert conn.receive(data[:10]) == []
    assert memory.used == len(data)  # reserved when the size prefix arrived, before the body
    (request,) = conn.receive(data[10:])
    assert memory.used == len(data)  # still held while the request is queued
    conn.respond(request, b"\x80")
    assert [type(e) for e in conn.next_events()] == [Reply]
    assert memory.used == 0


def test_past_the_bound_a_connection_stops_reading_until_another_gives_memory_back():
    memory = RequestMemory(1000)
    first, second = operator_conn(memory), operator_conn(memory)
    (request,) = first.receive(admin_frame(pad=1200))  # overshoots, as Kafka's non-strict pool allows
    assert memory.used > memory.limit
    assert second.receive(admin_frame(2)) == [] and second.waiting_for_memory
    assert [type(e) for e in second.next_events()] == [PauseReading]
    woken = []
    memory.wait(lambda: woken.append(True))
    first.respond(request, b"\x80")
    first.next_events()
    assert woken == [True] and memory.used == 0
    (later,) = second.receive(b"")  # the shell reads again: the buffered frame is parsed now
    assert later.correlation_id == 2
    assert [type(e) for e in second.next_events()] == [ResumeReading]


def test_a_closed_or_lost_connection_gives_back_everything_it_held():
    memory = RequestMemory(10_000)
    conn = operator_conn(memory)
    conn.receive(admin_frame(1) + admin_frame(2)[:8])
    assert memory.used > 0
    conn.abandon()
    assert memory.used == 0
    bad = operator_conn(memory)
    bad.receive(admin_frame(1) + struct.pack(">i", -5))  # a bad size after a queued request closes
    assert bad.closed is not None and memory.used == 0


def test_unbounded_when_minus_one():
    memory = RequestMemory(-1)
    conn = operator_conn(memory)
    assert len(conn.receive(admin_frame(1, pad=5000) * 3)) == 3 and not conn.waiting_for_memory


def test_connections_per_ip_and_in_all():
    quota = ConnectionQuota(max_connections=3, max_per_ip=2)
    assert quota.admit("a") is None and quota.admit("a") is None
    assert "max.connections.per.ip=2" in quota.admit("a")
    assert quota.admit("b") is None
    assert "max.connections=3" in quota.admit("c")
    quota.release("a")
    assert quota.admit("c") is None and quota.total == 3


class Transport(asyncio.Transport):
    def __init__(self, peer: str) -> None:
        super().__init__()
        self.peer = peer
        self.closed = False
        self.paused = False

    def get_extra_info(self, name, default=None):
        return (self.peer, 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def test_the_server_refuses_a_connection_past_the_quota_and_counts_it_back_when_one_ends():
    quota = ConnectionQuota(max_connections=100, max_per_ip=1)
    stats = ServerStats()

    def protocol() -> KafkaProtocol:
        return KafkaProtocol(lambda r: b"\x80", 1 << 20, stats, quota=quota)

    first, second = protocol(), protocol()
    first.connection_made(t1 := Transport("10.0.0.1"))
    second.connection_made(t2 := Transport("10.0.0.1"))
    assert not t1.closed and t2.closed and stats.refused_connections == 1
    second.connection_lost(None)
    first.connection_lost(None)
    assert quota.total == 0
    third = protocol()
    third.connection_made(t3 := Transport("10.0.0.1"))
    assert not t3.closed


def test_the_server_resumes_a_connection_paused_for_memory():
    async def scenario() -> tuple[bool, bool, list[int]]:
        memory = RequestMemory(100)
        loop = asyncio.get_running_loop()
        pending: list[tuple[Request, asyncio.Future]] = []
        seen: list[int] = []

        def dispatch(request):
            seen.append(request.correlation_id)
            future = loop.create_future()
            pending.append((request, future))
            return future

        def protocol() -> KafkaProtocol:
            return KafkaProtocol(dispatch, 1 << 20, ServerStats(), session=Session(ListenerKind.OPERATOR), memory=memory)

        hog, waiter = protocol(), protocol()
        hog.connection_made(Transport("a"))
        waiter.connection_made(t := Transport("b"))
        hog.data_received(admin_frame(1, pad=200))
        waiter.data_received(admin_frame(2))
        paused = t.paused
        pending[0][1].set_result(msgpack.packb({"ok": True}))
        for _ in range(5):
            await asyncio.sleep(0)
        return paused, t.paused, seen

    paused, still_paused, seen = asyncio.run(scenario())
    assert paused and not still_paused and seen == [1, 2]


def test_the_bad_input_log_is_rate_limited_with_a_count_of_what_it_left_out(caplog):
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("t"), per_second=2, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="t"):
        for i in range(50):
            limited.warning("closing connection: %s", i)
        now[0] = 1.5
        limited.warning("closing connection: %s", "later")
    assert [r.getMessage() for r in caplog.records] == [
        "closing connection: 0",
        "closing connection: 1",
        "closing connection: later (48 similar lines suppressed)",
    ]
