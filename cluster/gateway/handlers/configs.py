"""DescribeConfigs and IncrementalAlterConfigs, as Kafka's brokers answer them (KafkaApis,
ConfigHelper, ConfigAdminManager; the controller's ConfigurationControlManager for GROUP alters).

- BROKER: every setting of the registry (cluster/config.py) with its value on this gateway;
  all read-only, since raygroups changes none at runtime. The resource is this gateway's node id,
  or "" for the dynamic cluster defaults, of which raygroups has none.
- TOPIC: the topic settings raygroups applies, with the values it applies (topic_entries
  below), read-only: raygroups does not change them per topic.
- GROUP: the group's share settings, its overrides else the broker's (cluster/group_configs.py).
  Only these are alterable, through IncrementalAlterConfigs SET and DELETE; the controller checks
  the values as Kafka's GroupConfig.validate does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.clients.controller import ControllerFailed
from cluster.config import SETTINGS
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import kafka_message, refresh_if_unknown
from cluster.group_configs import GROUP_SETTINGS, AlterOp, check_request, effective
from cluster.metadata import validate_topic_name

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# DescribeConfigsResponse.ConfigSource
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8
# ConfigDef.Type as DescribeConfigs v3+ numbers it
BOOLEAN, STRING, INT, LONG, PASSWORD = 1, 2, 3, 5, 9
SENSITIVE = frozenset({"ssl.key.password", "ssl.keystore.key"})
INT32_MAX = 2**31 - 1


class Refused(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


# -- DescribeConfigs ---------------------------------------------------------------------------------


async def describe_configs(gw: GatewayContext, request: Request) -> Any:
    b = request.body
    synonyms = bool(getattr(b, "include_synonyms", False))
    docs = bool(getattr(b, "include_documentation", False))
    await refresh_if_unknown(gw, [r.resource_name for r in b.resources if r.resource_type == TOPIC])
    results = []
    for resource in b.resources:
        result: dict[str, Any] = {
            "resource_type": resource.resource_type, "resource_name": resource.resource_name,
            "error_code": ErrorCode.none, "error_message": None, "configs": [],
        }
        try:
            entries = _entries(gw, resource.resource_type, resource.resource_name)
        except Refused as exc:
            result.update(error_code=exc.error_code, error_message=exc.message)
        else:
            keys = resource.configuration_keys
            result["configs"] = [
                _entry(e, synonyms, docs) for e in entries if keys is None or e["name"] in keys
            ]
        results.append(result)
    return build_response(ApiKey.DESCRIBE_CONFIGS, request.api_version, {"throttle_time": 0, "results": results})


def _entries(gw: GatewayContext, resource_type: int, name: str) -> list[dict[str, Any]]:
    if resource_type == BROKER:
        if name == "":
            return []  # the dynamic cluster-wide defaults: raygroups has none
        _check_node_id(gw, name, "or empty string, ")
        return broker_entries(gw.config)
    if resource_type == TOPIC:
        return topic_entries(gw.config, _known_topic(gw, name).internal)
    if resource_type == GROUP:
        if not name:
            raise Refused(ErrorCode.invalid_request, "Group name must not be empty")
        return group_entries(gw.config, gw.leadership.group_configs.get(name, {}))
    raise Refused(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def _known_topic(gw: GatewayContext, name: str) -> Any:
    info = gw.leadership.topics.get(name)
    if info is None:
        problem = validate_topic_name(name)
        if problem:
            raise Refused(ErrorCode.invalid_topic_exception, problem)
        raise Refused(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
    return info


def _check_node_id(gw: GatewayContext, name: str, also: str = "") -> None:
    try:
        node_id = int(name)
    except ValueError:
        raise Refused(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if node_id != gw.node_id:
        raise Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected {gw.node_id} {also}but received {name}")


def _entry(e: dict[str, Any], synonyms: bool, docs: bool) -> dict[str, Any]:
    sensitive = e["name"] in SENSITIVE
    return {
        "name": e["name"],
        "value": None if sensitive else e["value"],
        "read_only": e["read_only"],
        "is_default": e["source"] == DEFAULT_CONFIG,  # v0
        "config_source": e["source"],
        "is_sensitive": sensitive,
        "synonyms": [
            {"name": n, "value": None if sensitive else v, "source": s} for n, v, s in e["synonyms"]
        ] if synonyms else [],
        "config_type": PASSWORD if sensitive else e["type"],
        "documentation": e["doc"] if docs else None,
    }


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return None
    return str(value)


def _type(value: Any) -> int:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INT if -INT32_MAX - 1 <= value <= INT32_MAX else LONG
    return STRING


def _broker_source(config: Any, name: str) -> tuple[int, list[tuple[str, str | None, int]]]:
    """(source, synonyms) of a broker setting: given at start (static) or its default."""
    default = (name, _text(SETTINGS[name].default), DEFAULT_CONFIG)
    if name in config.explicit():
        return STATIC_BROKER_CONFIG, [(name, _text(config[name]), STATIC_BROKER_CONFIG), default]
    return DEFAULT_CONFIG, [default]


def broker_entries(config: Any) -> list[dict[str, Any]]:
    out = []
    for name, setting in SETTINGS.items():
        source, synonyms = _broker_source(config, name)
        out.append({
            "name": name, "value": _text(config[name]), "read_only": True, "source": source,
            "synonyms": synonyms, "type": _type(setting.default), "doc": setting.doc,
        })
    return out


def topic_entries(config: Any, internal: bool) -> list[dict[str, Any]]:
    """What raygroups applies to a topic's partitions, whatever CreateTopics asked for."""
    segment = "raygroups.coordinator.log.segment.bytes" if internal else "raygroups.log.segment.bytes"
    rows: list[tuple[str, Any, str | None, int, str]] = [
        ("cleanup.policy", "compact" if internal else "delete", None, STRING,
         "compact for the internal topics; user topics keep every record (no retention)"),
        ("segment.bytes", config[segment], segment, INT, SETTINGS[segment].doc),
        ("retention.ms", -1, None, LONG, "raygroups deletes no records by age"),
        ("retention.bytes", -1, None, LONG, "raygroups deletes no records by size"),
        ("max.message.bytes", config["message.max.bytes"], "message.max.bytes", INT, SETTINGS["message.max.bytes"].doc),
    ]
    if internal:
        rows.append(("delete.retention.ms", config["raygroups.log.tombstone.retention.ms"],
                     "raygroups.log.tombstone.retention.ms", LONG, SETTINGS["raygroups.log.tombstone.retention.ms"].doc))
    out = []
    for name, value, broker, kind, doc in rows:
        source, synonyms = _broker_source(config, broker) if broker else (DEFAULT_CONFIG, [])
        out.append({"name": name, "value": _text(value), "read_only": True, "source": source,
                    "synonyms": synonyms, "type": kind, "doc": doc})
    return out


def group_entries(config: Any, overrides: dict[str, str]) -> list[dict[str, Any]]:
    """Every group setting, alterable; one without a broker setting (share.isolation.level) has
    Kafka's own default and no synonym but the group's."""
    out = []
    for name, (value, overridden) in effective(config, overrides).items():
        setting = GROUP_SETTINGS[name]
        source: int = DEFAULT_CONFIG
        synonyms: list[tuple[str, str | None, int]] = []
        if setting.broker_setting is not None:
            source, synonyms = _broker_source(config, setting.broker_setting)
            synonyms = [(setting.broker_setting, v, s) for _, v, s in synonyms]
        # Kafka's ConfigHelper: the source is the first synonym's, the group's own before the broker's.
        if overridden:
            source, synonyms = GROUP_CONFIG, [(name, overrides[name], GROUP_CONFIG), *synonyms]
        out.append({
            "name": name, "value": _text(value), "read_only": False, "source": source,
            "synonyms": synonyms, "type": INT if setting.kind == "int" else STRING, "doc": setting.doc,
        })
    return out


# -- IncrementalAlterConfigs -----------------------------------------------------------------------


async def incremental_alter_configs(gw: GatewayContext, request: Request) -> Any:
    b = request.body
    answers: list[tuple[ErrorCode, str | None] | None] = [None] * len(b.resources)
    seen: dict[tuple[int, str], int] = {}
    for i, r in enumerate(b.resources):
        j = seen.setdefault((r.resource_type, r.resource_name), i)
        if j != i:
            answers[i] = answers[j] = (ErrorCode.invalid_request, "Each resource must appear at most once.")
    await refresh_if_unknown(gw, [r.resource_name for r in b.resources if r.resource_type == TOPIC])
    groups: list[tuple[int, str, list[AlterOp]]] = []
    for i, r in enumerate(b.resources):
        if answers[i] is not None:
            continue
        ops = [AlterOp(c.name, c.config_operation, c.value) for c in r.configs]
        try:
            refusal = check_request(ops)
            if refusal is not None:
                raise Refused(refusal.error_code, refusal.message)
            _refuse_non_group(gw, r.resource_type, r.resource_name, ops)
        except Refused as exc:
            answers[i] = (exc.error_code, exc.message)
            continue
        groups.append((i, r.resource_name, ops))
    if groups:
        for (i, _, _), (code, message) in zip(groups, await _alter_groups(gw, groups, b.validate_only)):
            answers[i] = (ErrorCode(code), message)
    responses = [
        {"resource_type": r.resource_type, "resource_name": r.resource_name,
         "error_code": answer[0], "error_message": kafka_message(answer[0], answer[1])}
        for r, answer in zip(b.resources, answers)
    ]
    return build_response(ApiKey.INCREMENTAL_ALTER_CONFIGS, request.api_version, {"throttle_time": 0, "responses": responses})


def _refuse_non_group(gw: GatewayContext, resource_type: int, name: str, ops: list[AlterOp]) -> None:
    """Raise Kafka's error for what raygroups cannot change; return for a GROUP to alter."""
    if resource_type == GROUP:
        if not name:
            raise Refused(ErrorCode.invalid_request, "Default group resources are not allowed.")
        return
    if resource_type == BROKER:
        if name:
            _check_node_id(gw, name)
        # Kafka answers INVALID_REQUEST for a broker setting it cannot change at runtime (KAFKA-13609);
        # raygroups changes none.
        names = ", ".join(op.name for op in ops)
        raise Refused(ErrorCode.invalid_request, f"Cannot update these configs dynamically: Set({names})")
    if resource_type == TOPIC:
        _known_topic(gw, name)
        # Kafka's answer when the broker's alter.config.policy refuses a change.
        raise Refused(ErrorCode.policy_violation, "raygroups does not change topic configs (DescribeConfigs shows what applies)")
    raise Refused(ErrorCode.invalid_request, f"Unknown resource type {resource_type}")


async def _alter_groups(gw: GatewayContext, groups: list[tuple[int, str, list[AlterOp]]], validate_only: bool) -> list[tuple[int, str | None]]:
    changes = [(group_id, ops) for _, group_id, ops in groups]
    try:
        # The controller validates against the stored overrides, writes and publishes them.
        return await gw.controller.alter_group_configs(changes, validate_only)
    except ControllerFailed as exc:  # its write failed, or it did not answer: no message
        return [(exc.error_code.value, None)] * len(groups)
