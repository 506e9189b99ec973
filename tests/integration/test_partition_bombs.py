"""Partition bombs on a live cluster (issue 10): CreateTopics with num_partitions 2^31-1 and
CreatePartitions to 2^31-1 get POLICY_VIOLATION at once, validate_only too, and the cluster keeps
answering: a produce and a consume right after work."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from tests.clients import confluent_consume_all, confluent_produce, create_topic, records
from tests.kio_client import KioClient

BOMB = 2_147_483_647


def test_partition_bombs_are_refused_at_once_and_the_cluster_keeps_serving(cluster):
    # Raw requests: librdkafka refuses a count above 100,000 before sending it, kio sends anything.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    create_topic(cluster.bootstrap, "small", 1)
    started = time.monotonic()
    with KioClient(cluster.bootstrap) as client:
        for validate_only in (False, True):
            created = client.call(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 30_000, "validate_only": validate_only, "topics": [
                {"name": "bomb", "num_partitions": BOMB, "replication_factor": 1, "assignments": [], "configs": []}]})
            assert [(t.name, t.error_code) for t in created.topics] == [("bomb", ErrorCode.policy_violation)]
            grown = client.call(ApiKey.CREATE_PARTITIONS, 3, {"timeout_ms": 30_000, "validate_only": validate_only,
                                                               "topics": [{"name": "small", "count": BOMB, "assignments": None}]})
            assert [(r.name, r.error_code) for r in grown.results] == [("small", ErrorCode.policy_violation)]
    assert time.monotonic() - started < 10
    assert "bomb" not in admin.list_topics(timeout=10).topics
    assert len(admin.list_topics(timeout=10).topics["small"].partitions) == 1

    create_topic(cluster.bootstrap, "after", 2)
    sent = confluent_produce(cluster.bootstrap, "after", records(20, 2, "after"))
    got = confluent_consume_all(cluster.bootstrap, "after", 2, len(sent))
    assert sorted((r.partition, r.offset) for r in got) == sorted((r.partition, r.offset) for r in sent)
