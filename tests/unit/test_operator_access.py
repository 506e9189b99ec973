"""The operator API for operators only (issue 10): refused on a client listener unless the
connection authenticated as a super user, served on the operator listener; the operator listener
serves nothing else; the CLI finds the operator listener from the Kafka address."""

from __future__ import annotations

import asyncio
import struct
import threading

import msgpack
import pytest
from kio.schema.metadata.v12.request import MetadataRequest

from cluster.admin_client import AdminError, admin_call
from cluster.gateway.apis import ADMIN_API_KEY, ApiKey
from cluster.gateway.auth.principals import ANONYMOUS, may_operate, parse_super_users
from cluster.gateway.auth.session import ListenerKind, Session
from cluster.gateway.connection import Close, KafkaConnection, Request
from cluster.gateway.gateway import Gateway
from cluster.gateway.server import serve
from tests.unit.test_connection import frame


def admin_frame(op: str, **args) -> bytes:
    body = struct.pack(">hhih", ADMIN_API_KEY, 0, 1, -1) + msgpack.packb({"op": op, "args": args})
    return struct.pack(">i", len(body)) + body


def fake_gateway(super_users: str = "", operator_address: str | None = "127.0.0.1:1") -> tuple[Gateway, list[str]]:
    done: list[str] = []

    def admin(_gw, request):
        done.append(msgpack.unpackb(request.body)["op"])
        return msgpack.packb({"ok": True, "result": "done"})

    gw = Gateway.__new__(Gateway)
    gw._handlers = {ADMIN_API_KEY: admin}
    gw.super_users = parse_super_users(super_users)
    gw.operator_address = operator_address
    return gw, done


def admin_request(session: Session | None) -> Request:
    conn = KafkaConnection(session=session)
    (request,) = conn.receive(admin_frame("kill", name="gateway-0"))
    if session is None:
        request.session = None
    return request


def test_an_anonymous_operator_request_on_a_client_listener_is_refused_and_nothing_runs():
    gw, done = fake_gateway()
    answer = msgpack.unpackb(gw.dispatch(admin_request(Session())))
    assert answer["ok"] is False and answer["refused"] is True
    assert "operator listener" in answer["error"] and answer["operator"] == "127.0.0.1:1"
    assert done == []


def test_a_request_without_a_session_is_refused():
    gw, done = fake_gateway()
    assert msgpack.unpackb(gw.dispatch(admin_request(None)))["ok"] is False and done == []


def test_a_non_super_user_is_refused_and_a_super_user_is_served():
    gw, done = fake_gateway("User:admin;User:ops")
    assert msgpack.unpackb(gw.dispatch(admin_request(Session(principal="User:alice"))))["ok"] is False
    assert done == []
    assert msgpack.unpackb(gw.dispatch(admin_request(Session(principal="User:ops"))))["ok"] is True
    assert done == ["kill"]


def test_the_operator_listener_serves_operators():
    gw, done = fake_gateway()
    assert msgpack.unpackb(gw.dispatch(admin_request(Session(ListenerKind.OPERATOR))))["ok"] is True
    assert done == ["kill"]


def test_the_operator_listener_serves_nothing_but_the_operator_api():
    conn = KafkaConnection(session=Session(ListenerKind.OPERATOR))
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    (event,) = conn.receive(frame(ApiKey.METADATA, 12, metadata))
    assert isinstance(event, Close) and "operator listener" in event.reason


def test_super_users_parse_as_kafka_writes_them():
    assert parse_super_users(" User:a ; User:b;") == {"User:a", "User:b"}
    with pytest.raises(ValueError):
        parse_super_users("alice")
    assert not may_operate(ANONYMOUS, False, frozenset())
    assert may_operate(ANONYMOUS, False, frozenset({ANONYMOUS}))  # opened on purpose only
    assert not may_operate(None, False, frozenset({ANONYMOUS}))


class TwoListeners:
    """A client and an operator listener on loopback, in a thread, around fake_gateway's dispatch."""

    def __init__(self, operator_address_known: bool = True) -> None:
        self.gw, self.done = fake_gateway()
        self.known = operator_address_known
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            client, _ = await serve(self.gw.dispatch, "127.0.0.1", 0, 1 << 20)
            operator, _ = await serve(self.gw.dispatch, "127.0.0.1", 0, 1 << 20,
                                      new_session=lambda: Session(ListenerKind.OPERATOR))
            self.client = f"127.0.0.1:{client.sockets[0].getsockname()[1]}"
            op = f"127.0.0.1:{operator.sockets[0].getsockname()[1]}"
            self.gw.operator_address = op if self.known else None
            self.ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_the_cli_finds_the_operator_listener_from_the_kafka_address():
    servers = TwoListeners()
    try:
        assert admin_call(servers.client, "kill", name="x") == "done"
        assert servers.done == ["kill"]
        with pytest.raises(AdminError, match="operator listener"):
            admin_call(servers.client, "kill", follow=False, name="x")
        assert servers.done == ["kill"]
    finally:
        servers.stop()


def test_without_an_operator_listener_the_refusal_is_the_error():
    servers = TwoListeners(operator_address_known=False)
    try:
        with pytest.raises(AdminError, match="served only on the operator listener"):
            admin_call(servers.client, "status")
        assert servers.done == []
    finally:
        servers.stop()
