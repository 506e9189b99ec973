"""Produce to the internal topics on a live cluster (issue 10): each internal partition is answered
INVALID_TOPIC_EXCEPTION, Kafka's answer to a client appending to an internal topic
(ReplicaManager.appendRecords), on a connection that stays open and goes on serving."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import encode_records
from tests.clients import create_topic
from tests.kio_client import KioClient


def test_produce_to_internal_topics_is_refused_per_partition_and_the_connection_serves_on(cluster):
    create_topic(cluster.bootstrap, "plain", 1)
    batch = encode_records([(0, b"k", b"v")], 1_700_000_000_000)
    with KioClient(cluster.bootstrap) as client:
        for _ in range(2):
            body = {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
                {"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": batch}]},
                {"name": "__share_group_state", "partition_data": [{"index": 0, "records": batch}]},
                {"name": "plain", "partition_data": [{"index": 0, "records": batch}]},
            ]}
            response = client.call(ApiKey.PRODUCE, 9, body)
            answers = {t.name: t.partition_responses[0].error_code for t in response.responses}
            assert answers == {
                "__consumer_offsets": ErrorCode.invalid_topic_exception,
                "__share_group_state": ErrorCode.invalid_topic_exception,
                "plain": ErrorCode.none,
            }
        listed = client.call(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "plain", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].offset == 2
