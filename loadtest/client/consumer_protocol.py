"""Kafka's "consumer" embedded protocol: what members put in JoinGroup and leaders in SyncGroup.

A version (int16) then the struct of that version, as Kafka's ConsumerProtocol writes them; the
structs are kio's ConsumerProtocolSubscription / ConsumerProtocolAssignment.
"""

from __future__ import annotations

import io
import struct

from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as AssignedPartitions
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription
from kio.serial import entity_reader, entity_writer

VERSION = 1
_VERSION = struct.Struct(">h")


def encode_subscription(topics: list[str]) -> bytes:
    buf = io.BytesIO()
    buf.write(_VERSION.pack(VERSION))
    entity_writer(ConsumerProtocolSubscription)(
        buf, ConsumerProtocolSubscription(topics=tuple(topics), user_data=None, owned_partitions=())
    )
    return buf.getvalue()


def decode_subscription(data: bytes) -> list[str]:
    subscription, _ = entity_reader(ConsumerProtocolSubscription)(data, _VERSION.size)
    return list(subscription.topics)


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
