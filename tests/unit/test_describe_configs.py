"""DescribeConfigs and IncrementalAlterConfigs handlers (cluster/gateway/handlers/configs.py) on a
fake gateway: what BROKER, TOPIC and GROUP resources show, Kafka's errors, and which alters reach
the controller. Every response is also written out as its version's bytes."""

from __future__ import annotations

import io
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from cluster.config import SETTINGS, Config
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers.configs import (
    BROKER, DEFAULT_CONFIG, GROUP, GROUP_CONFIG, STATIC_BROKER_CONFIG, TOPIC, describe_configs,
    incremental_alter_configs,
)
from cluster.group_configs import SET, AlterOp
from cluster.leadership import Leadership
from cluster.metadata import TopicInfo
from tests.unit.gateway.fakes import gateway, request, run


class FakeController:
    """The controller client's alter_group_configs: records the call, answers as told."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls: list = []

    async def alter_group_configs(self, changes, validate_only):
        self.calls.append((changes, validate_only))
        return self.answer(changes)


def gw(group_configs=None, answer=lambda changes: [(0, None)] * len(changes)):
    topics = {
        "t": TopicInfo("t", uuid.uuid4(), 2, False, {}),
        "__consumer_offsets": TopicInfo("__consumer_offsets", uuid.uuid4(), 3, True, {}),
    }
    leadership = Leadership(1, "c", [], topics, {})
    leadership.group_configs = group_configs or {}
    g = gateway(leadership=leadership)
    g.config = Config({"message.max.bytes": 2_000_000, "ssl.key.password": "secret"})
    g.node_id = 3
    g.controller = FakeController(answer)
    return g


def describe(g, resources, version=4, synonyms=False, docs=False):
    req = request(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": t, "resource_name": n, "configuration_keys": k} for t, n, k in resources],
        "include_synonyms": synonyms, "include_documentation": docs,
    })
    response = run(describe_configs, g, req)
    entity_writer(type(response))(io.BytesIO(), response)
    return response.results


def configs(result):
    return {c.name: c for c in result.configs}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_broker_lists_every_setting_read_only_with_its_source(version):
    (result,) = describe(gw(), [(BROKER, "3", None)], version=version, synonyms=True, docs=True)
    assert result.error_code == ErrorCode.none
    entries = configs(result)
    assert set(entries) == set(SETTINGS)
    assert all(c.read_only for c in entries.values())
    mmb = entries["message.max.bytes"]
    assert mmb.value == "2000000" and mmb.config_source == STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in mmb.synonyms] == [
        ("message.max.bytes", "2000000", STATIC_BROKER_CONFIG), ("message.max.bytes", "1048588", DEFAULT_CONFIG)]
    assert entries["num.partitions"].value == "1" and entries["num.partitions"].config_source == DEFAULT_CONFIG
    assert entries["auto.create.topics.enable"].value == "true"
    password = entries["ssl.key.password"]
    assert password.is_sensitive and password.value is None
    if version >= 3:
        assert entries["num.partitions"].documentation == SETTINGS["num.partitions"].doc


def test_broker_resource_names_other_brokers_are_invalid_requests():
    g = gw()
    other, word, default = describe(g, [(BROKER, "4", None), (BROKER, "x", None), (BROKER, "", None)])
    assert other.error_code == ErrorCode.invalid_request and "expected 3" in other.error_message
    assert word.error_code == ErrorCode.invalid_request and "integer" in word.error_message
    assert default.error_code == ErrorCode.none and default.configs == ()


def test_configuration_keys_filter_what_is_listed():
    (result,) = describe(gw(), [(BROKER, "3", ("num.partitions", "no.such"))])
    assert list(configs(result)) == ["num.partitions"]


def test_topics_show_what_raygroups_applies():
    user, internal, unknown, bad = describe(
        gw(), [(TOPIC, "t", None), (TOPIC, "__consumer_offsets", None), (TOPIC, "nope", None), (TOPIC, "a/b", None)]
    )
    entries = configs(user)
    assert entries["cleanup.policy"].value == "delete" and entries["retention.ms"].value == "-1"
    assert entries["max.message.bytes"].value == "2000000"
    assert entries["max.message.bytes"].config_source == STATIC_BROKER_CONFIG
    assert entries["segment.bytes"].value == str(64 * 1024 * 1024)
    assert configs(internal)["cleanup.policy"].value == "compact"
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert bad.error_code == ErrorCode.invalid_topic_exception


def test_groups_show_their_overrides_else_the_brokers_values():
    g = gw({"g": {"share.record.lock.duration.ms": "20000"}})
    overridden, plain, unsupported = describe(g, [(GROUP, "g", None), (GROUP, "other", None), (64, "x", None)], synonyms=True)
    lock = configs(overridden)["share.record.lock.duration.ms"]
    assert lock.value == "20000" and lock.config_source == GROUP_CONFIG and not lock.read_only
    assert [s.name for s in lock.synonyms] == ["share.record.lock.duration.ms", "group.share.record.lock.duration.ms"]
    other = configs(plain)
    assert other["share.record.lock.duration.ms"].value == "30000"
    assert other["share.record.lock.duration.ms"].config_source == DEFAULT_CONFIG
    g.config = Config({"group.share.record.lock.duration.ms": 40_000})
    (static,) = describe(g, [(GROUP, "other", None)])
    assert configs(static)["share.record.lock.duration.ms"].config_source == STATIC_BROKER_CONFIG
    assert other["share.auto.offset.reset"].value == "latest" and other["share.delivery.count.limit"].value == "5"
    assert unsupported.error_code == ErrorCode.invalid_request


def test_every_group_setting_is_alterable_and_the_isolation_level_is_described():
    g = gw({"g": {"share.isolation.level": "read_committed", "share.heartbeat.interval.ms": "8000"}})
    overridden, plain = describe(g, [(GROUP, "g", None), (GROUP, "other", None)], synonyms=True, docs=True)
    entries, other = configs(overridden), configs(plain)
    assert not any(c.read_only for c in entries.values())
    assert set(entries) >= {"share.session.timeout.ms", "share.heartbeat.interval.ms", "share.isolation.level"}
    assert entries["share.heartbeat.interval.ms"].value == "8000"
    assert entries["share.heartbeat.interval.ms"].config_source == GROUP_CONFIG
    assert other["share.session.timeout.ms"].value == "45000"
    assert other["share.session.timeout.ms"].config_source == DEFAULT_CONFIG
    isolation = entries["share.isolation.level"]
    assert isolation.value == "read_committed" and isolation.config_source == GROUP_CONFIG
    assert [(s.name, s.value, s.source) for s in isolation.synonyms] == [
        ("share.isolation.level", "read_committed", GROUP_CONFIG)]
    assert isolation.config_type == 2  # STRING
    # Kafka's own default (no broker setting stands behind it); raygroups says what it means here.
    assert other["share.isolation.level"].value == "read_uncommitted"
    assert other["share.isolation.level"].config_source == DEFAULT_CONFIG and other["share.isolation.level"].synonyms == ()
    assert "no transactions" in isolation.documentation and "read_uncommitted" in isolation.documentation


def alter(g, resources, validate_only=False, version=1):
    req = request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, {
        "resources": [
            {"resource_type": t, "resource_name": n,
             "configs": [{"name": c, "config_operation": op, "value": v} for c, op, v in ops]}
            for t, n, ops in resources
        ],
        "validate_only": validate_only,
    })
    response = run(incremental_alter_configs, g, req)
    entity_writer(type(response))(io.BytesIO(), response)
    return [(r.resource_name, r.error_code) for r in response.responses]


def test_group_alters_go_to_the_controller_and_others_get_kafkas_errors():
    g = gw()
    answers = alter(g, [
        (GROUP, "g", [("share.auto.offset.reset", SET, "earliest")]),
        (BROKER, "3", [("num.partitions", SET, "3")]),
        (BROKER, "", [("num.partitions", SET, "3")]),
        (TOPIC, "t", [("retention.ms", SET, "1000")]),
        (TOPIC, "nope", [("retention.ms", SET, "1000")]),
        (GROUP, "", [("share.auto.offset.reset", SET, "earliest")]),
        (GROUP, "dup", [("share.auto.offset.reset", SET, "earliest")] * 2),
        (16, "m", [("metrics", SET, "x")]),
    ], validate_only=True)
    assert answers == [
        ("g", ErrorCode.none), ("3", ErrorCode.invalid_request), ("", ErrorCode.invalid_request),
        ("t", ErrorCode.policy_violation), ("nope", ErrorCode.unknown_topic_or_partition),
        ("", ErrorCode.invalid_request), ("dup", ErrorCode.invalid_request), ("m", ErrorCode.invalid_request),
    ]
    (call,) = g.controller.calls
    assert call == ([("g", [AlterOp("share.auto.offset.reset", SET, "earliest")])], True)


def test_a_resource_named_twice_is_refused_both_times():
    g = gw()
    answers = alter(g, [(GROUP, "g", [("share.auto.offset.reset", SET, "earliest")])] * 2, version=0)
    assert answers == [("g", ErrorCode.invalid_request)] * 2
    assert g.controller.calls == []


def test_the_controllers_refusal_is_the_answer():
    g = gw(answer=lambda changes: [(ErrorCode.invalid_config.value, "Unknown group config name: x")])
    assert alter(g, [(GROUP, "g", [("x", SET, "1")])]) == [("g", ErrorCode.invalid_config)]
