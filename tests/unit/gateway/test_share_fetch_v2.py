"""ShareFetch and ShareAcknowledge v2 (Kafka 4.2): RENEW acknowledgements and IsRenewAck
(KIP-1222, KAFKA-19844), ShareAcquireMode (KIP-1206), and ShareAcknowledge's acquisition lock
timeout (KAFKA-19892), with the fake PartitionLeaderClient of test_share_fetch_handler."""

from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcknowledgementBatch

from cluster.calls import SharePartitionCall
from cluster.gateway.apis import SUPPORTED, ApiKey
from cluster.gateway.handlers import share_fetch

from tests.unit.gateway.fakes import request, run
from tests.unit.test_share_fetch_handler import MEMBER, TOPIC, FakePartitions, _gateway, _topic

RENEW = 4


def _fetch(version: int, epoch: int, topics: list[dict], *, renew: bool = False, mode: int = 0, limits: int = 1) -> object:
    """A ShareFetch; `limits` 0 sends MaxWait, MinBytes, MaxBytes and MaxRecords all 0."""
    body = {
        "group_id": "g", "member_id": MEMBER, "share_session_epoch": epoch, "max_wait": 500 * limits,
        "min_bytes": limits, "max_bytes": (1 << 20) * limits, "max_records": 100 * limits, "batch_size": 100,
        "topics": topics, "forgotten_topics_data": [],
    }
    if version >= 2:
        body |= {"share_acquire_mode": mode, "is_renew_ack": renew}
    req = request(ApiKey.SHARE_FETCH, version, body)
    req.connection_id = 0
    return req


def _acknowledge(version: int, epoch: int, topics: list[dict], renew: bool = False) -> object:
    body = {"group_id": "g", "member_id": MEMBER, "share_session_epoch": epoch, "topics": topics}
    if version >= 2:
        body["is_renew_ack"] = renew
    req = request(ApiKey.SHARE_ACKNOWLEDGE, version, body)
    req.connection_id = 0
    return req


def _renewing(version: int) -> list[dict]:
    return [_topic(TOPIC.topic_id, 0, batches=[(0, 4, (RENEW,))])]


def test_version_2_is_advertised():
    assert SUPPORTED[ApiKey.SHARE_FETCH] == (1, 2) and SUPPORTED[ApiKey.SHARE_ACKNOWLEDGE] == (1, 2)


def test_renew_is_invalid_at_version_1_and_sent_to_the_leader_from_version_2():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(1, 0, [_topic(TOPIC.topic_id, 0)]))
    response = run(share_fetch.share_acknowledge, gw, _acknowledge(1, 1, _renewing(1)))
    assert response.responses[0].partitions[0].error_code == ErrorCode.invalid_request
    assert len(partitions.calls) == 1  # answered here
    response = run(share_fetch.share_acknowledge, gw, _acknowledge(2, 2, _renewing(2), renew=True))
    assert partitions.calls[1][2] == [SharePartitionCall("t", 0, TOPIC.topic_id, (AcknowledgementBatch(0, 4, (RENEW,)),), False)]
    (p,) = response.responses[0].partitions
    assert p.error_code == ErrorCode.none
    # Types past RENEW stay invalid.
    response = run(share_fetch.share_acknowledge, gw, _acknowledge(2, 3, [_topic(TOPIC.topic_id, 0, batches=[(0, 0, (5,))])]))
    assert response.responses[0].partitions[0].error_code == ErrorCode.invalid_request


def test_a_renewing_fetch_only_acknowledges():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(2, 0, [_topic(TOPIC.topic_id, 0, 1)]))
    response = run(share_fetch.share_fetch, gw, _fetch(2, 1, _renewing(2), renew=True, limits=0))
    (_, spec, parts) = partitions.calls[1]
    # Partition 0 carries the RENEW and is not fetched; partition 1, in the session, is not called at all.
    assert parts == [SharePartitionCall("t", 0, TOPIC.topic_id, (AcknowledgementBatch(0, 4, (RENEW,)),), False)]
    assert spec.max_wait_ms == 0
    assert response.error_code == ErrorCode.none
    assert response.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none.value


def test_a_renewing_fetch_must_ask_for_nothing():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(2, 0, [_topic(TOPIC.topic_id, 0)]))
    response = run(share_fetch.share_fetch, gw, _fetch(2, 1, _renewing(2), renew=True, limits=1))
    assert response.error_code == ErrorCode.invalid_request and response.responses == ()
    assert len(partitions.calls) == 1  # nothing reached the leaders


def test_share_acquire_mode_record_limit_reaches_the_leaders_and_unknown_modes_are_invalid():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    run(share_fetch.share_fetch, gw, _fetch(2, 0, [_topic(TOPIC.topic_id, 0)], mode=1))
    assert partitions.calls[0][1].record_limit is True and partitions.calls[0][1].max_records == 100
    run(share_fetch.share_fetch, gw, _fetch(2, 1, [], mode=0))
    assert partitions.calls[1][1].record_limit is False
    response = run(share_fetch.share_fetch, gw, _fetch(2, 2, [], mode=2))
    assert response.error_code == ErrorCode.invalid_request
    assert len(partitions.calls) == 2


def test_share_acknowledge_v2_answers_the_groups_lock_duration():
    partitions = FakePartitions()
    gw = _gateway(partitions)
    gw.leadership.group_configs["g"] = {"share.record.lock.duration.ms": "15000"}
    run(share_fetch.share_fetch, gw, _fetch(2, 0, [_topic(TOPIC.topic_id, 0)]))
    response = run(share_fetch.share_acknowledge, gw, _acknowledge(2, 1, _renewing(2), renew=True))
    assert response.acquisition_lock_timeout == timedelta(seconds=15)
    del gw.leadership.group_configs["g"]
    response = run(share_fetch.share_acknowledge, gw, _acknowledge(2, 2, _renewing(2), renew=True))
    assert response.acquisition_lock_timeout == timedelta(seconds=30)  # the broker default
