"""OffsetCommit's answer is built from its kio classes, no longer from dicts by `build_response`: for
every supported version the bytes and the coordinator's request are those of the dict-built handler
kept here as the reference (unknown topics and partitions, duplicates, per-partition errors, a
failed call)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coordinator.classic.messages import CommitPartition, OffsetCommitRequest, OffsetCommitResponse
from cluster.calls import CoordinatorOp as Op
from cluster.calls import Failed
from cluster.entity_writer import encode_entity
from cluster.gateway.apis import SUPPORTED, ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.handlers import groups
from cluster.gateway.handlers.common import partition_known, refresh_if_unknown
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo

from tests.unit.gateway.fakes import FakeCoordinators, gateway, request


async def reference_offset_commit(gw: Any, req: Any) -> Any:
    """The handler as it was at c60e85c, before its answer was built from kio classes."""
    b, v = req.body, req.api_version
    await refresh_if_unknown(gw, [t.name for t in b.topics])
    known: list[tuple[str, tuple[CommitPartition, ...]]] = []
    answers: dict[tuple[str, int], ErrorCode] = {}
    for t in b.topics:
        parts = []
        for p in t.partitions:
            if not partition_known(gw, t.name, p.partition_index):
                answers[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            parts.append(
                CommitPartition(
                    p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
                )
            )
        if parts:
            known.append((t.name, tuple(parts)))
    if known:
        retention = groups.ms(b.retention_time) if 2 <= v <= 4 else -1
        commit = OffsetCommitRequest(
            group_id=b.group_id,
            generation_id=b.generation_id_or_member_epoch,
            member_id=b.member_id,
            group_instance_id=getattr(b, "group_instance_id", None),
            topics=tuple(known),
            retention_time_ms=retention,
            api_version=v,
        )
        outcome = await gw.coordinators.group(Op.COMMIT, b.group_id, commit)
        for topic, parts in known:
            for p in parts:
                if isinstance(outcome, Failed):
                    answers[(topic, p.partition)] = outcome.error_code
        if not isinstance(outcome, Failed):
            for topic, parts in outcome.topics:
                for partition, error in parts:
                    answers[(topic, partition)] = error
    return build_response(
        ApiKey.OFFSET_COMMIT,
        v,
        {
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": answers[(t.name, p.partition_index)]}
                        for p in t.partitions
                    ],
                }
                for t in b.topics
            ]
        },
    )


def _leadership(topics: dict[str, int]) -> Leadership:
    infos = [TopicInfo(name, uuid.uuid4(), count, False, {}) for name, count in topics.items()]
    return Leadership(version=1, cluster_id="c", gateways=[], topics={i.name: i for i in infos}, leaders={},
                      handles={}, topics_by_id={i.topic_id: i for i in infos})


ERRORS = [ErrorCode.none, ErrorCode.illegal_generation, ErrorCode.unknown_member_id, ErrorCode.offset_metadata_too_large]


def _coordinator(errors: list[ErrorCode], failed: ErrorCode | None) -> tuple[FakeCoordinators, list[Any]]:
    seen: list[Any] = []

    def commit(group_id: str, req: OffsetCommitRequest) -> Any:
        seen.append(req)
        if failed is not None:
            return Failed(failed, "down")
        answers, i = [], 0
        for topic, parts in req.topics:
            row = []
            for p in parts:
                row.append((p.partition, errors[i % len(errors)]))
                i += 1
            answers.append((topic, tuple(row)))
        return OffsetCommitResponse(tuple(answers))

    return FakeCoordinators({Op.COMMIT: commit}), seen


def _body(version: int, topics: list[tuple[str, list[int]]]) -> dict[str, Any]:
    body: dict[str, Any] = {"group_id": "g", "generation_id_or_member_epoch": 3, "member_id": "m-1", "topics": [
        {"name": name, "partitions": [
            {"partition_index": p, "committed_offset": 100 + p, "committed_metadata": f"md{p}" if p % 2 else None,
             **({"committed_leader_epoch": 7} if version >= 6 else {})}
            for p in parts]}
        for name, parts in topics]}
    if 2 <= version <= 4:
        body["retention_time"] = 60_000
    if version >= 7:
        body["group_instance_id"] = "static-1"
    return body


def _both(version: int, topics: list[tuple[str, list[int]]], errors: list[ErrorCode], failed: ErrorCode | None) -> Any:
    results = []
    for handler in (reference_offset_commit, groups.offset_commit):
        coordinators, seen = _coordinator(errors, failed)
        gw = gateway(coordinators, leadership=_leadership({"a": 3, "b": 1}))
        response = asyncio.run(handler(gw, request(ApiKey.OFFSET_COMMIT, version, _body(version, topics))))
        results.append((encode_entity(response), response, seen))
    return results


# The versions that name topics by name, as the reference does; v10 names them by id
# (test_group_handlers.py's v10 test, and test_api_versions against a cluster).
VERSIONS = range(SUPPORTED[ApiKey.OFFSET_COMMIT][0], min(SUPPORTED[ApiKey.OFFSET_COMMIT][1], 9) + 1)


def test_every_version_answers_the_same_bytes_as_the_dict_built_answer():
    for version in VERSIONS:
        topics = [("a", [0, 2, 5]), ("missing", [0]), ("b", [0, -1])]
        (old_bytes, old, old_seen), (new_bytes, new, new_seen) = _both(version, topics, ERRORS, None)
        assert new_bytes == old_bytes and new == old, version
        assert new_seen == old_seen and len(new_seen) == 1
        assert [p.error_code for p in new.topics[1].partitions] == [ErrorCode.unknown_topic_or_partition]


def test_a_failed_call_answers_its_error_for_every_known_partition_as_before():
    for version in VERSIONS:
        topics = [("a", [1, 9]), ("b", [0])]
        (old_bytes, _, _), (new_bytes, new, _) = _both(version, topics, ERRORS, ErrorCode.coordinator_load_in_progress)
        assert new_bytes == old_bytes
        assert [p.error_code for t in new.topics for p in t.partitions] == [
            ErrorCode.coordinator_load_in_progress, ErrorCode.unknown_topic_or_partition, ErrorCode.coordinator_load_in_progress]


def test_only_unknown_partitions_ask_no_coordinator():
    (old_bytes, _, old_seen), (new_bytes, _, new_seen) = _both(9, [("missing", [0]), ("a", [3])], ERRORS, None)
    assert new_bytes == old_bytes and old_seen == new_seen == []


def test_an_unknown_topic_refreshes_the_routes_once_and_is_then_known():
    for handler in (reference_offset_commit, groups.offset_commit):
        coordinators, seen = _coordinator([ErrorCode.none], None)
        gw = gateway(coordinators, leadership=_leadership({}))
        refreshes = []

        async def refresh(gw: Any = gw) -> None:
            refreshes.append(1)
            gw.leadership = _leadership({"late": 1})

        gw.router.refresh = refresh
        response = asyncio.run(handler(gw, request(ApiKey.OFFSET_COMMIT, 9, _body(9, [("late", [0])]))))
        assert refreshes == [1] and response.topics[0].partitions[0].error_code == ErrorCode.none


_topic = st.tuples(st.sampled_from(["a", "b", "missing"]), st.lists(st.integers(-1, 4), max_size=4))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    version=st.sampled_from(list(VERSIONS)),
    topics=st.lists(_topic, max_size=4),
    errors=st.lists(st.sampled_from(ERRORS), min_size=1, max_size=4),
    failed=st.none() | st.sampled_from([ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator]),
)
def test_any_request_duplicates_included_gets_the_reference_bytes(version, topics, errors, failed):
    (old_bytes, old, old_seen), (new_bytes, new, new_seen) = _both(version, topics, errors, failed)
    assert new_bytes == old_bytes and new == old and new_seen == old_seen
