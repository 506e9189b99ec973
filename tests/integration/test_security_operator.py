"""The operator API on a live cluster (issue 10): an anonymous operator request on the Kafka port is
refused and nothing happens (the actor it asked to kill lives on); the CLI, given the Kafka
address, is served by the operator listener on localhost."""

from __future__ import annotations

import socket
import struct

import msgpack
import pytest

from cluster.admin_client import admin_call
from cluster.gateway.apis import ADMIN_API_KEY

pytestmark = pytest.mark.slow


def raw_admin(address: str, op: str, **args) -> dict:
    host, _, port = address.rpartition(":")
    body = struct.pack(">hhih", ADMIN_API_KEY, 0, 5, -1) + msgpack.packb({"op": op, "args": args})
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        payload = sock.recv(size, socket.MSG_WAITALL)
    return msgpack.unpackb(payload[4:])


def test_an_anonymous_kill_on_the_kafka_port_is_refused_and_the_actor_lives(cluster):
    before = {a["name"]: a for a in admin_call(cluster.bootstrap, "actors")}
    victim = next(name for name in before if name.startswith("partition-leader"))
    for address in cluster.bootstrap.split(","):
        answer = raw_admin(address, "kill", name=victim)
        assert answer["ok"] is False and "operator listener" in answer["error"]
        assert answer["operator"].startswith("127.0.0.1:")
        assert raw_admin(address, "status")["ok"] is False
    after = {a["name"]: a for a in admin_call(cluster.bootstrap, "actors")}
    assert after[victim]["alive"] and after[victim].get("pid") == before[victim].get("pid")
    events = admin_call(cluster.bootstrap, "events", since=0)
    assert not any(victim in str(e) and "kill" in str(e).lower() for e in events)


def test_the_cli_is_served_through_the_operator_listener(cluster):
    result = cluster.cli("actors")
    assert result.returncode == 0, result.stderr
    assert "gateway-0" in result.stdout
    gateways = [a for a in admin_call(cluster.bootstrap, "actors") if a["kind"] == "gateway"]
    operator = gateways[0]["operator_address"]
    assert raw_admin(operator, "status")["ok"] is True


def test_up_prints_where_each_gateways_operator_listener_is(cluster):
    gateways = sorted((a for a in admin_call(cluster.bootstrap, "actors") if a["kind"] == "gateway"), key=lambda a: a["name"])
    listeners = ",".join(a["operator_address"] for a in gateways)
    assert f"operator API at {listeners}" in cluster.events()
