"""Answers are built one way (cluster/gateway/answers.py): a Shape per response class and version,
called with typed values or built from a dict, the same entity either way; and no handler builds
an answer any other way."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.answers import answer_shape, build_response
from cluster.gateway.apis import SUPPORTED, ApiKey

ROOT = Path(__file__).resolve().parents[3]
HANDLERS = sorted((ROOT / "cluster/gateway/handlers").glob("*.py"))
# What building an answer another way looks like: kio classes found by hand, or built by the
# generic builder under another name.
OTHER_WAYS = {"response_class", "get_type_hints", "build", "modules"}


@pytest.mark.parametrize("version", range(SUPPORTED[ApiKey.FETCH][0], SUPPORTED[ApiKey.FETCH][1] + 1))
def test_typed_values_and_a_dict_build_the_same_fetch_answer(version):
    shape = answer_shape(ApiKey.FETCH, version)
    topic = shape.of("responses")
    partition = topic.of("partitions")
    name = "topic_id" if topic.has("topic_id") else "topic"
    key = uuid.UUID(int=7) if name == "topic_id" else "orders"
    typed = shape(responses=(topic(**{name: key, "partitions": (
        partition(partition_index=3, error_code=ErrorCode.not_leader_or_follower, high_watermark=9,
                  last_stable_offset=9, records=b"", aborted_transactions=None),)}),))
    built = build_response(ApiKey.FETCH, version, {"responses": [{name: key, "partitions": [
        {"partition_index": 3, "error_code": 6, "high_watermark": 9, "last_stable_offset": 9, "records": b"",
         "aborted_transactions": None}]}]})
    assert typed == built


@pytest.mark.parametrize("version", range(SUPPORTED[ApiKey.OFFSET_COMMIT][0], SUPPORTED[ApiKey.OFFSET_COMMIT][1] + 1))
def test_fields_left_out_take_the_values_the_dict_builder_gives(version):
    assert answer_shape(ApiKey.OFFSET_COMMIT, version)() == build_response(ApiKey.OFFSET_COMMIT, version, {})


def test_a_field_a_version_lacks_is_told_and_a_plain_field_has_no_shape():
    old, new = answer_shape(ApiKey.PRODUCE, 3).of("responses"), answer_shape(ApiKey.PRODUCE, 8).of("responses")
    assert not old.of("partition_responses").has("error_message")
    assert new.of("partition_responses").has("error_message")
    with pytest.raises(TypeError, match="holds no kio entity"):
        answer_shape(ApiKey.PRODUCE, 8).of("throttle_time")


def other_ways(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in ("cluster.gateway.apis", "sys", "typing"):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in OTHER_WAYS]
        elif isinstance(node, ast.Attribute) and node.attr in OTHER_WAYS and isinstance(node.value, ast.Name) \
                and node.value.id in ("sys", "typing", "apis"):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_rule_sees_what_it_forbids(tmp_path):
    sample = tmp_path / "handler.py"
    sample.write_text("import sys, typing\nfrom cluster.gateway.apis import build, response_class\n"
                      "x = sys.modules\ny = typing.get_type_hints\n")
    assert len(other_ways(sample)) == 4


@pytest.mark.parametrize("path", HANDLERS, ids=lambda p: p.name)
def test_handlers_build_answers_only_through_shapes(path):
    assert not other_ways(path), f"{path.name} builds an answer another way: {other_ways(path)}"
