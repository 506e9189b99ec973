"""Per-group share settings (Kafka's group configs, KIP-932), set with IncrementalAlterConfigs.

A group's overrides are kept as Kafka keeps them, name -> string, in the cluster metadata
(cluster/metadata.py, GroupConfig records); every other setting is the broker's. Only what
raygroups applies per group can be set:
- `share.auto.offset.reset`: where the group starts on a partition it never consumed;
- `share.record.lock.duration.ms`: the acquisition lock of records it acquires from then on;
- `share.delivery.count.limit`: deliveries before a record is archived (Kafka 4.2's group config).
`share.session.timeout.ms` and `share.heartbeat.interval.ms` are described (the broker's values)
but not alterable: the share coordinator does not read per-group values.

Bounds are the broker's, as Kafka's GroupConfig.validateValues checks them: Kafka bounds the lock
duration with group.share.min/max.record.lock.duration.ms (15 s..60 s) and the delivery count limit
with group.share.min/max.delivery.count.limit (2..10), Kafka's defaults here too. Kafka also requires
the broker-wide lock duration to lie within them, and so does `raygroups up`
(server_properties.check_together); a program that builds its Config directly (the simulation) may
not, so the bounds are widened to take in the broker's own value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate.offset_reset import OffsetReset

from cluster.config import SETTINGS

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


@dataclass(frozen=True, slots=True)
class GroupSetting:
    name: str  # the group config, as Kafka names it
    broker_setting: str  # the broker setting that is its default
    alterable: bool  # applied per group by raygroups
    bounds: tuple[str, str] | None = None  # (min setting, max setting)

    @property
    def doc(self) -> str:
        return SETTINGS[self.broker_setting].doc


GROUP_SETTINGS: dict[str, GroupSetting] = {
    s.name: s
    for s in [
        GroupSetting("share.auto.offset.reset", "share.auto.offset.reset", True),
        GroupSetting(
            "share.record.lock.duration.ms", "group.share.record.lock.duration.ms", True,
            ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
        ),
        GroupSetting(
            "share.delivery.count.limit", "group.share.delivery.count.limit", True,
            ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
        ),
        GroupSetting("share.session.timeout.ms", "group.share.session.timeout.ms", False),
        GroupSetting("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", False),
    ]
}


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
    return config[setting.broker_setting]


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
    """The typed value of a group setting; ValueError with Kafka's wording when it does not parse."""
    if name == "share.auto.offset.reset":
        try:
            return OffsetReset.parse(text)
        except ValueError as exc:
            raise ValueError(f"Invalid value {text} for configuration {name}: {exc}") from None
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"Invalid value {text} for configuration {name}: Not a number of type INT") from None


def bounds(config: Any, setting: GroupSetting) -> tuple[int, int] | None:
    if setting.bounds is None:
        return None
    low_name, high_name = setting.bounds
    low, high = config[low_name], config[high_name]
    own = broker_value(config, setting)
    return min(low, own), max(high, own)


def validate(config: Any, overrides: Mapping[str, str]) -> str | None:
    """Why these overrides cannot be the group's, or None."""
    for name, text in overrides.items():
        setting = GROUP_SETTINGS.get(name)
        if setting is None:
            return f"Unknown group config name: {name}"
        if not setting.alterable:
            return f"{name} cannot be set per group in raygroups (the broker's {setting.broker_setting} applies)"
        try:
            value = parse(name, text)
        except ValueError as exc:
            return str(exc)
        limits = bounds(config, setting)
        if limits is None:
            continue
        low_name, high_name = setting.bounds  # type: ignore[misc]
        if value < limits[0]:
            return f"{name} must be greater than or equal to {limits[0]} ({low_name})"
        if value > limits[1]:
            return f"{name} must be less than or equal to {limits[1]} ({high_name})"
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


def lock_duration_ms(config: Any, overrides: Mapping[str, str] | None) -> int:
    """The group's acquisition lock duration: what ShareFetch tells its members."""
    text = (overrides or {}).get("share.record.lock.duration.ms")
    return parse("share.record.lock.duration.ms", text) if text is not None else config["group.share.record.lock.duration.ms"]
