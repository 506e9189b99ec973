"""The KIP-848 consumer member (loadtest/members/consumer.py), request by request: joining,
heartbeats with only what changed, revoking before taking, fencing and rejoining, leaving, and a
regular-expression subscription."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import assign_offset, encode_records
from loadtest.members.consumer import ConsumerConfig, ConsumerMember, ConsumerState
from loadtest.members.machine import Send
from tests.unit.members.harness import BOOT, COORD, LEADER, Harness

HEARTBEAT = ApiKey.CONSUMER_GROUP_HEARTBEAT
TOPIC, OTHER = "orders", "payments"
TOPIC_ID, OTHER_ID = uuid.UUID(int=7), uuid.UUID(int=8)
IDS = {TOPIC: TOPIC_ID, OTHER: OTHER_ID}
INTERVAL_MS = 2_000


def member(**config) -> Harness:
    settings = {"topics": [TOPIC], "commit_interval_ms": 0, **config}  # auto-commit only where a test asks
    return Harness(ConsumerMember("g/k000", BOOT, ConsumerConfig("g", **settings)))


def assignment(partitions: dict[uuid.UUID, list[int]]) -> dict:
    return {"topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in partitions.items()]}


def answer(h: Harness, send: Send, epoch: int, partitions: dict[uuid.UUID, list[int]] | None = None,
           error: ErrorCode = ErrorCode.none) -> None:
    h.answer(send, error_code=error, member_id=h.m.member_id, member_epoch=epoch,
             heartbeat_interval=datetime.timedelta(milliseconds=INTERVAL_MS),
             assignment=None if partitions is None else assignment(partitions))


def metadata(h: Harness, topics: tuple[str, ...] = (TOPIC,), partitions: int = 4) -> Send:
    send = h.take(ApiKey.METADATA)
    h.answer(send, brokers=[{"node_id": 0, "host": LEADER.host, "port": LEADER.port, "rack": None}], topics=[
        {"error_code": ErrorCode.none, "name": t, "topic_id": IDS[t], "is_internal": False, "partitions": [
            {"error_code": ErrorCode.none, "partition_index": p, "leader_id": 0, "leader_epoch": 1,
             "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []} for p in range(partitions)]}
        for t in topics])
    return send


def offsets(h: Harness, committed: dict[int, int], topic: str = TOPIC) -> Send:
    send = h.take(ApiKey.OFFSET_FETCH)
    asked = [p for t in send.body["groups"][0]["topics"] for p in t["partition_indexes"]]
    h.answer(send, groups=[{"group_id": "g", "error_code": ErrorCode.none, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "committed_offset": committed[p], "metadata": "", "error_code": ErrorCode.none}
        for p in asked]}]}])
    return send


def owned(send: Send) -> dict[uuid.UUID, list[int]] | None:
    partitions = send.body["topic_partitions"]
    return None if partitions is None else {t["topic_id"]: t["partitions"] for t in partitions}


def stable(h: Harness, partitions: list[int], committed: dict[int, int] | None = None, epoch: int = 1) -> None:
    """Walk a fresh member through FindCoordinator, the join, its start positions and the acknowledgement."""
    committed = {p: 5 for p in partitions} if committed is None else committed
    h.find_coordinator()
    answer(h, h.take(HEARTBEAT), epoch, {TOPIC_ID: partitions})
    metadata(h)
    offsets(h, committed)
    ack = h.take(HEARTBEAT)
    assert owned(ack) == {TOPIC_ID: partitions}
    answer(h, ack, epoch)
    assert h.m.state is ConsumerState.STABLE


def batch(base_offset: int, count: int) -> bytes:
    data = bytearray(encode_records([(i, b"k", b"v") for i in range(count)], 1_700_000_000_000))
    assign_offset(data, base_offset, 0)
    return bytes(data)


def test_it_joins_at_epoch_0_with_its_own_member_id_and_every_field():
    h = member(server_assignor="range", rebalance_timeout_ms=60_000)
    h.find_coordinator()
    join = h.take(HEARTBEAT)
    assert join.version == 1 and join.to == COORD and join.lane == "coordinator"
    body = join.body
    assert body["member_epoch"] == 0 and body["member_id"] == h.m.member_id
    assert len(body["member_id"]) == 22  # a UUID in Kafka's URL-safe base64, made by the client (KIP-1082)
    assert body["subscribed_topic_names"] == [TOPIC] and body["subscribed_topic_regex"] is None
    assert (body["rebalance_timeout"], body["server_assignor"]) == (60_000, "range")
    assert body["topic_partitions"] == []
    answer(h, join, 3, {TOPIC_ID: [0, 1]})
    assert h.m.member_epoch == 3 and h.m.state is ConsumerState.RECONCILING
    metadata(h)  # topic ids to names
    assert h.kinds("assignment")[-1]["detail"] == {"assignment": {TOPIC: [0, 1]}, "reason": "assigned",
                                                   "assigned": {TOPIC: [0, 1]}}
    fetch_offsets = h.take(ApiKey.OFFSET_FETCH)
    assert fetch_offsets.version == 9
    assert {k: fetch_offsets.body["groups"][0][k] for k in ("group_id", "member_id", "member_epoch")} == \
        {"group_id": "g", "member_id": h.m.member_id, "member_epoch": 3}
    # The acknowledgement goes at once, before the committed offsets are back: it lists what it owns.
    ack = h.take(HEARTBEAT)
    assert ack.body["member_epoch"] == 3 and owned(ack) == {TOPIC_ID: [0, 1]}
    assert h.m.state is ConsumerState.ACKNOWLEDGING
    answer(h, ack, 3)
    assert h.m.state is ConsumerState.STABLE
    assert h.kinds("rebalance_end")[-1]["generation"] == 3
    assert h.kinds("rebalance_start")[0]["detail"] == {"reason": "join"}


def test_later_heartbeats_send_only_what_changed_at_the_interval_given_and_all_again_after_a_failure():
    h = member()
    stable(h, [0], committed={0: 5})
    assert not h.pending(HEARTBEAT)
    h.advance(INTERVAL_MS - 1)
    assert not h.pending(HEARTBEAT)
    h.advance(1)
    beat = h.take(HEARTBEAT)
    assert beat.body["member_epoch"] == 1
    assert [beat.body[k] for k in ("subscribed_topic_names", "subscribed_topic_regex", "server_assignor",
                                   "topic_partitions", "rack_id", "instance_id")] == [None] * 6
    assert beat.body["rebalance_timeout"] == -1
    h.fail(beat, ErrorCode.request_timed_out)
    h.advance(h.m.retry_backoff_ms)
    h.find_coordinator()  # no answer: the coordinator may have moved
    again = h.take(HEARTBEAT)
    assert again.body["subscribed_topic_names"] == [TOPIC] and owned(again) == {TOPIC_ID: [0]}
    assert again.body["rebalance_timeout"] == 300_000 and again.body["member_epoch"] == 1


def test_it_fetches_from_the_committed_offset_and_commits_with_its_member_epoch():
    h = member(commit_interval_ms=1_000)
    stable(h, [0], committed={0: 5}, epoch=4)
    fetch = h.take(ApiKey.FETCH)
    assert fetch.to == LEADER and fetch.body["topics"][0]["partitions"][0]["fetch_offset"] == 5
    h.answer(fetch, responses=[{"topic": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": 10, "records": batch(5, 5)}]}])
    assert [(e["offset"], e["generation"], e["role"]) for e in h.kinds("delivery")] == \
        [(o, 4, "consumer") for o in range(5, 10)]
    h.advance(1_000)
    commit = h.take(ApiKey.OFFSET_COMMIT)
    assert commit.version == 9
    assert (commit.body["member_id"], commit.body["generation_id_or_member_epoch"]) == (h.m.member_id, 4)
    assert commit.body["topics"][0]["partitions"][0]["committed_offset"] == 10


def test_a_revocation_commits_and_is_acknowledged_before_anything_new_is_taken():
    h = member()
    stable(h, [0, 1], committed={0: 5, 1: 7})
    fetch = h.take(ApiKey.FETCH)
    h.advance(INTERVAL_MS)
    # The coordinator takes partition 0 away and gives partition 2 in one answer (as it would not:
    # it holds 2 back until 0 is revoked; the member keeps Kafka's order anyway).
    answer(h, h.take(HEARTBEAT), 2, {TOPIC_ID: [1, 2]})
    assert h.m.state is ConsumerState.RECONCILING
    assert h.kinds("rebalance_start")[-1]["detail"] == {"reason": "assignment"}
    commit = h.take(ApiKey.OFFSET_COMMIT)
    assert [p["partition_index"] for p in commit.body["topics"][0]["partitions"]] == [0]
    assert commit.body["generation_id_or_member_epoch"] == 2
    assert not h.pending(ApiKey.OFFSET_FETCH) and not h.pending(HEARTBEAT)  # nothing new before the revocation
    # A fetch answered meanwhile hands nothing of partition 0 over: it is being given up.
    h.answer(fetch, responses=[{"topic": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": 10, "records": batch(5, 5)}]}])
    assert h.kinds("delivery") == []
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "error_code": ErrorCode.none}]}])
    revoked, assigned = h.kinds("assignment")[-2:]
    assert (revoked["detail"]["reason"], revoked["detail"]["revoked"], revoked["detail"]["assignment"]) == \
        ("revoked", {TOPIC: [0]}, {TOPIC: [1]})
    assert (assigned["detail"]["reason"], assigned["detail"]["assigned"]) == ("assigned", {TOPIC: [2]})
    assert revoked["time"] <= assigned["time"] and h.events.index(revoked) < h.events.index(assigned)
    ack = h.take(HEARTBEAT)
    assert owned(ack) == {TOPIC_ID: [1, 2]}
    fetch_offsets = h.take(ApiKey.OFFSET_FETCH)
    assert [t["partition_indexes"] for t in fetch_offsets.body["groups"][0]["topics"]] == [[2]]
    answer(h, ack, 2)
    assert h.m.state is ConsumerState.STABLE and h.m.assignment == {TOPIC: [1, 2]}


def test_a_revocation_alone_is_acknowledged_at_once_with_the_partitions_left():
    h = member()
    stable(h, [0, 1])
    h.advance(INTERVAL_MS)
    answer(h, h.take(HEARTBEAT), 1, {TOPIC_ID: [1]})
    h.answer(h.take(ApiKey.OFFSET_COMMIT), topics=[{"name": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none}]}])
    ack = h.take(HEARTBEAT)
    assert owned(ack) == {TOPIC_ID: [1]} and ack.body["member_epoch"] == 1
    answer(h, ack, 2)  # revoked: the coordinator moves it to the group's epoch
    assert h.m.state is ConsumerState.STABLE and h.m.member_epoch == 2
    assert h.kinds("rebalance_end")[-1]["generation"] == 2


@pytest.mark.parametrize("error", [ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id])
def test_a_fenced_member_loses_everything_without_a_commit_and_joins_again_with_the_same_id(error):
    h = member(commit_interval_ms=INTERVAL_MS + 1_000)
    stable(h, [0, 1])
    member_id = h.m.member_id
    h.advance(INTERVAL_MS)
    answer(h, h.take(HEARTBEAT), 1, error=error)
    assert not h.pending(ApiKey.OFFSET_COMMIT)
    assert h.m.positions == {} and h.m.assignment == {}
    (fenced,) = h.kinds("fenced")
    assert (fenced["error"], fenced["generation"]) == (error.name.upper(), 1)
    lost = h.kinds("assignment")[-1]["detail"]
    assert (lost["reason"], lost["lost"], lost["assignment"]) == ("lost", {TOPIC: [0, 1]}, {})
    assert lost["heartbeat_answered_sent_ms"] is not None and lost["revocation_asked_ms"] is None
    join = h.take(HEARTBEAT)
    assert (join.body["member_id"], join.body["member_epoch"], join.body["topic_partitions"]) == (member_id, 0, [])
    assert join.body["subscribed_topic_names"] == [TOPIC]
    assert h.m.state is ConsumerState.JOINING
    assert h.kinds("rebalance_start")[-1]["detail"] == {"reason": "fenced"}
    h.advance(1_000)
    assert not h.pending(ApiKey.OFFSET_COMMIT)  # nothing is owned: the auto-commit has nothing to say


def test_a_member_fenced_while_it_revokes_says_since_when_it_was_asked_to():
    h = member()
    stable(h, [0, 1])
    h.advance(INTERVAL_MS)
    asked = h.now
    answer(h, h.take(HEARTBEAT), 1, {TOPIC_ID: [1]})
    commit = h.take(ApiKey.OFFSET_COMMIT)
    h.advance(INTERVAL_MS)
    answered = h.now
    answer(h, h.take(HEARTBEAT), 1, error=ErrorCode.fenced_member_epoch)
    lost = h.kinds("assignment")[-1]["detail"]
    assert (lost["reason"], lost["lost"]) == ("lost", {TOPIC: [0, 1]})
    assert (lost["revocation_asked_ms"], lost["heartbeat_answered_sent_ms"]) == (asked, answered - INTERVAL_MS)
    # The revocation's commit answers late: nothing comes of it.
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.fenced_member_epoch}]}])
    assert [e["detail"]["reason"] for e in h.kinds("assignment")][-1] == "lost"
    assert h.m.state is ConsumerState.JOINING


def test_a_commit_refused_as_stale_goes_again_after_the_next_heartbeat_with_its_epoch():
    h = member(commit_interval_ms=1_500)
    stable(h, [0], committed={0: 5})
    h.advance(1_500)
    commit = h.take(ApiKey.OFFSET_COMMIT)
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.stale_member_epoch}]}])
    assert not h.pending(ApiKey.OFFSET_COMMIT)
    h.advance(INTERVAL_MS - 1_500)
    answer(h, h.take(HEARTBEAT), 2)
    again = h.take(ApiKey.OFFSET_COMMIT)
    assert again.body["generation_id_or_member_epoch"] == 2


def test_leaving_commits_then_heartbeats_at_epoch_minus_1_and_stops():
    h = member()
    stable(h, [0], committed={0: 5})
    h.m.leave(h.now)
    h._collect()
    commit = h.take(ApiKey.OFFSET_COMMIT)
    assert not h.pending(HEARTBEAT)
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "error_code": ErrorCode.none}]}])
    leave = h.take(HEARTBEAT)
    assert (leave.body["member_epoch"], leave.body["member_id"], leave.body["instance_id"]) == (-1, h.m.member_id, None)
    assert h.kinds("assignment")[-1]["detail"]["reason"] == "revoked" and h.m.assignment == {}
    answer(h, leave, -1)
    assert h.m.stopped and h.m.state is ConsumerState.STOPPED


def test_a_static_member_says_its_instance_id_every_time_and_leaves_at_epoch_minus_2():
    h = member(group_instance_id="static-1")
    h.find_coordinator()
    join = h.take(HEARTBEAT)
    assert join.body["instance_id"] == "static-1"
    answer(h, join, 1, {})
    assert h.m.state is ConsumerState.STABLE
    h.advance(INTERVAL_MS)
    assert h.take(HEARTBEAT).body["instance_id"] == "static-1"
    h.m.leave(h.now)
    h._collect()
    leave = h.take(HEARTBEAT)
    assert (leave.body["member_epoch"], leave.body["instance_id"]) == (-2, "static-1")


def test_a_member_leaving_while_its_join_is_unanswered_still_says_it_leaves():
    h = member()
    h.find_coordinator()
    join = h.take(HEARTBEAT)
    h.m.leave(h.now)
    h._collect()
    leave = h.take(HEARTBEAT)
    assert (leave.body["member_epoch"], leave.body["member_id"]) == (-1, join.body["member_id"])
    answer(h, join, 1, {TOPIC_ID: [0]})  # the join's late answer changes nothing
    assert h.m.assignment == {} and not h.pending(ApiKey.METADATA)
    answer(h, leave, -1)
    assert h.m.stopped


def test_a_member_that_never_found_its_coordinator_just_stops():
    h = member()
    h.m.leave(h.now)
    h._collect()
    assert h.m.stopped and not h.pending(HEARTBEAT)


def test_a_leave_nobody_answers_gives_up_after_its_timeout_and_says_what_was_lost():
    h = member(leave_timeout_ms=3_000)
    stable(h, [0])
    h.m.leave(h.now)
    h._collect()
    h.take(ApiKey.OFFSET_COMMIT)
    h.advance(3_000)
    assert h.m.stopped
    assert h.kinds("assignment")[-1]["detail"]["reason"] == "lost"


def test_a_regex_subscription_sends_the_regex_and_learns_the_topic_names_from_metadata_by_id():
    h = member(topics=[], topic_regex="pay.*|ord.*")
    h.find_coordinator()
    join = h.take(HEARTBEAT)
    assert join.body["subscribed_topic_regex"] == "pay.*|ord.*" and join.body["subscribed_topic_names"] is None
    answer(h, join, 1, {OTHER_ID: [0], TOPIC_ID: [1]})
    lookup = h.take(ApiKey.METADATA)
    assert {t["topic_id"] for t in lookup.body["topics"]} == {TOPIC_ID, OTHER_ID}
    h.outbox.insert(0, lookup)
    metadata(h, topics=(TOPIC, OTHER))
    assert h.m.assignment == {OTHER: [0], TOPIC: [1]}
    ack = h.take(HEARTBEAT)
    assert owned(ack) == {OTHER_ID: [0], TOPIC_ID: [1]} and ack.body["subscribed_topic_regex"] is None
    h.advance(INTERVAL_MS)
    # Later heartbeats leave the regex out: it did not change.
    answer(h, ack, 1)
    h.advance(INTERVAL_MS)
    assert h.take(HEARTBEAT).body["subscribed_topic_regex"] is None


def test_a_moved_coordinator_is_looked_up_again_and_the_member_keeps_its_epoch_and_partitions():
    h = member()
    stable(h, [0])
    h.advance(INTERVAL_MS)
    answer(h, h.take(HEARTBEAT), 1, error=ErrorCode.not_coordinator)
    assert any(c.to == COORD and c.lane == "coordinator" for c in h.closed)
    h.advance(h.m.retry_backoff_ms)
    h.find_coordinator()
    beat = h.take(HEARTBEAT)
    assert beat.body["member_epoch"] == 1 and owned(beat) == {TOPIC_ID: [0]}  # full: the last one failed
    assert h.m.assignment == {TOPIC: [0]} and h.kinds("fenced") == []


def test_an_error_no_retry_fixes_stops_the_member():
    h = member()
    h.find_coordinator()
    answer(h, h.take(HEARTBEAT), 0, error=ErrorCode.group_max_size_reached)
    assert h.m.stopped and h.m.fatal == ErrorCode.group_max_size_reached
    assert h.kinds("member_stop")[-1]["detail"] == {"reason": "GROUP_MAX_SIZE_REACHED"}


def test_a_consumer_subscribes_to_names_or_to_a_regex():
    with pytest.raises(ValueError):
        ConsumerConfig("g", topics=[TOPIC], topic_regex="o.*")
    with pytest.raises(ValueError):
        ConsumerConfig("g")
