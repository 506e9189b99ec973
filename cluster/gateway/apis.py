"""The APIs the gateway speaks, their version ranges, and version-agnostic response building.

ApiVersions advertises exactly `SUPPORTED` (PROTOCOL.md §1): every range here is implemented
and exercised by tests. Request and response types come from kio, one class per version; the
handlers work on plain dicts and `build()` turns them into the class of the negotiated version,
dropping fields that version lacks and filling fields the handler left out with the schema's
default, so one handler serves every version of its API.
"""

from __future__ import annotations

import datetime
import enum
import functools
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Callable

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    CREATE_PARTITIONS = 37
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# raygroups' own operator API (status, actors, kill, move) rides the Kafka framing under a key
# Kafka does not use; it is not advertised in ApiVersions and carries msgpack (PROTOCOL.md §1).
ADMIN_API_KEY = 32000

SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (1, 13),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    # KIP-848 consumer groups (coordinator/consumer/): v1 has the regex and the client's member id.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # KIP-932 share groups: v1 is what Kafka 4.1+ and librdkafka 2.15+ speak (v0 was early access).
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    # Kafka's admin tools for offsets (handlers/group_offsets_admin.py); v0 is every version there is.
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    # Served on every listener as Kafka does; outside a SASL listener the handshake is ILLEGAL_SASL_STATE.
    # v0: raw SASL tokens follow the handshake, without SaslAuthenticate framing (connection.py).
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    # SCRAM users managed the Kafka way, by super users (handlers/scram_credentials.py).
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # Kafka 4.x's ranges (DescribeConfigs v0 was removed in 4.0); handlers/configs.py.
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
}


def is_supported(api_key: int, api_version: int) -> bool:
    bounds = SUPPORTED.get(api_key)
    return bounds is not None and bounds[0] <= api_version <= bounds[1]


@functools.cache
def request_class(api_key: int, api_version: int) -> type:
    return load_request_schema(api_key, api_version)


@functools.cache
def response_class(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


# -- dict -> kio entity ----------------------------------------------------------------------
# build() runs on hot paths (OffsetCommit, JoinGroup, Metadata answers), so each class's fields are
# compiled once into (name, coerce, zero) steps: the type hints are inspected when a class is first
# built, not per value.

_NO_ZERO = object()  # the field has a default of its own: left out, the class fills it


@functools.cache
def _compiled(cls: type) -> tuple[tuple[str, Callable[[Any], Any], Any], ...]:
    """(name, coerce, zero) per field of a kio entity class; zero is a factory, or _NO_ZERO."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in fields(cls):
        hint, kafka_type = hints[f.name], f.metadata.get("kafka_type")
        has_default = f.default is not MISSING or f.default_factory is not MISSING  # type: ignore[misc]
        plan.append((f.name, _coercer(hint, kafka_type), _NO_ZERO if has_default else _zero_factory(hint, kafka_type)))
    return tuple(plan)


_ZERO = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint8": 0, "uint16": 0, "uint32": 0,
    "uint64": 0, "float64": 0.0, "bool": False, "string": "", "bytes": b"", "records": None,
    "uuid": None, "error_code": ErrorCode.none, "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
}


def build(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for name, coerce, zero in _compiled(cls):
        if name in data:
            kwargs[name] = coerce(data[name])
        elif zero is not _NO_ZERO:
            kwargs[name] = zero()
    return cls(**kwargs)


def zeros(cls: type) -> dict[str, Any]:
    """The fields of a kio entity class without a default of their own, each with the value
    `build` gives it when left out (answers.py's shapes start from these)."""
    return {name: zero() for name, _, zero in _compiled(cls) if zero is not _NO_ZERO}


def entity_of(hint: Any) -> tuple[type | None, bool]:
    """(kio entity class, is_array) behind a field's type hint, or (None, is_array)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple:
        inner = args[0]
        return (inner if is_dataclass(inner) else None), True
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        for arg in args:
            if arg is not type(None):
                return entity_of(arg)
    return (hint if is_dataclass(hint) else None), False


def _nullable(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Union or type(hint).__name__ == "UnionType"


def _coercer(hint: Any, kafka_type: str | None) -> Callable[[Any], Any]:
    """The function that turns a handler's value into what the field holds."""
    convert = _converter(hint, kafka_type)
    # A field this version cannot null (e.g. JoinGroup v0-v6 protocol_name) gets its zero value.
    null = (lambda: None) if _nullable(hint) else _zero_factory(hint, kafka_type)

    def coerce(value: Any) -> Any:
        return null() if value is None else convert(value)

    return coerce


def _converter(hint: Any, kafka_type: str | None) -> Callable[[Any], Any]:
    entity, is_array = entity_of(hint)
    if entity is not None:
        if is_array:
            return lambda value: tuple(v if isinstance(v, entity) else build(entity, v) for v in value)
        return lambda value: value if isinstance(value, entity) else build(entity, value)
    if is_array:
        return tuple
    if kafka_type == "error_code":
        return lambda value: value if isinstance(value, ErrorCode) else ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return lambda value: value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
    return lambda value: value


def _zero_factory(hint: Any, kafka_type: str | None) -> Callable[[], Any]:
    entity, is_array = entity_of(hint)
    if is_array:
        return tuple
    if entity is not None:
        return lambda: build(entity, {})
    zero = _ZERO.get(kafka_type)  # type: ignore[arg-type]
    return lambda: zero
