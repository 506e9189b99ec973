"""The classic member's state machine, request by request (seeds 002/003, SPEC.md §2 client side)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import assign_offset, encode_records
from loadtest.members.classic import ClassicConfig, ClassicMember, ClassicState
from loadtest.members.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, encode_subscription
from tests.unit.members.harness import BOOT, COORD, LEADER, Harness

TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=7)


def member(**config) -> Harness:
    defaults = dict(heartbeat_interval_ms=3_000, commit_interval_ms=0)  # auto-commit only where a test asks
    return Harness(ClassicMember("g/c000", BOOT, ClassicConfig("g", [TOPIC], **{**defaults, **config})))


def metadata(h: Harness, partitions: int = 4) -> None:
    send = h.take(ApiKey.METADATA)
    h.answer(send, brokers=[{"node_id": 0, "host": LEADER.host, "port": LEADER.port, "rack": None}], topics=[
        {"error_code": ErrorCode.none, "name": TOPIC, "topic_id": TOPIC_ID, "is_internal": False, "partitions": [
            {"error_code": ErrorCode.none, "partition_index": p, "leader_id": 0, "leader_epoch": 1,
             "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []} for p in range(partitions)]}])


def batch(base_offset: int, count: int) -> bytes:
    data = bytearray(encode_records([(i, b"k", b"v") for i in range(count)], 1_700_000_000_000))
    assign_offset(data, base_offset, 0)
    return bytes(data)


def stable(h: Harness, partitions: list[int], committed: dict[int, int] | None = None, generation: int = 1,
           leader: bool = True, others: dict[str, list[str]] | None = None) -> None:
    """Walk a fresh member through FindCoordinator, JoinGroup (twice), SyncGroup and its start positions."""
    h.find_coordinator()
    first = h.take(ApiKey.JOIN_GROUP)
    assert first.body["member_id"] == ""
    h.answer(first, error_code=ErrorCode.member_id_required, member_id="m-1", generation_id=-1)
    join = h.take(ApiKey.JOIN_GROUP)
    assert join.body["member_id"] == "m-1" and join.to == COORD
    members = [{"member_id": "m-1", "metadata": join.body["protocols"][0]["metadata"]}]
    members += [{"member_id": m, "metadata": encode_subscription(ts)} for m, ts in (others or {}).items()]
    h.answer(join, error_code=ErrorCode.none, generation_id=generation, protocol_name="range",
             leader="m-1" if leader else "m-0", member_id="m-1", members=members if leader else [])
    if leader:
        metadata(h)
    sync = h.take(ApiKey.SYNC_GROUP)
    h.answer(sync, error_code=ErrorCode.none, assignment=encode_assignment({TOPIC: partitions}))
    assert h.m.state is ClassicState.STABLE
    fetch = h.take(ApiKey.OFFSET_FETCH)
    committed = committed or {}
    h.answer(fetch, error_code=ErrorCode.none, topics=[{"name": TOPIC, "partitions": [
        {"partition_index": p, "committed_offset": committed.get(p, -1), "error_code": ErrorCode.none}
        for p in partitions]}])
    missing = [p for p in partitions if p not in committed]
    if missing:
        if not h.pending(ApiKey.LIST_OFFSETS):
            metadata(h)
        reset = h.take(ApiKey.LIST_OFFSETS)
        assert [p["timestamp"] for t in reset.body["topics"] for p in t["partitions"]] == [-2] * len(missing)
        h.answer(reset, topics=[{"name": TOPIC, "partitions": [
            {"partition_index": p, "error_code": ErrorCode.none, "offset": 0, "timestamp": -1} for p in missing]}])


def test_the_leader_joins_with_the_id_it_is_given_assigns_and_starts_each_partition_where_committed():
    h = member()
    stable(h, [0, 1], committed={0: 5}, others={"m-2": [TOPIC]})
    sync_plan = h.kinds("rebalance_end")
    assert sync_plan[-1]["generation"] == 1 and sync_plan[-1]["detail"] == {"assignment": {TOPIC: [0, 1]}}
    positions = {(e["partition"], e["offset"], e["detail"]["source"]) for e in h.kinds("position")}
    assert positions == {(0, 5, "committed"), (1, 0, "reset")}
    assert h.m.positions == {(TOPIC, 0): 5, (TOPIC, 1): 0}


def test_the_leaders_sync_carries_the_range_plan_for_every_member():
    h = member()
    h.find_coordinator()
    h.answer(h.take(ApiKey.JOIN_GROUP), error_code=ErrorCode.member_id_required, member_id="m-1")
    join = h.take(ApiKey.JOIN_GROUP)
    h.answer(join, error_code=ErrorCode.none, generation_id=3, protocol_name="range", leader="m-1", member_id="m-1",
             members=[{"member_id": "m-1", "metadata": join.body["protocols"][0]["metadata"]},
                      {"member_id": "m-2", "metadata": encode_subscription([TOPIC])}])
    metadata(h, partitions=4)
    sync = h.take(ApiKey.SYNC_GROUP)
    plan = {a["member_id"]: decode_assignment(a["assignment"]) for a in sync.body["assignments"]}
    assert plan == {"m-1": {TOPIC: [0, 1]}, "m-2": {TOPIC: [2, 3]}}
    assert sync.body["generation_id"] == 3


def test_fetch_hands_over_each_record_from_the_position_on_and_auto_commit_commits_the_position():
    h = member(commit_interval_ms=1_000)
    stable(h, [0], committed={0: 5})
    fetch = h.take(ApiKey.FETCH)
    assert fetch.to == LEADER and fetch.body["topics"][0]["partitions"][0]["fetch_offset"] == 5
    h.answer(fetch, responses=[{"topic": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": 10, "records": batch(3, 7)}]}])
    assert [e["offset"] for e in h.kinds("delivery")] == [5, 6, 7, 8, 9]
    assert all(e["generation"] == 1 for e in h.kinds("delivery"))
    h.advance(1_000)
    commit = h.take(ApiKey.OFFSET_COMMIT)
    assert commit.body["topics"][0]["partitions"][0]["committed_offset"] == 10
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "error_code": ErrorCode.none}]}])
    assert [(e["offset"], e["error"]) for e in h.kinds("commit")] == [(10, "NONE")]


def test_rebalance_in_progress_eager_commits_then_gives_up_everything_then_rejoins():
    h = member()
    stable(h, [0], committed={0: 5})
    fetch = h.take(ApiKey.FETCH)
    h.advance(3_000)
    heartbeat = h.take(ApiKey.HEARTBEAT)
    h.answer(heartbeat, error_code=ErrorCode.rebalance_in_progress)
    assert h.m.state is ClassicState.REVOKING
    commit = h.take(ApiKey.OFFSET_COMMIT)
    assert not h.pending(ApiKey.JOIN_GROUP)  # no join before the commit is answered
    # A fetch answered after the revocation began hands nothing over: those records were not committed.
    h.answer(fetch, responses=[{"topic": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": 10, "records": batch(5, 5)}]}])
    assert h.kinds("delivery") == []
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "error_code": ErrorCode.none}]}])
    join = h.take(ApiKey.JOIN_GROUP)
    assert join.body["member_id"] == "m-1" and h.m.assignment == {}
    assert h.kinds("rebalance_start")[-1]["detail"] == {"reason": "REBALANCE_IN_PROGRESS"}


@pytest.mark.parametrize("error", [ErrorCode.illegal_generation, ErrorCode.unknown_member_id])
def test_a_member_left_out_of_the_generation_loses_its_partitions_without_committing(error):
    h = member()
    stable(h, [0], committed={0: 5})
    h.advance(3_000)
    h.answer(h.take(ApiKey.HEARTBEAT), error_code=error)
    assert not h.pending(ApiKey.OFFSET_COMMIT)
    join = h.take(ApiKey.JOIN_GROUP)
    assert join.body["member_id"] == ("" if error == ErrorCode.unknown_member_id else "m-1")
    assert h.m.positions == {} and h.m.assignment == {}
    assert h.kinds("rebalance_start")[-1]["detail"] == {"reason": error.name.upper()}


def test_a_moved_coordinator_is_looked_up_again_and_the_member_keeps_its_generation():
    h = member()
    stable(h, [0], committed={0: 5})
    h.advance(3_000)
    h.answer(h.take(ApiKey.HEARTBEAT), error_code=ErrorCode.not_coordinator)
    assert any(c.to == COORD and c.lane == "coordinator" for c in h.closed)
    h.advance(100)
    h.find_coordinator()
    heartbeat = h.take(ApiKey.HEARTBEAT)
    assert heartbeat.body["generation_id"] == 1 and heartbeat.body["member_id"] == "m-1"
    assert h.m.state is ClassicState.STABLE
    assert len(h.kinds("rebalance_start")) == 1  # the first join only: no rebalance


def test_a_join_with_no_answer_times_out_drops_its_connection_and_is_sent_again():
    h = member(rebalance_timeout_ms=10_000)
    h.find_coordinator()
    join = h.take(ApiKey.JOIN_GROUP)
    h.advance(15_001)
    assert any(c.lane == "coordinator" for c in h.closed)
    timeouts = [e for e in h.kinds("response") if e["error"] == "REQUEST_TIMED_OUT"]
    assert [e["correlation"] for e in timeouts] == [join.request_id]
    h.advance(200)
    h.find_coordinator()
    assert h.take(ApiKey.JOIN_GROUP).request_id != join.request_id


def test_cooperative_sticky_keeps_partitions_through_the_rebalance_and_revokes_only_what_moves():
    h = member(assignor="cooperative-sticky")
    stable(h, [0, 1, 2, 3], committed={p: 10 for p in range(4)})
    h.take(ApiKey.FETCH)
    h.advance(3_000)
    h.answer(h.take(ApiKey.HEARTBEAT), error_code=ErrorCode.rebalance_in_progress)
    join = h.take(ApiKey.JOIN_GROUP)
    topics, owned = decode_subscription(join.body["protocols"][0]["metadata"])
    assert owned == {TOPIC: [0, 1, 2, 3]}  # KIP-429: what it owns rides in the subscription
    assert h.m.positions  # still reading
    h.answer(join, error_code=ErrorCode.none, generation_id=2, protocol_name="cooperative-sticky", leader="m-0",
             member_id="m-1", members=[])
    h.answer(h.take(ApiKey.SYNC_GROUP), error_code=ErrorCode.none, assignment=encode_assignment({TOPIC: [0, 1]}))
    commit = h.take(ApiKey.OFFSET_COMMIT)
    assert sorted(p["partition_index"] for p in commit.body["topics"][0]["partitions"]) == [2, 3]
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [{"partition_index": p, "error_code": ErrorCode.none}
                                                           for p in (2, 3)]}])
    assert h.m.assignment == {TOPIC: [0, 1]}
    second = h.take(ApiKey.JOIN_GROUP)
    assert decode_subscription(second.body["protocols"][0]["metadata"])[1] == {TOPIC: [0, 1]}
    assert h.kinds("rebalance_start")[-1]["detail"] == {"reason": "revoked"}
    assert not h.pending(ApiKey.OFFSET_FETCH)  # partitions 0 and 1 never moved: no new start position


def test_fenced_instance_id_stops_the_member():
    h = member(group_instance_id="static-1")
    h.find_coordinator()
    h.answer(h.take(ApiKey.JOIN_GROUP), error_code=ErrorCode.fenced_instance_id)
    assert h.m.state is ClassicState.STOPPED and h.m.stopped
    assert h.kinds("member_stop")[-1]["detail"] == {"reason": "FENCED_INSTANCE_ID"}


def test_leave_commits_what_was_read_then_leaves_the_group():
    h = member()
    stable(h, [0], committed={0: 5})
    h.m.leave(h.now)
    h._collect()
    commit = h.take(ApiKey.OFFSET_COMMIT)
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "error_code": ErrorCode.none}]}])
    leave = h.take(ApiKey.LEAVE_GROUP)
    assert leave.body["members"][0]["member_id"] == "m-1"
    h.answer(leave, error_code=ErrorCode.none, members=[])
    assert h.m.stopped


def _rejoin_as_leader(h: Harness, generation: int) -> None:
    """A heartbeat learns of a rebalance; the member rejoins and is elected leader again."""
    h.advance(3_000)
    h.answer(h.take(ApiKey.HEARTBEAT), error_code=ErrorCode.rebalance_in_progress)
    h.answer(h.take(ApiKey.OFFSET_COMMIT), topics=[])
    join = h.take(ApiKey.JOIN_GROUP)
    h.answer(join, error_code=ErrorCode.none, generation_id=generation, protocol_name="range", leader="m-1",
             member_id="m-1", members=[{"member_id": "m-1", "metadata": join.body["protocols"][0]["metadata"]}])


@pytest.mark.parametrize("age_ms, fetches", [(0, False), (300_000, True)])
def test_a_leader_assigns_from_the_metadata_it_holds_unless_it_is_older_than_its_max_age(age_ms, fetches):
    """As Kafka's consumer: no Metadata round trip on the rebalance's critical path while the
    leader's metadata of every subscribed topic is younger than metadata.max.age.ms."""
    h = member(fetch=False)
    stable(h, [0, 1, 2, 3], committed={p: 0 for p in range(4)})
    h.advance(age_ms)
    _rejoin_as_leader(h, generation=2)
    assert bool(h.pending(ApiKey.METADATA)) is fetches
    if fetches:
        metadata(h)
    sync = h.take(ApiKey.SYNC_GROUP)
    assert decode_assignment(sync.body["assignments"][0]["assignment"]) == {TOPIC: [0, 1, 2, 3]}


def _commit_answered(h: Harness) -> None:
    commit = h.take(ApiKey.OFFSET_COMMIT)
    h.answer(commit, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "error_code": ErrorCode.none}]}])


def test_back_to_back_commits_send_the_next_when_the_last_is_answered_and_never_pile_up():
    h = member(commit_interval_ms=1, commit_back_to_back=True, fetch=False)
    stable(h, [0], committed={0: 5})
    h.advance(1)
    assert len(h.pending(ApiKey.OFFSET_COMMIT)) == 1
    h.advance(50)  # the interval passes many times while the commit is unanswered: still one
    assert len(h.pending(ApiKey.OFFSET_COMMIT)) == 1
    _commit_answered(h)
    h.advance(0)  # the next goes out at once, with no interval in between
    assert len(h.pending(ApiKey.OFFSET_COMMIT)) == 1
    _commit_answered(h)
    assert [e["error"] for e in h.kinds("commit")] == ["NONE", "NONE"]


def test_interval_commits_wait_for_the_interval_after_an_answer():
    h = member(commit_interval_ms=1_000, fetch=False)
    stable(h, [0], committed={0: 5})
    h.advance(1_000)
    _commit_answered(h)
    h.advance(0)
    assert not h.pending(ApiKey.OFFSET_COMMIT)
    h.advance(1_000)
    assert len(h.pending(ApiKey.OFFSET_COMMIT)) == 1


def test_a_dead_bootstrap_broker_is_left_when_several_requests_to_it_fail_at_once():
    """Seen in the fault-kinds scenario (node loss): a member's FindCoordinator and Metadata to the
    same dead gateway failed together; each failure moved the bootstrap index one on, so with two
    brokers it came back to the dead one every round, 12 s of NETWORK_EXCEPTION until the member's
    session expired. A failure moves past the broker that failed, once."""
    from loadtest.members.machine import Broker, Machine

    brokers = [Broker("a", 1), Broker("b", 2)]
    machine = Machine("m", None, brokers)
    first = machine.send(0, ApiKey.FIND_COORDINATOR, 4, {}, machine.any_broker(), "bootstrap", lambda *a: None)
    second = machine.send(0, ApiKey.METADATA, 12, {}, machine.any_broker(), "bootstrap", lambda *a: None)
    machine.fail(first, ErrorCode.network_exception, 1)
    machine.fail(second, ErrorCode.network_exception, 1)
    assert machine.any_broker() == brokers[1]
    late = machine.send(2, ApiKey.METADATA, 12, {}, brokers[0], "bootstrap", lambda *a: None)
    machine.fail(late, ErrorCode.network_exception, 3)  # a late failure of the one already left
    assert machine.any_broker() == brokers[1]
