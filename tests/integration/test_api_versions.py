"""ApiVersions tells the truth: every advertised version of every API works against a live gateway.

Clients exercise only the versions they negotiate; this walks every version in SUPPORTED with
raw kio requests, so a range is never advertised that a client could not use.
"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import SUPPORTED, ApiKey
from cluster.recordbatch import encode_records
from tests.kio_client import KioClient


def versions(api: ApiKey) -> list[int]:
    lo, hi = SUPPORTED[api]
    return list(range(lo, hi + 1))


def test_api_versions_lists_exactly_supported(cluster):
    with KioClient(cluster.bootstrap) as client:
        for v in versions(ApiKey.API_VERSIONS):
            body = {"client_software_name": "t", "client_software_version": "1"}
            response = client.call(ApiKey.API_VERSIONS, v, body)
            assert response.error_code == ErrorCode.none
            assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == dict(SUPPORTED)


@pytest.fixture(scope="module")
def topic(cluster) -> tuple[str, uuid.UUID]:
    with KioClient(cluster.bootstrap) as client:
        response = client.call(
            ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "versions", "num_partitions": 2, "replication_factor": 1}]}
        )
        (created,) = response.topics
        assert created.error_code == ErrorCode.none
        return "versions", created.topic_id


def test_every_metadata_version(cluster, topic):
    name, topic_id = topic
    with KioClient(cluster.bootstrap) as client:
        for v in versions(ApiKey.METADATA):
            body = {"topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": False}
            response = client.call(ApiKey.METADATA, v, body)
            (t,) = response.topics
            assert t.error_code == ErrorCode.none and len(t.partitions) == 2, v
            assert len(response.brokers) == 2
            if v >= 10:
                assert t.topic_id == topic_id
            if v >= 13:  # KIP-1102's top-level error: none (REBOOTSTRAP_REQUIRED is never needed)
                assert response.error_code == ErrorCode.none
        by_id = client.call(ApiKey.METADATA, 12, {"topics": [{"name": None, "topic_id": topic_id}]})
        assert by_id.topics[0].name == name


def test_every_produce_fetch_and_list_offsets_version(cluster, topic):
    name, topic_id = topic
    with KioClient(cluster.bootstrap) as client:
        produced = 0
        for v in versions(ApiKey.PRODUCE):
            batch = encode_records([(0, b"k%d" % v, b"produce v%d" % v)], 1_700_000_000_000 + v)
            topic_ref = {"topic_id": topic_id} if v >= 13 else {"name": name}  # KIP-516: by id from v13
            body = {"acks": -1, "timeout": 5000, "topic_data": [{**topic_ref, "partition_data": [{"index": 0, "records": batch}]}]}
            response = client.call(ApiKey.PRODUCE, v, body)
            part = response.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.none and part.base_offset == produced, v
            if v >= 13:
                assert response.responses[0].topic_id == topic_id
            produced += 1
        for v in versions(ApiKey.FETCH):
            topic_field = {"topic_id": topic_id} if v >= 13 else {"topic": name}
            body = {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "topics": [{**topic_field, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
            }
            response = client.call(ApiKey.FETCH, v, body)
            part = response.responses[0].partitions[0]
            assert part.error_code == ErrorCode.none and part.high_watermark == produced, v
            assert part.records and b"produce v" in part.records
        for v in versions(ApiKey.LIST_OFFSETS):
            # latest; earliest local (v8+: the log start, no tiered storage); latest tiered (v9+: none, -1)
            specs = [(-1, produced)] + ([(-4, 0)] if v >= 8 else []) + ([(-5, -1)] if v >= 9 else [])
            for timestamp, expected in specs:
                body = {"replica_id": -1, "timeout": 5000,
                        "topics": [{"name": name, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]}
                response = client.call(ApiKey.LIST_OFFSETS, v, body)
                part = response.topics[0].partitions[0]
                assert part.error_code == ErrorCode.none and part.offset == expected, (v, timestamp)


def test_every_offset_commit_and_offset_fetch_version(cluster, topic):
    """A group of committed offsets only (no member, generation -1), each version committing its
    own offset and every OffsetFetch version reading it back; from v10 both name topics by id."""
    name, topic_id = topic

    def topic_ref(v: int, bound: int) -> dict:
        return {"topic_id": topic_id} if v >= bound else {"name": name}

    with KioClient(cluster.bootstrap) as client:
        for v in versions(ApiKey.OFFSET_COMMIT):
            body = {"group_id": "offsets-v", "generation_id_or_member_epoch": -1, "member_id": "",
                    "retention_time": -1,
                    "topics": [{**topic_ref(v, 10), "partitions": [{"partition_index": 1, "committed_offset": 100 + v}]}]}
            (t,) = client.call(ApiKey.OFFSET_COMMIT, v, body).topics
            assert t.partitions[0].error_code == ErrorCode.none, v
            if v >= 10:
                assert t.topic_id == topic_id
        last = 100 + versions(ApiKey.OFFSET_COMMIT)[-1]
        for v in versions(ApiKey.OFFSET_FETCH):
            wanted = [{**topic_ref(v, 10), "partition_indexes": [1]}]
            if v >= 8:
                response = client.call(ApiKey.OFFSET_FETCH, v, {"groups": [{"group_id": "offsets-v", "topics": wanted}]})
                (t,) = response.groups[0].topics
            else:
                (t,) = client.call(ApiKey.OFFSET_FETCH, v, {"group_id": "offsets-v", "topics": wanted}).topics
            assert t.partitions[0].committed_offset == last, v
            if v >= 10:
                assert t.topic_id == topic_id
        unknown = uuid.UUID(int=12345)
        body = {"group_id": "offsets-v", "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [{"topic_id": unknown, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}
        (t,) = client.call(ApiKey.OFFSET_COMMIT, 10, body).topics
        assert (t.topic_id, t.partitions[0].error_code) == (unknown, ErrorCode.unknown_topic_id)


def test_every_describe_groups_version_of_an_unknown_group(cluster):
    with KioClient(cluster.bootstrap) as client:
        for v in versions(ApiKey.DESCRIBE_GROUPS):
            (group,) = client.call(ApiKey.DESCRIBE_GROUPS, v, {"groups": ["never-was"]}).groups
            assert group.group_state == "Dead", v
            # KIP-1043: from v6 an unknown group is GROUP_ID_NOT_FOUND, with Kafka's message.
            expected = (ErrorCode.group_id_not_found, "Group never-was not found.") if v >= 6 else (ErrorCode.none, None)
            assert (group.error_code, getattr(group, "error_message", None)) == expected, v


def test_every_topic_admin_version(cluster):
    with KioClient(cluster.bootstrap) as client:
        for v in versions(ApiKey.CREATE_TOPICS):
            body = {"topics": [{"name": f"admin-v{v}", "num_partitions": 1, "replication_factor": -1}], "timeout": 5000}
            assert client.call(ApiKey.CREATE_TOPICS, v, body).topics[0].error_code == ErrorCode.none, v
        for v in versions(ApiKey.CREATE_PARTITIONS):
            body = {"topics": [{"name": f"admin-v{2 + v}", "count": 3, "assignments": None}], "timeout": 5000, "validate_only": False}
            assert client.call(ApiKey.CREATE_PARTITIONS, v, body).results[0].error_code == ErrorCode.none, v
        for v in versions(ApiKey.DELETE_TOPICS):
            name = f"admin-v{2 + v - 1}"
            body = {"topic_names": [name], "topics": [{"name": name, "topic_id": None}], "timeout": 5000}
            response = client.call(ApiKey.DELETE_TOPICS, v, body)
            assert response.responses[0].error_code == ErrorCode.none, v


def test_every_partition_reassignment_version(cluster, topic):
    """One data directory: partitions keep one copy, unregistered, so there is nothing to move
    (tests/e2e/test_replicated_partitions.py moves replicas across nodes)."""
    name, _ = topic
    with KioClient(cluster.bootstrap) as client:
        for v in versions(ApiKey.ALTER_PARTITION_REASSIGNMENTS):
            body = {"timeout": 5000, "allow_replication_factor_change": True, "topics": [
                {"name": name, "partitions": [{"partition_index": 0, "replicas": [0]}, {"partition_index": 1, "replicas": None}]},
                {"name": "no-such-topic", "partitions": [{"partition_index": 0, "replicas": [0]}]},
            ]}
            response = client.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, body)
            assert response.error_code == ErrorCode.none, v
            ours, unknown = response.responses
            assert [(p.partition_index, p.error_code) for p in ours.partitions] == [
                (0, ErrorCode.invalid_replica_assignment), (1, ErrorCode.invalid_replica_assignment)], v
            assert "one copy" in ours.partitions[0].error_message
            assert unknown.partitions[0].error_code == ErrorCode.unknown_topic_or_partition, v
        for v in versions(ApiKey.LIST_PARTITION_REASSIGNMENTS):
            for topics in (None, [{"name": name, "partition_indexes": [0, 1]}]):
                response = client.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, v, {"timeout": 5000, "topics": topics})
                assert response.error_code == ErrorCode.none and response.topics == (), v


def test_every_describe_cluster_and_find_coordinator_version(cluster):
    with KioClient(cluster.bootstrap) as client:
        for v in versions(ApiKey.DESCRIBE_CLUSTER):
            body = {"include_cluster_authorized_operations": False, "include_fenced_brokers": True}
            response = client.call(ApiKey.DESCRIBE_CLUSTER, v, body)
            assert response.error_code == ErrorCode.none and len(response.brokers) == 2
            if v >= 2:  # gateways are never fenced: asking for fenced brokers lists the same ones
                assert [b.is_fenced for b in response.brokers] == [False, False]
        for v in versions(ApiKey.FIND_COORDINATOR):
            response = client.call(ApiKey.FIND_COORDINATOR, v, {"key": "g", "key_type": 0, "coordinator_keys": ["g"]})
            entry = response.coordinators[0] if v >= 4 else response
            assert entry.error_code == ErrorCode.none and entry.port in cluster.ports, v


def test_acks_zero_gets_no_response_and_the_record_is_written(cluster, topic):
    name, _ = topic
    with KioClient(cluster.bootstrap) as client:
        batch = encode_records([(0, b"fire", b"and forget")], 1_700_000_000_000)
        produce = {"acks": 0, "timeout": 5000, "topic_data": [{"name": name, "partition_data": [{"index": 1, "records": batch}]}]}
        from cluster.gateway.apis import build, request_class

        # Send without waiting for an answer, then a ListOffsets: the next frame must answer the latter.
        request = build(request_class(ApiKey.PRODUCE, 9), produce)
        import io
        import struct

        from kio.schema.request_header.v2.header import RequestHeader
        from kio.serial import entity_writer

        buf = io.BytesIO()
        entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=0, request_api_version=9, correlation_id=999, client_id="t"))
        entity_writer(type(request))(buf, request)
        client.sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        end = 0
        for _ in range(50):
            body = {"replica_id": -1, "topics": [{"name": name, "partitions": [{"partition_index": 1, "timestamp": -1}]}]}
            end = client.call(ApiKey.LIST_OFFSETS, 8, body).topics[0].partitions[0].offset
            if end == 1:
                break
        assert end == 1
