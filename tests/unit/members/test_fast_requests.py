"""The hand-written Heartbeat v4 and SyncGroup v5 encoders write exactly the bytes kio's generic
writer does (loadtest/drivers/fast_requests.py), and anything else takes the generic path."""

from __future__ import annotations

from _pytest.monkeypatch import MonkeyPatch
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.gateway.apis import ApiKey
from loadtest.drivers import wire
from loadtest.drivers.fast_requests import encode_fast
from loadtest.members.machine import Broker, Send

TEXT = st.text(max_size=200)
NULLABLE = st.none() | TEXT
INT32 = st.integers(-(2**31), 2**31 - 1)
TO = Broker("localhost", 9092)


def _generic(api: int, version: int, body: dict, monkeypatch: MonkeyPatch, client_id: str) -> bytes:
    monkeypatch.setattr(wire, "encode_fast", lambda *a: None)
    try:
        return wire.ClientWire(client_id).encode(Send(1, api, version, body, TO, "lane"))
    finally:
        monkeypatch.undo()


@settings(max_examples=150, deadline=None)
@given(TEXT, INT32, TEXT, NULLABLE, st.text(max_size=40))
def test_heartbeat_v4_bytes_are_kios(group_id, generation, member_id, instance_id, client_id):
    body = {"group_id": group_id, "generation_id": generation, "member_id": member_id, "group_instance_id": instance_id}
    assert encode_fast(ApiKey.HEARTBEAT, 4, 1, client_id, body) == _generic(ApiKey.HEARTBEAT, 4, body, MonkeyPatch(), client_id)


@settings(max_examples=150, deadline=None)
@given(TEXT, INT32, TEXT, NULLABLE, NULLABLE, NULLABLE,
       st.lists(st.fixed_dictionaries({"member_id": TEXT, "assignment": st.binary(max_size=300)}), max_size=20))
def test_sync_group_v5_bytes_are_kios(group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments):
    body = {"group_id": group_id, "generation_id": generation, "member_id": member_id, "group_instance_id": instance_id,
            "protocol_type": protocol_type, "protocol_name": protocol_name, "assignments": assignments}
    assert encode_fast(ApiKey.SYNC_GROUP, 5, 1, "c", body) == _generic(ApiKey.SYNC_GROUP, 5, body, MonkeyPatch(), "c")


def test_other_bodies_and_versions_take_the_generic_path():
    heartbeat = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    assert encode_fast(ApiKey.HEARTBEAT, 3, 1, "c", heartbeat) is None
    assert encode_fast(ApiKey.HEARTBEAT, 4, 1, "c", {**heartbeat, "extra": 1}) is None
    assert encode_fast(ApiKey.HEARTBEAT, 4, 1, "c", {**heartbeat, "member_id": None}) is None
    assert encode_fast(ApiKey.JOIN_GROUP, 9, 1, "c", {}) is None


def test_the_wire_numbers_fast_requests_and_matches_their_answers():
    w = wire.ClientWire("c")
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    w.encode(Send(7, ApiKey.HEARTBEAT, 4, body, TO, "lane"))
    w.encode(Send(8, ApiKey.HEARTBEAT, 4, body, TO, "lane"))
    assert sorted(w.unanswered()) == [7, 8]
