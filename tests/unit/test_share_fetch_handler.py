"""The ShareFetch and ShareAcknowledge handlers with a fake PartitionLeaderClient: sessions,
translation both ways, and what ending a session asks of the leaders."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcknowledgementBatch, AcquiredRecords

from cluster.calls import ShareFetchSpec, SharePartitionCall
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import share_fetch
from cluster.gateway.share_sessions import ShareSessionCache
from cluster.leadership import GatewayAddress, Leadership
from cluster.metadata import TopicInfo
from cluster.share.requests import ShareOutcome

from tests.unit.gateway.fakes import gateway, request, run

TOPIC = TopicInfo("t", uuid.uuid4(), 2, False, {})
MEMBER = "m-1"


class FakePartitions:
    """share_fetch answers each part with `answer(part)`, epoch 6; records every call."""

    def __init__(self, answer=None, poll: asyncio.Event | None = None) -> None:
        self.answer = answer or (lambda part: ShareOutcome())
        self.poll = poll  # when given, share_fetch stays in flight until it is set
        self.calls: list[tuple] = []

    async def share_fetch(self, spec, parts, in_flight=None, closed=None):
        self.calls.append(("fetch", spec, list(parts)))
        self.closed = closed
        if self.poll is not None:
            task = asyncio.current_task()
            in_flight[task] = ("a", "7:1")
            await self.poll.wait()
            del in_flight[task]
        return {i: (self.answer(part), 6) for i, part in enumerate(parts)}

    def share_wake(self, actor, keys):
        self.calls.append(("wake", actor, keys))
        if self.poll is not None:
            self.poll.set()

    async def share_release(self, group_id, member_id, partitions):
        self.calls.append(("release", group_id, member_id, list(partitions)))

    async def share_evict(self, group_id, partitions, gateway):
        self.calls.append(("evict", group_id, sorted(partitions), gateway))


def _gateway(partitions: FakePartitions):
    gw = gateway(partitions=partitions, leadership=Leadership(
        1, "c", [GatewayAddress(0, "h", 9092)], {"t": TOPIC}, {}, {}))
    gw.node_id = 7
    gw.share_sessions = ShareSessionCache(10)
    gw.config["group.share.record.lock.duration.ms"] = 30_000
    return gw


def _fetch(epoch: int, topics: list[dict], max_wait: int = 500, connection_id: int = 0) -> object:
    req = request(ApiKey.SHARE_FETCH, 1, {
        "group_id": "g", "member_id": MEMBER, "share_session_epoch": epoch, "max_wait": max_wait,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100, "topics": topics,
        "forgotten_topics_data": []})
    req.connection_id = connection_id
    return req


def _acknowledge(epoch: int, topics: list[dict], connection_id: int = 0) -> object:
    req = request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
        "group_id": "g", "member_id": MEMBER, "share_session_epoch": epoch, "topics": topics})
    req.connection_id = connection_id
    return req


def _topic(topic_id, *partitions, batches=()) -> dict:
    return {"topic_id": topic_id, "partitions": [
        {"partition_index": p, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": last, "acknowledge_types": list(types)} for f, last, types in batches]}
        for p in partitions]}


def test_share_fetch_opens_a_session_and_translates_the_leaders_answers():
    acquired = ShareOutcome(records=b"r", acquired=(AcquiredRecords(0, 2, 1),))
    partitions = FakePartitions(lambda part: acquired if part.partition == 0 else ShareOutcome())
    stranger = uuid.uuid4()
    response = run(share_fetch.share_fetch, _gateway(partitions), _fetch(0, [_topic(TOPIC.topic_id, 0, 1, 5), _topic(stranger, 0)]))
    (_, spec, parts), = partitions.calls
    assert spec == ShareFetchSpec("g", MEMBER, gateway=7, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, max_records=100)
    assert parts == [SharePartitionCall("t", 0, TOPIC.topic_id), SharePartitionCall("t", 1, TOPIC.topic_id)]
    answered = {(r.topic_id, p.partition_index): p for r in response.responses for p in r.partitions}
    assert answered[(TOPIC.topic_id, 0)].records == b"r"
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in answered[(TOPIC.topic_id, 0)].acquired_records] == [(0, 2, 1)]
    assert answered[(TOPIC.topic_id, 0)].current_leader.leader_epoch == 6
    assert answered[(TOPIC.topic_id, 5)].error_code == ErrorCode.unknown_topic_or_partition
    assert answered[(stranger, 0)].error_code == ErrorCode.unknown_topic_id
    assert response.acquisition_lock_timeout == timedelta(seconds=30) and response.node_endpoints == ()


def test_malformed_acknowledgements_are_answered_here_and_the_partition_is_still_fetched():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(0, [_topic(TOPIC.topic_id, 0)]))
    response = run(share_fetch.share_fetch, gw, _fetch(1, [_topic(TOPIC.topic_id, 0, batches=[(5, 3, (1,))])]))
    parts = partitions.calls[1][2]
    assert parts == [SharePartitionCall("t", 0, TOPIC.topic_id, (), True)]
    (p,) = response.responses[0].partitions
    assert p.acknowledge_error_code == ErrorCode.invalid_request.value and "ends before it starts" in p.acknowledge_error_message


def test_a_leaders_retriable_error_lists_the_gateways_for_the_client():
    def not_leader(part):
        out = ShareOutcome()
        out.fail(ErrorCode.not_leader_or_follower, "moving", bool(part.acknowledgements))
        return out

    gw = _gateway(FakePartitions(not_leader))
    run(share_fetch.share_fetch, gw, _fetch(0, [_topic(TOPIC.topic_id, 0)]))
    response = run(share_fetch.share_acknowledge, gw, _acknowledge(1, [_topic(TOPIC.topic_id, 0, batches=[(0, 1, (1,))])]))
    (p,) = response.responses[0].partitions
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [(0, "h", 9092)]
    assert gw.partitions.calls[1][1].max_wait_ms == 0  # acknowledging only: no long poll


def test_a_final_acknowledge_releases_the_members_records_and_evicts_the_emptied_group():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(0, [_topic(TOPIC.topic_id, 0, 1)]))
    run(share_fetch.share_acknowledge, gw, _acknowledge(-1, [_topic(TOPIC.topic_id, 1, batches=[(0, 0, (1,))])]))
    assert partitions.calls[1][2] == [SharePartitionCall("t", 1, TOPIC.topic_id, (AcknowledgementBatch(0, 0, (1,)),), False)]
    assert partitions.calls[2:] == [
        ("release", "g", MEMBER, [("t", 0), ("t", 1)]),
        ("evict", "g", [("t", 0), ("t", 1)], 7),
    ]


def test_a_closed_connection_wakes_the_sessions_long_poll_and_releases_after_it_is_back():
    poll = asyncio.Event()
    partitions = FakePartitions(poll=poll)
    gw = _gateway(partitions)

    async def main():
        fetching = asyncio.ensure_future(share_fetch.share_fetch(gw, _fetch(0, [_topic(TOPIC.topic_id, 0)], max_wait=30_000)))
        while not any(s.in_flight for s in gw.share_sessions.sessions.values()):
            await asyncio.sleep(0)
        share_fetch.connection_closed(gw, 0)
        await fetching
        while partitions.calls[-1][0] != "evict":
            await asyncio.sleep(0)

    asyncio.run(main())
    assert [c[0] for c in partitions.calls] == ["fetch", "wake", "release", "evict"]
    assert partitions.calls[1] == ("wake", "a", ["7:1"])


def test_the_leaders_are_told_when_the_session_has_ended_meanwhile():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    asyncio.run(share_fetch.share_fetch(gw, _fetch(0, [_topic(TOPIC.topic_id, 0)])))
    (session,) = gw.share_sessions.sessions.values()
    assert partitions.closed() is False
    gw.share_sessions.disconnected(0)
    assert partitions.closed() is True and not gw.share_sessions.holds(session)


def test_a_reconnect_race_leaves_the_new_session_and_its_records_alone():
    """Session created on connection A; the member reconnects on B and opens epoch 0; a request
    of the new session under way on A is served there; A's close, processed afterwards, ends
    nothing (Kafka: the session belongs to the connection that created it, and A's entry went
    stale when its session was replaced). B's close ends B's session and releases."""
    partitions = FakePartitions()
    gw = _gateway(partitions)
    a, b = 1, 2

    async def main():
        await share_fetch.share_fetch(gw, _fetch(0, [_topic(TOPIC.topic_id, 0)], connection_id=a))
        await share_fetch.share_fetch(gw, _fetch(0, [_topic(TOPIC.topic_id, 0)], connection_id=b))
        late = await share_fetch.share_acknowledge(gw, _acknowledge(1, [], connection_id=a))
        assert late.error_code == ErrorCode.none
        share_fetch.connection_closed(gw, a)
        await asyncio.sleep(0)  # a release would be under way now
        assert [c[0] for c in partitions.calls] == ["fetch", "fetch"]
        acked = await share_fetch.share_acknowledge(
            gw, _acknowledge(2, [_topic(TOPIC.topic_id, 0, batches=[(0, 0, (1,))])], connection_id=b))
        assert acked.error_code == ErrorCode.none and acked.responses[0].partitions[0].error_code == ErrorCode.none
        share_fetch.connection_closed(gw, b)
        while partitions.calls[-1][0] != "evict":
            await asyncio.sleep(0)

    asyncio.run(main())
    assert [c[0] for c in partitions.calls] == ["fetch", "fetch", "fetch", "release", "evict"]
    assert partitions.calls[3] == ("release", "g", MEMBER, [("t", 0)])


def test_a_request_on_another_connection_does_not_move_the_session():
    """Requests of a session on a connection that did not create it are served, and that
    connection's close leaves the session; the creating connection's close ends it."""
    partitions = FakePartitions()
    gw = _gateway(partitions)

    async def main():
        await share_fetch.share_fetch(gw, _fetch(0, [_topic(TOPIC.topic_id, 0)], connection_id=1))
        fetched = await share_fetch.share_fetch(gw, _fetch(1, [], connection_id=2))
        acked = await share_fetch.share_acknowledge(gw, _acknowledge(2, [], connection_id=3))
        assert fetched.error_code == acked.error_code == ErrorCode.none
        share_fetch.connection_closed(gw, 2)
        share_fetch.connection_closed(gw, 3)
        await asyncio.sleep(0)
        assert len(gw.share_sessions) == 1 and [c[0] for c in partitions.calls] == ["fetch", "fetch"]
        share_fetch.connection_closed(gw, 1)
        while partitions.calls[-1][0] != "evict":
            await asyncio.sleep(0)

    asyncio.run(main())
    assert [c[0] for c in partitions.calls] == ["fetch", "fetch", "release", "evict"]


def test_a_final_share_fetch_may_name_partitions_it_acknowledges_and_fetches_none():
    """Kafka 4.2 (FinalContext; the INVALID_REQUEST of 4.0 for partitions in a final fetch went
    with KAFKA-18932, SharePartitionManagerTest.testNewContextReturnsFinalContextWhenTopicPartitionsArePresentInRequestData):
    epoch -1 may name partitions (the Java client names those it acknowledges when it closes);
    their acknowledgements are applied, nothing is fetched, and the session ends and releases."""
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(0, [_topic(TOPIC.topic_id, 0, 1)]))
    response = run(share_fetch.share_fetch, gw, _fetch(-1, [
        _topic(TOPIC.topic_id, 0), _topic(TOPIC.topic_id, 1, batches=[(0, 0, (1,))])]))
    assert response.error_code == ErrorCode.none
    assert [(p.partition_index, p.acknowledge_error_code) for t in response.responses for p in t.partitions] == [
        (1, ErrorCode.none.value)]
    assert partitions.calls[1][1].max_wait_ms == 0
    assert partitions.calls[1][2] == [SharePartitionCall("t", 1, TOPIC.topic_id, (AcknowledgementBatch(0, 0, (1,)),), False)]
    assert partitions.calls[2:] == [
        ("release", "g", MEMBER, [("t", 0), ("t", 1)]),
        ("evict", "g", [("t", 0), ("t", 1)], 7),
    ]
    assert len(gw.share_sessions) == 0


def test_a_final_share_fetch_naming_partitions_without_acknowledgements_only_closes():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(0, [_topic(TOPIC.topic_id, 0)]))
    response = run(share_fetch.share_fetch, gw, _fetch(-1, [_topic(TOPIC.topic_id, 0, 1)]))
    assert response.error_code == ErrorCode.none and response.responses == ()
    assert [c[0] for c in partitions.calls] == ["fetch", "release", "evict"]
    assert partitions.calls[1] == ("release", "g", MEMBER, [("t", 0)])
