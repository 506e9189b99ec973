"""Counts a client chooses, bounded with Kafka's answers (issue 10): Fetch's max_bytes is cut to
Kafka's fetch.max.bytes default, and a partition named twice in ListOffsets is INVALID_REQUEST."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import fetch
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo
from tests.unit.gateway.fakes import gateway, request, run
from tests.unit.test_fetch_handler import FakePartitions

TOPIC = TopicInfo("t", uuid.uuid4(), 2, False, {})


def _gw(partitions: FakePartitions):
    return gateway(partitions=partitions, leadership=Leadership(1, "c", [], {"t": TOPIC}, {}, {}))


def test_fetch_max_bytes_is_cut_to_kafkas_fetch_max_bytes_default():
    partitions = FakePartitions()
    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 2**31 - 1, "current_leader_epoch": -1}
    for version, asked in ((12, 2**31 - 1), (4, 2**31 - 1), (12, 1 << 20)):
        body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": asked, "topics": [{"topic": "t", "partitions": [part]}]}
        run(fetch.fetch, _gw(partitions), request(ApiKey.FETCH, version, body))
    assert [f[3] for f in partitions.fetches] == [57_671_680, 57_671_680, 1 << 20]


def test_a_partition_named_twice_in_list_offsets_is_invalid_request_each_time_as_in_kafka():
    partitions = FakePartitions()
    p0 = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
    response = run(fetch.list_offsets, _gw(partitions), request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": "t", "partitions": [p0, p0]}, {"name": "t", "partitions": [{**p0, "partition_index": 1}, p0]}],
    }))
    answers = [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions]
    assert sorted(answers) == [(0, ErrorCode.invalid_request)] * 3 + [(1, ErrorCode.not_leader_or_follower)]
    assert partitions.list_offsets_calls == [("t", 1, -1, -1)]
