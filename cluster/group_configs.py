"""Per-group consumer and share settings (Kafka's group configs, KIP-848 and KIP-932), set with
IncrementalAlterConfigs.

A group's overrides are kept as Kafka keeps them, name -> string, in the cluster metadata
(cluster/metadata.py, GroupConfig records); every other setting is the broker's. Only what
raygroups applies per group can be set:
- `consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`: the same for a member of a
  consumer group speaking the consumer protocol;
- `share.session.timeout.ms`, `share.heartbeat.interval.ms`: the group coordinator's session of a
  share member and the interval its heartbeat answer gives (coordinator_group_configs below);
- `share.record.lock.duration.ms`: the acquisition lock of records it acquires from then on;
- `share.delivery.count.limit`: deliveries before a record is archived (Kafka 4.2's group config);
- `share.auto.offset.reset`: where the group starts on a partition it never consumed;
- `share.isolation.level`: known, described and alterable; raygroups has no transactions, so
  read_committed delivers what read_uncommitted does.

Validation is Kafka's GroupConfig.validate: the broker's values filled in under the group's, every
value parsed in the order Kafka defines them (ConfigDef type and Range/ValidString checks), then
validateValues: each value within the broker's bounds (group.consumer/share.min/max.*), then each
session timeout above its heartbeat interval. The messages are Kafka's. Kafka also requires the broker-wide
values to lie within the bounds; `raygroups up` does for the lock duration
(server_properties.check_together), and a program that builds its Config directly (the simulation,
tests with short sessions) may not, so each bound is widened to take in the broker's own value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.config import GroupConfig
from sharestate.offset_reset import OffsetReset

from cluster.config import SETTINGS

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Kafka's GroupConfig.SHARE_ISOLATION_LEVEL_DOC, and what it means in raygroups.
ISOLATION_LEVEL_DOC = (
    'Controls how to read records written transactionally. If set to "read_committed", the share group will '
    'only deliver transactional records which have been committed. If set to "read_uncommitted", the share group '
    "will return all messages, even transactional messages which have been aborted. Non-transactional records "
    "will be returned unconditionally in either mode. raygroups has no transactions (no record is transactional), "
    "so read_committed behaves as read_uncommitted."
)


@dataclass(frozen=True, slots=True)
class GroupSetting:
    name: str  # the group config, as Kafka names it
    broker_setting: str | None  # the broker setting that is its default (None: Kafka's own default)
    kind: str = "int"  # "int", "offset_reset" or "choice": how its text parses
    bounds: tuple[str, str] | None = None  # (min setting, max setting): GroupConfig.validateValues
    at_least: int | None = None  # Kafka's ConfigDef Range.atLeast
    choices: tuple[str, ...] = ()  # Kafka's ValidString.in
    default: Any = None  # without a broker setting
    own_doc: str = ""  # without a broker setting

    @property
    def doc(self) -> str:
        return self.own_doc or SETTINGS[self.broker_setting].doc  # type: ignore[index]


# In the order Kafka's GroupConfig defines them (its ConfigDef parses and reports in this order).
GROUP_SETTINGS: dict[str, GroupSetting] = {
    s.name: s
    for s in [
        GroupSetting(
            "consumer.session.timeout.ms", "group.consumer.session.timeout.ms",
            bounds=("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"), at_least=1,
        ),
        GroupSetting(
            "consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms",
            bounds=("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"), at_least=1,
        ),
        GroupSetting(
            "share.session.timeout.ms", "group.share.session.timeout.ms",
            bounds=("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"), at_least=1,
        ),
        GroupSetting(
            "share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms",
            bounds=("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"), at_least=1,
        ),
        GroupSetting(
            "share.record.lock.duration.ms", "group.share.record.lock.duration.ms",
            bounds=("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"), at_least=1000,
        ),
        GroupSetting(
            "share.delivery.count.limit", "group.share.delivery.count.limit",
            bounds=("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"), at_least=2,
        ),
        GroupSetting("share.auto.offset.reset", "share.auto.offset.reset", kind="offset_reset"),
        GroupSetting(
            "share.isolation.level", None, kind="choice", choices=("read_committed", "read_uncommitted"),
            default="read_uncommitted", own_doc=ISOLATION_LEVEL_DOC,
        ),
    ]
}

# GroupConfig.validateValues' order of the bound checks, then the one relation it checks.
_BOUNDS_ORDER = ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "share.heartbeat.interval.ms",
                 "share.session.timeout.ms", "share.record.lock.duration.ms", "share.delivery.count.limit")
_SESSION, _HEARTBEAT = "share.session.timeout.ms", "share.heartbeat.interval.ms"
_CONSUMER_SESSION, _CONSUMER_HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


@dataclass(frozen=True, slots=True)
class AlterOp:
    name: str
    operation: int
    value: str | None


@dataclass(frozen=True, slots=True)
class Refusal:
    error_code: ErrorCode
    message: str


def broker_value(config: Any, setting: GroupSetting) -> Any:
    return setting.default if setting.broker_setting is None else config[setting.broker_setting]


def effective(config: Any, overrides: Mapping[str, str]) -> dict[str, tuple[Any, bool]]:
    """Every group setting: (value, True when the group overrides it)."""
    out: dict[str, tuple[Any, bool]] = {}
    for name, setting in GROUP_SETTINGS.items():
        if name in overrides:
            out[name] = (parse(name, overrides[name]), True)
        else:
            out[name] = (broker_value(config, setting), False)
    return out


def parse(name: str, text: str) -> Any:
    """The typed value of a group setting; ValueError with Kafka's wording (ConfigException) when it
    does not parse or fails its ConfigDef check."""
    setting = GROUP_SETTINGS[name]
    if setting.kind == "offset_reset":
        try:
            return OffsetReset.parse(text)
        except ValueError as exc:
            raise ValueError(f"Invalid value {text} for configuration {name}: {exc}") from None
    value = text.strip()  # Kafka's ConfigDef trims a STRING or INT value
    if setting.kind == "choice":
        if value not in setting.choices:
            raise ValueError(f"Invalid value {value} for configuration {name}: String must be one of: "
                             + ", ".join(setting.choices))
        return value
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"Invalid value {text} for configuration {name}: Not a number of type INT") from None
    if setting.at_least is not None and number < setting.at_least:
        raise ValueError(f"Invalid value {number} for configuration {name}: Value must be at least {setting.at_least}")
    return number


def bounds(config: Any, setting: GroupSetting) -> tuple[int, int] | None:
    if setting.bounds is None:
        return None
    low_name, high_name = setting.bounds
    low, high = config[low_name], config[high_name]
    own = broker_value(config, setting)
    return min(low, own), max(high, own)


def validate(config: Any, overrides: Mapping[str, str]) -> str | None:
    """Why these overrides cannot be the group's, or None (Kafka's GroupConfig.validate)."""
    for name in overrides:
        if name not in GROUP_SETTINGS:
            return f"Unknown group config name: {name}"
    values: dict[str, Any] = {}
    for name, setting in GROUP_SETTINGS.items():
        try:
            values[name] = parse(name, overrides[name]) if name in overrides else broker_value(config, setting)
        except ValueError as exc:
            return str(exc)
    for name in _BOUNDS_ORDER:
        setting = GROUP_SETTINGS[name]
        low, high = bounds(config, setting)  # type: ignore[misc]
        if values[name] < low:
            return f"{name} must be greater than or equal to {setting.bounds[0]}"  # type: ignore[index]
        if values[name] > high:
            return f"{name} must be less than or equal to {setting.bounds[1]}"  # type: ignore[index]
    for session, heartbeat in ((_CONSUMER_SESSION, _CONSUMER_HEARTBEAT), (_SESSION, _HEARTBEAT)):
        if values[session] <= values[heartbeat]:
            return f"{session} must be greater than {heartbeat}"
    return None


def check_request(ops: Iterable[AlterOp]) -> Refusal | None:
    """What Kafka's broker refuses before the controller sees the change (ConfigAdminManager.preprocess)."""
    ops = list(ops)
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        return Refusal(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [op.name for op in ops if op.operation != DELETE and op.value is None]
    if nulls:
        return Refusal(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls))
    unknown = [op for op in ops if op.operation not in OPERATIONS]
    if unknown:
        return Refusal(ErrorCode.invalid_request, f"Unknown operations type {unknown[0].operation}")
    return None


def apply(config: Any, current: Mapping[str, str], ops: Iterable[AlterOp]) -> dict[str, str] | Refusal:
    """The group's overrides after `ops` (Kafka's ConfigurationControlManager), or why not."""
    ops = list(ops)
    refusal = check_request(ops)
    if refusal is not None:
        return refusal
    new = dict(current)
    for op in ops:
        if op.operation in (APPEND, SUBTRACT):
            return Refusal(
                ErrorCode.invalid_config,
                f"Can't {OPERATIONS[op.operation]} to key {op.name} because its type is not LIST.",
            )
        if op.name not in GROUP_SETTINGS:
            return Refusal(ErrorCode.invalid_config, f"Unknown group config name: {op.name}")
        if op.operation == DELETE:
            new.pop(op.name, None)
        else:
            new[op.name] = op.value.strip()  # type: ignore[union-attr]
    problem = validate(config, new)
    if problem is not None:
        return Refusal(ErrorCode.invalid_config, problem)
    return new


def _evaluated(config: Any, name: str, overrides: Mapping[str, str]) -> int | None:
    """A group's value of an int setting capped within the broker's bounds (Kafka's
    GroupConfig.evaluate): bounds lowered or raised since it was set apply; None if not set."""
    text = overrides.get(name)
    if text is None:
        return None
    try:
        value = parse(name, text)
    except ValueError:
        return None  # not written by apply(): the broker's value applies
    low, high = bounds(config, GROUP_SETTINGS[name])  # type: ignore[misc]
    return min(max(value, low), high)


def coordinator_group_configs(config: Any, group_configs: Mapping[str, Mapping[str, str]]) -> dict[str, GroupConfig]:
    """What the group coordinator applies of each group's overrides (Kafka's GroupConfigManager),
    for the groups that override a setting it reads."""
    out: dict[str, GroupConfig] = {}
    for group_id, overrides in group_configs.items():
        own = GroupConfig(
            share_session_timeout_ms=_evaluated(config, _SESSION, overrides),
            share_heartbeat_interval_ms=_evaluated(config, _HEARTBEAT, overrides),
            consumer_session_timeout_ms=_evaluated(config, _CONSUMER_SESSION, overrides),
            consumer_heartbeat_interval_ms=_evaluated(config, _CONSUMER_HEARTBEAT, overrides),
        )
        if own != GroupConfig():
            out[group_id] = own
    return out


def lock_duration_ms(config: Any, overrides: Mapping[str, str] | None) -> int:
    """The group's acquisition lock duration: what ShareFetch tells its members."""
    text = (overrides or {}).get("share.record.lock.duration.ms")
    return parse("share.record.lock.duration.ms", text) if text is not None else config["group.share.record.lock.duration.ms"]
