"""Connection limits without sockets (issues 10, 21): queued.max.request.bytes across connections
(the bytes of partial frames and queued requests counted as they arrive, never a size a prefix only
announced; past the bound a connection above its own allowance pauses and resumes once answers free
memory), max.connections.per.ip and max.connections, sasl.server.max.receive.size before
authentication, connections.max.idle.ms, the rate-limited bad-input log."""

from __future__ import annotations

import asyncio
import logging
import struct

import msgpack

from cluster.config import Config
from cluster.gateway.apis import ADMIN_API_KEY
from cluster.gateway.auth.client_listener import client_listener
from cluster.gateway.auth.session import ListenerKind, Session
from cluster.gateway.connection import Close, KafkaConnection, PauseReading, Reply, Request, ResumeReading
from cluster.gateway.connection_limits import ConnectionQuota, ListenerLimits, Refusal, RequestMemory
from cluster.gateway.log_limit import RateLimitedLog
from cluster.gateway.server import KafkaProtocol, ServerStats


def admin_frame(correlation_id: int = 1, pad: int = 0) -> bytes:
    body = struct.pack(">hhih", ADMIN_API_KEY, 0, correlation_id, -1) + msgpack.packb({"op": "status", "pad": b"x" * pad})
    return struct.pack(">i", len(body)) + body


def operator_conn(memory: RequestMemory) -> KafkaConnection:
    return KafkaConnection(session=Session(ListenerKind.OPERATOR), memory=memory)


def prefix_only(size: int = 100_000_000) -> bytes:
    """A size prefix and nothing more: `05 f5 e1 00` announces 100,000,000 bytes (issue 21)."""
    return struct.pack(">i", size)


def test_request_memory_counts_bytes_as_they_arrive_never_a_size_only_announced():
    memory = RequestMemory(256 * 1024 * 1024)
    attackers = [operator_conn(memory) for _ in range(3)]
    for attacker in attackers:
        assert attacker.receive(prefix_only()) == [] and not attacker.waiting_for_memory
    assert memory.used == 12  # three prefixes, not 300 MB
    fresh = operator_conn(memory)
    (request,) = fresh.receive(admin_frame(1))
    assert not fresh.waiting_for_memory


def test_a_frames_bytes_are_held_as_they_arrive_and_the_answer_gives_them_back():
    memory = RequestMemory(10_000)
    conn = operator_conn(memory)
    data = admin_frame(pad=1000)
    assert conn.receive(data[:10]) == []
    assert memory.used == 10  # what arrived, not the size the prefix announced
    (request,) = conn.receive(data[10:])
    assert memory.used == len(data)  # still held while the request is queued
    conn.respond(request, b"\x80")
    assert [type(e) for e in conn.next_events()] == [Reply]
    assert memory.used == 0


def test_past_the_bound_a_connection_holding_more_than_its_allowance_stops_reading_until_memory_comes_back():
    memory = RequestMemory(1000, per_connection=500)
    first, second = operator_conn(memory), operator_conn(memory)
    (request,) = first.receive(admin_frame(pad=1200))  # overshoots: the bytes are here already
    assert memory.used > memory.limit and first.waiting_for_memory
    assert second.receive(admin_frame(2, pad=600)[:550]) == [] and second.waiting_for_memory
    assert [type(e) for e in second.next_events()] == [PauseReading]
    woken = []
    memory.wait(lambda: woken.append(True))
    first.respond(request, b"\x80")
    first.next_events()
    assert woken == [True] and memory.used == 550
    (later,) = second.receive(admin_frame(2, pad=600)[550:])  # the shell reads again
    assert later.correlation_id == 2 and not second.waiting_for_memory
    assert [type(e) for e in second.next_events()] == [ResumeReading]


def test_one_connections_bytes_never_block_another_connections_small_request():
    memory = RequestMemory(1000, per_connection=500)
    hog = operator_conn(memory)
    assert hog.receive(prefix_only(100_000) + b"x" * 5000) == [] and hog.waiting_for_memory
    small = operator_conn(memory)
    (request,) = small.receive(admin_frame(3))  # within its own allowance: read whatever the pool holds
    assert not small.waiting_for_memory and small.next_events() == []
    hog.abandon()
    assert memory.used == len(admin_frame(3))


def test_a_wait_registered_once_memory_is_back_is_called_at_once():
    memory = RequestMemory(100, per_connection=0)
    woken = []
    memory.wait(lambda: woken.append(True))
    assert woken == [True]


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
    assert quota.admit("a") == Refusal("max.connections.per.ip", "too many connections from a (max.connections.per.ip=2)")
    assert quota.admit("b") is None
    assert quota.admit("c") == Refusal("max.connections", "too many connections (max.connections=3)")
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
        memory = RequestMemory(200, per_connection=50)
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
        hog.data_received(admin_frame(1, pad=250))
        waiting = admin_frame(2, pad=100)
        waiter.data_received(waiting[:80])  # past its allowance while the pool is spent
        paused = t.paused
        pending[0][1].set_result(msgpack.packb({"ok": True}))
        for _ in range(5):
            await asyncio.sleep(0)
        waiter.data_received(waiting[80:])
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


# -- sasl.server.max.receive.size and connections.max.idle.ms (issue 21) ----------------------------


def sasl_conn(memory: RequestMemory | None = None, clock=None, **limits) -> KafkaConnection:
    config = Config({"listeners": "SASL_PLAINTEXT://h:1", **limits})
    session = client_listener(config).new_session()
    return KafkaConnection(session=session, memory=memory, **({"clock": clock} if clock else {}))


def test_a_frame_above_sasl_server_max_receive_size_before_authentication_fails_authentication_and_closes():
    memory = RequestMemory(1 << 30)
    conn = sasl_conn(memory)
    (close,) = conn.receive(prefix_only(600 * 1024))
    assert isinstance(close, Close) and close.authentication_failed
    assert close.reason == ("Failing SASL authentication due to invalid receive size: "
                            "Invalid receive (size = 614400 larger than 524288)")  # Kafka's words
    assert memory.used == 0
    at_the_limit = sasl_conn()
    assert at_the_limit.receive(prefix_only(524288)) == [] and at_the_limit.closed is None


def test_the_receive_size_before_authentication_is_configurable_and_ends_with_authentication():
    conn = sasl_conn(**{"sasl.server.max.receive.size": 1000})
    (close,) = conn.receive(prefix_only(1001))
    assert "larger than 1000" in close.reason
    authenticated = sasl_conn(**{"sasl.server.max.receive.size": 1000})
    authenticated.session.principal = "User:alice"
    assert authenticated.receive(prefix_only(600 * 1024)) == [] and authenticated.closed is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_connection_idle_for_connections_max_idle_ms_is_closed_and_gives_its_bytes_back():
    clock, memory = Clock(), RequestMemory(1 << 20)
    conn = sasl_conn(memory, clock, **{"connections.max.idle.ms": 2000})
    assert conn.idle_deadline() == 102.0  # from when it was accepted
    assert conn.expire_idle(101.999) is None
    clock.now = 101.5
    conn.receive(prefix_only(100) + b"x" * 10)  # stuck mid-frame: idle from its last byte
    assert conn.expire_idle(103.0) is None and conn.idle_deadline() == 103.5
    close = conn.expire_idle(103.5)
    assert isinstance(close, Close) and not close.authentication_failed
    assert close.reason == "idle for 2000 ms (connections.max.idle.ms=2000)"
    assert conn.closed == close.reason and memory.used == 0


def test_a_connection_owed_an_answer_is_not_idle_and_its_answer_restarts_the_clock():
    clock = Clock()
    conn = KafkaConnection(session=Session(ListenerKind.OPERATOR, limits=ListenerLimits(connections_max_idle_ms=1000)),
                           clock=clock)
    (request,) = conn.receive(admin_frame(1))
    clock.now = 500.0
    assert conn.idle_deadline() is None and conn.expire_idle(500.0) is None
    conn.respond(request, b"\x80")
    conn.next_events()
    assert conn.idle_deadline() == 501.0


def test_connections_max_idle_ms_minus_one_never_expires():
    conn = sasl_conn(clock=Clock(), **{"connections.max.idle.ms": -1})
    assert conn.idle_deadline() is None and conn.expire_idle(1e12) is None


class TimedTransport(Transport):
    """Records when it was closed and what was written, for a test on a running loop."""

    def __init__(self, peer: str = "10.0.0.9") -> None:
        super().__init__(peer)
        self.closed_event = asyncio.Event()
        self.written: list[bytes] = []
        self.closed_at: float | None = None

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True
        self.closed_at = asyncio.get_running_loop().time()
        self.closed_event.set()


def counter(name: str, **labels: str) -> float:
    from cluster.metrics.registry import REGISTRY

    return REGISTRY.counters.get((name, tuple(labels.items())), 0)


def test_the_server_closes_a_connection_idle_mid_frame_after_connections_max_idle_ms(caplog):
    async def scenario() -> tuple[float, TimedTransport, ServerStats]:
        stats, memory = ServerStats(), RequestMemory(1 << 20)
        session = Session(ListenerKind.OPERATOR, limits=ListenerLimits(connections_max_idle_ms=150))
        protocol = KafkaProtocol(lambda r: msgpack.packb({"ok": True}), 1 << 20, stats, session=session, memory=memory)
        protocol.connection_made(transport := TimedTransport())
        protocol.data_received(admin_frame(1))  # answered at once: not idle while it is served
        protocol.data_received(admin_frame(2)[:7])  # then half a frame, and nothing more
        last_byte = asyncio.get_running_loop().time()
        await asyncio.wait_for(transport.closed_event.wait(), 10)
        assert memory.used == 0
        return transport.closed_at - last_byte, transport, stats

    before = counter("connections_closed", reason="connections.max.idle.ms")
    with caplog.at_level(logging.INFO, logger="cluster.gateway.server"):
        idle_for, transport, stats = asyncio.run(scenario())
    assert idle_for >= 0.15 - 0.002 and len(transport.written) == 1  # uvloop rounds timers to the ms
    assert stats.closed_idle == 1
    assert counter("connections_closed", reason="connections.max.idle.ms") == before + 1
    assert any("connections.max.idle.ms=150" in r.getMessage() for r in caplog.records)


def test_a_failed_authentication_closes_after_connection_failed_authentication_delay_ms_logged_and_counted(caplog):
    async def scenario() -> tuple[float, TimedTransport, ServerStats]:
        stats = ServerStats()
        config = Config({"listeners": "SASL_PLAINTEXT://h:1", "connection.failed.authentication.delay.ms": 200})
        protocol = KafkaProtocol(lambda r: None, 1 << 20, stats, session=client_listener(config).new_session())
        protocol.connection_made(transport := TimedTransport())
        sent = asyncio.get_running_loop().time()
        protocol.data_received(admin_frame(1))  # not a SASL request before authentication
        assert not transport.closed and transport.paused  # nothing more is read meanwhile
        await asyncio.wait_for(transport.closed_event.wait(), 10)
        return transport.closed_at - sent, transport, stats

    before = counter("failed_authentications")
    with caplog.at_level(logging.INFO, logger="cluster.gateway.server"):
        delayed, transport, stats = asyncio.run(scenario())
    assert delayed >= 0.2 - 0.002 and stats.failed_authentications == 1
    assert counter("failed_authentications") == before + 1
    assert any(r.getMessage().startswith("Failed authentication with 10.0.0.9 (unexpected request")
               for r in caplog.records)
