"""The do-nothing responder's classic groups: as its own group's leader by default, or (--group-size)
a follower handed its place's range share of the partitions, so that a load client does a group
member's work against it (locust-capacity's baseline)."""

from __future__ import annotations

from types import SimpleNamespace

from coordinator.consumer.protocol import decode_assignment
from loadtest.members.consumer_protocol import encode_subscription
from loadtest.responder import ABSENT_LEADER, Responder


def _join(responder: Responder, group: str, client: str):
    protocol = SimpleNamespace(name="range", metadata=encode_subscription(["orders"]))
    body = SimpleNamespace(group_id=group, member_id="", protocols=[protocol], protocol_type="consumer")
    return responder.join_group(SimpleNamespace(body=body, client_id=client, api_version=9))


def _sync(responder: Responder, group: str, member_id: str, assignments=()):
    body = SimpleNamespace(group_id=group, member_id=member_id, protocol_type="consumer", protocol_name="range",
                           assignments=list(assignments))
    return decode_assignment(responder.sync_group(SimpleNamespace(body=body, api_version=5)).assignment)


def test_a_member_of_a_group_of_ten_follows_and_gets_its_range_share():
    responder = Responder("127.0.0.1", 0, partitions=12, group_size=10)
    shares = []
    for n in range(10):
        joined = _join(responder, "g", f"c{n}")
        assert joined.leader == ABSENT_LEADER != joined.member_id and list(joined.members) == []
        shares.append(_sync(responder, "g", joined.member_id).get("orders", ()))
    assert sorted(p for share in shares for p in share) == list(range(12))  # every partition, once
    assert sorted(len(share) for share in shares) == [1] * 8 + [2] * 2  # what range gives 10 members of 12
    again = _join(responder, "other", "c0")
    assert _sync(responder, "other", again.member_id) == {"orders": (0, 1)}  # another group starts at place 0


def test_by_default_every_member_leads_its_own_group():
    responder = Responder("127.0.0.1", 0, partitions=12)
    joined = _join(responder, "g", "c0")
    assert joined.leader == joined.member_id
    mine = SimpleNamespace(member_id=joined.member_id, assignment=b"")
    assert _sync(responder, "g", joined.member_id, [mine]) == {}
