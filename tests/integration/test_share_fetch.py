"""ShareFetch over two partition leaders, spoken raw with kio: one request's MaxRecords is one
budget over all its partitions (Kafka's ShareFetchUtils.processFetchResponse), wherever they
are led. Records go one per batch, so the batch-granular soft limit is exact here."""

from __future__ import annotations

import json
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
