"""ShareFetch spoken raw with kio: one request's MaxRecords is one budget over all its partitions
(Kafka's ShareFetchUtils.processFetchResponse), wherever they are led (records go one per batch,
so the batch-granular soft limit is exact); and a share session belongs to the connection that
created it (Kafka's ShareSessionCache.connectionIdToSessionMap), through a reconnect race; and
version 2: record_limit acquisition (KIP-1206) and RENEW acknowledgements (KIP-1222)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from tests.clients import confluent_produce, create_topic
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.share_runs import wait_until

MAX_RECORDS = 40
PER_PARTITION = 150


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(
        tmp_path_factory.mktemp("share-fetch"),
        "--config", "share.auto.offset.reset=earliest",
        "--config", "group.share.heartbeat.interval.ms=500",
        # lets a group lock records for a short while (Kafka's lowest is 15 s by default)
        "--config", "group.share.min.record.lock.duration.ms=1000",
    ).start()
    yield proc
    proc.stop()


def leaders(cluster, topic: str) -> set[str]:
    result = cluster.cli("status", "--json")
    assert result.returncode == 0, result.stderr
    return {x["actor"] for x in json.loads(result.stdout)["leaders"] if x["topic"] == topic}


def join(client: KioClient, group: str, member: str, topic: str, partitions: int) -> None:
    """ShareGroupHeartbeat until the member is assigned every partition (the share state is
    initialized by then)."""
    epoch = 0

    def assigned() -> bool:
        nonlocal epoch
        body = {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                "subscribed_topic_names": [topic] if epoch == 0 else None}
        r = client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)
        assert r.error_code == ErrorCode.none, r
        epoch = r.member_epoch
        return r.assignment is not None and sum(len(t.partitions) for t in r.assignment.topic_partitions) == partitions

    wait_until(assigned, timeout=30, interval=0.5, what="an assignment")


def test_one_share_fetch_acquires_at_most_max_records_over_two_leaders(cluster):
    topic, group, member = "share-budget", "sg-budget", str(uuid.uuid4())
    create_topic(cluster.bootstrap, topic, 2)
    assert len(leaders(cluster, topic)) == 2
    confluent_produce(cluster.bootstrap, topic, [(i % 2, None, b"v", []) for i in range(2 * PER_PARTITION)],
                      **{"batch.num.messages": 1})
    with KioClient(cluster.bootstrap) as client:
        join(client, group, member, topic, 2)
        meta = client.call(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False})
        topic_id = meta.topics[0].topic_id
        acks: dict[int, list[dict]] = {}
        seen: dict[int, set[int]] = {0: set(), 1: set()}
        epoch, counts = 0, []
        while sum(len(s) for s in seen.values()) < 2 * PER_PARTITION and len(counts) < 100:
            r = client.call(ApiKey.SHARE_FETCH, 1, {
                "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 2000,
                "min_bytes": 1, "max_bytes": 52_428_800, "max_records": MAX_RECORDS, "batch_size": MAX_RECORDS,
                "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition_index": p, "acknowledgement_batches": acks.get(p, [])} for p in (0, 1)]}],
                "forgotten_topics_data": [],
            })
            assert r.error_code == ErrorCode.none, r
            epoch += 1
            acks, count = {}, 0
            for t in r.responses:
                for p in t.partitions:
                    assert p.error_code == ErrorCode.none and p.acknowledge_error_code == ErrorCode.none, p
                    for a in p.acquired_records:
                        offsets = set(range(a.first_offset, a.last_offset + 1))
                        assert not offsets & seen[p.partition_index]  # nothing delivered twice
                        seen[p.partition_index] |= offsets
                        count += len(offsets)
                        acks.setdefault(p.partition_index, []).append(
                            {"first_offset": a.first_offset, "last_offset": a.last_offset, "acknowledge_types": [1]})
            counts.append(count)
    assert seen == {0: set(range(PER_PARTITION)), 1: set(range(PER_PARTITION))}
    assert max(counts) <= MAX_RECORDS, counts
    # Both leaders had records all along: polls took the whole budget, not half of it.
    assert counts[0] == MAX_RECORDS, counts


def gateway_connections(cluster) -> int:
    """Client connections the gateway has open (this CLI call's own included), as it counts them
    in connection_lost, right before it ends the sessions the connection created."""
    result = cluster.cli("status", "--json")
    assert result.returncode == 0, result.stderr
    return sum(a["connections"] for a in json.loads(result.stdout)["actors"] if a["kind"] == "gateway")


def share_fetch_request(group: str, member: str, epoch: int, topic_id, max_records: int) -> dict:
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 2000,
            "min_bytes": 1, "max_bytes": 52_428_800, "max_records": max_records, "batch_size": max_records,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []}


def acquired_offsets(response) -> list[int]:
    assert response.error_code == ErrorCode.none, response
    return [o for t in response.responses for p in t.partitions for a in p.acquired_records
            for o in range(a.first_offset, a.last_offset + 1)]


def test_a_reconnect_race_leaves_the_new_share_session_and_its_records_held(cluster):
    """The member's session was created on connection A; it reconnects on B and opens epoch 0; a
    request of the new session still under way on A is served there; then A's close is processed.
    That close ends nothing (the session A created was replaced), so what the member holds stays
    held: its acknowledgement on B succeeds."""
    topic, group, member = "share-reconnect", "sg-reconnect", str(uuid.uuid4())
    create_topic(cluster.bootstrap, topic, 1)
    confluent_produce(cluster.bootstrap, topic, [(0, None, b"v", []) for _ in range(10)], **{"batch.num.messages": 1})
    with KioClient(cluster.bootstrap) as b:
        join(b, group, member, topic, 1)
        meta = b.call(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False})
        topic_id = meta.topics[0].topic_id
        a = KioClient(cluster.bootstrap)
        held = acquired_offsets(a.call(ApiKey.SHARE_FETCH, 1, share_fetch_request(group, member, 0, topic_id, 3)))
        held += acquired_offsets(b.call(ApiKey.SHARE_FETCH, 1, share_fetch_request(group, member, 0, topic_id, 3)))
        assert sorted(held) == list(range(6))  # the replaced session's records stay with the member
        late = a.call(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": group, "member_id": member, "share_session_epoch": 1, "topics": []})
        assert late.error_code == ErrorCode.none, late
        open_now = gateway_connections(cluster)
        a.close()
        wait_until(lambda: gateway_connections(cluster) < open_now, what="the gateway to process A's close")
        acked = b.call(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": group, "member_id": member, "share_session_epoch": 2, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 5, "acknowledge_types": [1]}]}]}]})
        assert acked.error_code == ErrorCode.none, acked
        assert [(p.partition_index, p.error_code) for t in acked.responses for p in t.partitions] == [(0, ErrorCode.none)]


# Renewals come every sixth of a lock: a loaded machine may hold one back by seconds and the lock
# still stands (every half lock left a second of margin, too little on two busy cores).
GROUP_LOCK_MS = 6000
RENEW_EVERY_S = GROUP_LOCK_MS / 6000


def test_v2_record_limit_takes_exactly_max_records_and_renew_keeps_them_locked(cluster):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic, group, member = "share-v2", "sg-v2", str(uuid.uuid4())
    create_topic(cluster.bootstrap, topic, 1)
    # One producer batch: record_limit has to cut inside it.
    confluent_produce(cluster.bootstrap, topic, [(0, None, b"v", []) for _ in range(20)], **{"linger.ms": 200})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.record.lock.duration.ms", str(GROUP_LOCK_MS), incremental_operation=AlterConfigOpType.SET)])
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(30)
    with KioClient(cluster.bootstrap) as client:
        join(client, group, member, topic, 1)
        meta = client.call(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False})
        topic_id = meta.topics[0].topic_id
        epoch = 0

        def fetch(max_records: int, acks=(), renew: bool = False):
            nonlocal epoch
            body = share_fetch_request(group, member, epoch, topic_id, max_records)
            body |= {"share_acquire_mode": 1, "is_renew_ack": renew}
            body["topics"][0]["partitions"][0]["acknowledgement_batches"] = list(acks)
            if renew:
                body |= {"max_wait": 0, "min_bytes": 0, "max_bytes": 0, "max_records": 0}
            r = client.call(ApiKey.SHARE_FETCH, 2, body)
            epoch += 1
            return r

        first = []
        deadline = time.monotonic() + 30
        while not first and time.monotonic() < deadline:
            r = fetch(5)
            first = acquired_offsets(r)
        assert first == [0, 1, 2, 3, 4]  # exactly MaxRecords, out of a batch of 20
        assert r.acquisition_lock_timeout.total_seconds() * 1000 == GROUP_LOCK_MS
        renew = {"first_offset": 0, "last_offset": 4, "acknowledge_types": [4]}

        # Renew, through both requests, until well past the first lock's end. (Time itself is what
        # is tested here: the lock must outlive its own duration.)
        started = time.monotonic()
        while time.monotonic() - started < 1.5 * GROUP_LOCK_MS / 1000:
            time.sleep(RENEW_EVERY_S)
            r = client.call(ApiKey.SHARE_ACKNOWLEDGE, 2, {
                "group_id": group, "member_id": member, "share_session_epoch": epoch, "is_renew_ack": True,
                "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [renew]}]}]})
            epoch += 1
            assert r.error_code == ErrorCode.none, r
            assert r.acquisition_lock_timeout.total_seconds() * 1000 == GROUP_LOCK_MS
            assert [p.error_code for t in r.responses for p in t.partitions] == [ErrorCode.none], r
        r = fetch(0, [renew], renew=True)
        assert r.error_code == ErrorCode.none and acquired_offsets(r) == []  # a renewing fetch fetches nothing
        assert [p.acknowledge_error_code for t in r.responses for p in t.partitions] == [ErrorCode.none], r

        # Still this member's: ACCEPT succeeds (an expired lock would make it INVALID_RECORD_STATE),
        # and the next record_limit fetch goes on exactly from the cut.
        r = fetch(3, [{"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}])
        assert [p.acknowledge_error_code for t in r.responses for p in t.partitions] == [ErrorCode.none], r
        assert acquired_offsets(r) == [5, 6, 7]
