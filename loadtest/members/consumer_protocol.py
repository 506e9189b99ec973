"""Kafka's "consumer" embedded protocol: what members put in JoinGroup and leaders in SyncGroup.

A version (int16) then the struct of that version, as Kafka's ConsumerProtocol writes them; the
structs are kio's ConsumerProtocolSubscription / ConsumerProtocolAssignment.
"""

from __future__ import annotations

import io
import struct

from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as AssignedPartitions
from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription as SubscriptionV0
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription
from kio.schema.consumer_protocol_subscription.v1.data import TopicPartition as OwnedPartitions
from kio.serial import entity_reader, entity_writer

VERSION = 1
_VERSION = struct.Struct(">h")


def encode_subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    """A member's subscription; `owned` are the partitions it keeps through a cooperative rebalance (KIP-429)."""
    buf = io.BytesIO()
    buf.write(_VERSION.pack(VERSION))
    owned_partitions = tuple(
        OwnedPartitions(topic=t, partitions=tuple(ps)) for t, ps in sorted((owned or {}).items()) if ps
    )
    entity_writer(ConsumerProtocolSubscription)(
        buf, ConsumerProtocolSubscription(topics=tuple(topics), user_data=None, owned_partitions=owned_partitions)
    )
    return buf.getvalue()


def decode_subscription(data: bytes) -> tuple[list[str], dict[str, list[int]]]:
    """(topics, owned partitions by topic) of a member's subscription (v0 carries no owned partitions)."""
    version = _VERSION.unpack_from(data, 0)[0]
    if version == 0:
        subscription, _ = entity_reader(SubscriptionV0)(data, _VERSION.size)
        return list(subscription.topics), {}
    subscription, _ = entity_reader(ConsumerProtocolSubscription)(data, _VERSION.size)
    owned = {tp.topic: list(tp.partitions) for tp in subscription.owned_partitions}
    return list(subscription.topics), owned


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    buf = io.BytesIO()
    buf.write(_VERSION.pack(VERSION))
    entity_writer(ConsumerProtocolAssignment)(
        buf,
        ConsumerProtocolAssignment(
            assigned_partitions=tuple(AssignedPartitions(topic=t, partitions=tuple(ps)) for t, ps in sorted(partitions.items())),
            user_data=None,
        ),
    )
    return buf.getvalue()


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    assignment, _ = entity_reader(ConsumerProtocolAssignment)(data, _VERSION.size)
    return {tp.topic: list(tp.partitions) for tp in assignment.assigned_partitions}
