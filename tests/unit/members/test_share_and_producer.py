"""The share member (KIP-932 client side) and the idempotent producer, request by request."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import assign_offset, encode_records, iter_batches
from loadtest.members.producer import ProducerConfig, ProducerMember
from loadtest.members.share import ShareConfig, ShareMember, ShareState
from tests.unit.members.harness import BOOT, LEADER, Harness

TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=9)


def metadata(h: Harness, partitions: int = 1) -> None:
    h.answer(h.take(ApiKey.METADATA), brokers=[{"node_id": 0, "host": LEADER.host, "port": LEADER.port, "rack": None}],
             topics=[{"error_code": ErrorCode.none, "name": TOPIC, "topic_id": TOPIC_ID, "is_internal": False,
                      "partitions": [{"error_code": ErrorCode.none, "partition_index": p, "leader_id": 0,
                                      "leader_epoch": 1, "replica_nodes": [0], "isr_nodes": [0],
                                      "offline_replicas": []} for p in range(partitions)]}])


def records(base: int, count: int) -> bytes:
    data = bytearray(encode_records([(i, b"k", b"v") for i in range(count)], 1_700_000_000_000))
    assign_offset(data, base, 0)
    return bytes(data)


def share_member(**config) -> Harness:
    h = Harness(ShareMember("sg/s000", BOOT, ShareConfig("sg", [TOPIC], seed=1, **config)))
    h.find_coordinator()
    heartbeat = h.take(ApiKey.SHARE_GROUP_HEARTBEAT)
    assert heartbeat.body["member_epoch"] == 0 and heartbeat.body["subscribed_topic_names"] == [TOPIC]
    h.answer(heartbeat, error_code=ErrorCode.none, member_id=h.m.member_id, member_epoch=3,
             heartbeat_interval=datetime.timedelta(milliseconds=1_000),
             assignment={"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0]}]})
    metadata(h)
    return h


def fetched(h: Harness, send, first: int, last: int, count: int = 1, ack_error: ErrorCode = ErrorCode.none) -> None:
    h.answer(send, error_code=ErrorCode.none, responses=[{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none, "acknowledge_error_code": ack_error,
         "records": records(first, last - first + 1) if last >= first else None,
         "acquired_records": [{"first_offset": first, "last_offset": last, "delivery_count": count}] if last >= first else []}]}])


def test_a_share_member_joins_opens_a_session_and_acknowledges_on_the_next_fetch():
    h = share_member()
    assert h.m.state is ShareState.STABLE and h.m.member_epoch == 3
    first = h.take(ApiKey.SHARE_FETCH)
    assert first.to == LEADER and first.body["share_session_epoch"] == 0
    assert first.body["topics"][0]["partitions"][0]["acknowledgement_batches"] == []
    fetched(h, first, 0, 4)
    assert [(e["offset"], e["delivery_count"]) for e in h.kinds("delivery")] == [(o, 1) for o in range(5)]
    second = h.take(ApiKey.SHARE_FETCH)
    assert second.body["share_session_epoch"] == 1
    assert second.body["topics"][0]["partitions"][0]["acknowledgement_batches"] == [
        {"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]  # ACCEPT (the default mix)
    fetched(h, second, 5, 4)  # nothing new
    assert [(e["offset"], e["ack_type"], e["error"]) for e in h.kinds("ack")] == [(o, "ACCEPT", "NONE") for o in range(5)]
    assert {e["request_time"] for e in h.kinds("ack")} == {h.kinds("request")[-1]["time"]}  # the fetch carrying them


def test_an_acknowledgement_the_leader_refuses_is_observed_as_failed():
    h = share_member(accept=0, release=1)
    fetched(h, h.take(ApiKey.SHARE_FETCH), 0, 1)
    fetched(h, h.take(ApiKey.SHARE_FETCH), 2, 1, ack_error=ErrorCode.invalid_record_state)
    assert [(e["ack_type"], e["error"]) for e in h.kinds("ack")] == [("RELEASE", "INVALID_RECORD_STATE")] * 2


def test_a_broken_session_fails_what_waited_to_be_acknowledged_and_starts_a_new_session():
    h = share_member(processing_ms=50)
    fetched(h, h.take(ApiKey.SHARE_FETCH), 0, 2)
    h.advance(50)
    carrying = h.take(ApiKey.SHARE_FETCH)
    h.fail(carrying)  # the connection broke: the broker released the records
    assert [(e["offset"], e["error"]) for e in h.kinds("ack")] == [(o, "NETWORK_EXCEPTION") for o in range(3)]
    h.advance(200)
    if not h.pending(ApiKey.SHARE_FETCH):
        metadata(h)
    assert h.take(ApiKey.SHARE_FETCH).body["share_session_epoch"] == 0


def test_a_fenced_member_joins_again_with_the_same_id():
    h = share_member()
    h.advance(1_000)
    heartbeat = h.take(ApiKey.SHARE_GROUP_HEARTBEAT)
    h.answer(heartbeat, error_code=ErrorCode.fenced_member_epoch)
    assert h.kinds("fenced")[-1]["error"] == "FENCED_MEMBER_EPOCH"
    again = h.take(ApiKey.SHARE_GROUP_HEARTBEAT)
    assert again.body["member_epoch"] == 0 and again.body["member_id"] == heartbeat.body["member_id"]
    assert again.body["subscribed_topic_names"] == [TOPIC]


def test_leaving_acknowledges_what_is_left_closes_the_session_then_leaves_the_group():
    h = share_member()
    fetched(h, h.take(ApiKey.SHARE_FETCH), 0, 1)
    pending = h.take(ApiKey.SHARE_FETCH)
    h.m.leave(h.now)
    fetched(h, pending, 2, 2)  # the in-flight fetch answers: its record is acknowledged on the way out
    close = h.take(ApiKey.SHARE_ACKNOWLEDGE)
    assert close.body["share_session_epoch"] == -1
    assert close.body["topics"][0]["partitions"][0]["acknowledgement_batches"][0]["first_offset"] == 2
    h.answer(close, error_code=ErrorCode.none, responses=[{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none}]}])
    leave = h.take(ApiKey.SHARE_GROUP_HEARTBEAT)
    assert leave.body["member_epoch"] == -1
    h.answer(leave, error_code=ErrorCode.none, member_id=h.m.member_id, member_epoch=-1)
    assert h.m.stopped


# -- the producer ------------------------------------------------------------------------------


def producer(**config) -> Harness:
    h = Harness(ProducerMember("p", BOOT, ProducerConfig(TOPIC, rate=100, linger_ms=20, **config)))
    metadata(h)
    h.answer(h.take(ApiKey.INIT_PRODUCER_ID), error_code=ErrorCode.none, producer_id=42, producer_epoch=0)
    return h


def produced(h: Harness, send, base_offset: int, error: ErrorCode = ErrorCode.none) -> None:
    h.answer(send, responses=[{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": error, "base_offset": base_offset}]}])


def test_records_made_at_the_rate_go_in_one_idempotent_batch_and_each_is_observed_with_its_offset():
    h = producer()
    h.advance(20)
    send = h.take(ApiKey.PRODUCE)
    assert send.body["acks"] == -1
    (_, header), = iter_batches(send.body["topic_data"][0]["partition_data"][0]["records"])
    assert (header.producer_id, header.base_sequence, header.record_count) == (42, 0, 2)
    produced(h, send, 100)
    assert [(e["offset"], e["key"]) for e in h.kinds("produce")] == [(100, "p:0"), (101, "p:1")]


def test_a_lost_produce_is_sent_again_with_the_same_sequence():
    h = producer()
    h.advance(20)
    first = h.take(ApiKey.PRODUCE)
    h.fail(first)
    h.advance(100)
    if h.pending(ApiKey.METADATA):
        metadata(h)
    again = h.take(ApiKey.PRODUCE)
    assert again.body["topic_data"] == first.body["topic_data"]  # byte for byte: the broker deduplicates it
    produced(h, again, 7)
    assert [e["offset"] for e in h.kinds("produce")] == [7, 8]


def test_a_batch_past_its_delivery_timeout_is_given_up_and_the_producer_takes_a_new_id():
    h = producer(delivery_timeout_ms=500)
    h.advance(20)
    h.fail(h.take(ApiKey.PRODUCE))
    h.advance(600)
    failed = h.kinds("produce_failed")
    assert [e["key"] for e in failed] == ["p:0", "p:1"] and failed[0]["error"] == "REQUEST_TIMED_OUT"
    assert h.pending(ApiKey.INIT_PRODUCER_ID)
