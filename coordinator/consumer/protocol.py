"""Kafka's "consumer" embedded protocol (ConsumerProtocol) as a consumer group reads and writes it
for members that speak the classic protocol: the subscription they put in JoinGroup and the
assignment SyncGroup gives back. Each is an int16 version then the struct of that version (kio's
ConsumerProtocolSubscription / ConsumerProtocolAssignment, versions 0-3); a version newer than
those is read as the newest (Kafka's checkSubscriptionVersion / checkAssignmentVersion).
"""

from __future__ import annotations

import importlib
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

HIGHEST = 3
_VERSION = struct.Struct(">h")


class MalformedProtocol(ValueError):
    """Kafka's SchemaException: the embedded protocol does not parse."""


def _schema(kind: str, version: int) -> Any:
    module = importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{version}.data")
    return module


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...]  # (topic name, partitions); v1+
    rack_id: str | None  # v3+


def _version(data: bytes) -> int:
    if len(data) < _VERSION.size:
        raise MalformedProtocol("no version")
    version = _VERSION.unpack_from(data, 0)[0]
    if version < 0:
        raise MalformedProtocol(f"negative version {version}")
    return min(version, HIGHEST)


def decode_subscription(data: bytes) -> Subscription:
    version = _version(data)
    cls = _schema("subscription", version).ConsumerProtocolSubscription
    try:
        sub, _ = entity_reader(cls)(data, _VERSION.size)
    except Exception as e:  # kio raises what the bytes make it raise: all mean malformed
        raise MalformedProtocol(str(e)) from None
    owned = tuple((tp.topic, tuple(tp.partitions)) for tp in getattr(sub, "owned_partitions", ()) or ())
    return Subscription(_VERSION.unpack_from(data, 0)[0], tuple(sub.topics), owned, getattr(sub, "rack_id", None))


def decode_assignment(data: bytes) -> dict[str, tuple[int, ...]]:
    """topic name -> partitions (empty bytes: nothing assigned)."""
    if not data:
        return {}
    version = _version(data)
    cls = _schema("assignment", version).ConsumerProtocolAssignment
    try:
        assignment, _ = entity_reader(cls)(data, _VERSION.size)
    except Exception as e:
        raise MalformedProtocol(str(e)) from None
    out: dict[str, tuple[int, ...]] = {}
    for tp in assignment.assigned_partitions:
        out[tp.topic] = tuple(sorted(set(out.get(tp.topic, ())) | set(tp.partitions)))
    return out


def encode_assignment(partitions: Mapping[str, Any], version: int) -> bytes:
    """Kafka's ConsumerProtocol.serializeAssignment at the member's subscription version."""
    version = min(max(version, 0), HIGHEST)
    module = _schema("assignment", version)
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    entity_writer(module.ConsumerProtocolAssignment)(
        buf,
        module.ConsumerProtocolAssignment(
            assigned_partitions=tuple(
                module.TopicPartition(topic=t, partitions=tuple(sorted(ps))) for t, ps in sorted(partitions.items()) if ps
            ),
            user_data=None,
        ),
    )
    return buf.getvalue()


def subscription_version(data: bytes) -> int:
    """The version a member's subscription was written at (0 if unreadable)."""
    try:
        return _VERSION.unpack_from(data, 0)[0]
    except struct.error:
        return 0

