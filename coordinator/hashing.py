"""Which internal partition owns a group or a share-state key, exactly as Kafka computes it.

Kafka: `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` for groups, and the same over
"groupId:topicId:partition" for share state (ShareCoordinatorService.partitionFor / SharePartitionKey).
Java's String.hashCode runs over UTF-16 code units with 32-bit wrap-around; Utils.abs maps
Integer.MIN_VALUE to 0 (Math.abs would leave it negative).
"""

from __future__ import annotations

import base64
from uuid import UUID


def java_string_hash(text: str) -> int:
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    return 0 if n == -(1 << 31) else abs(n)


def group_partition(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % num_partitions


def share_state_key(group_id: str, topic_id: UUID, partition: int) -> str:
    # Kafka prints topic ids in URL-safe base64 (Uuid.toString), not the dashed hex form.
    return f"{group_id}:{kafka_uuid_str(topic_id)}:{partition}"


def share_state_partition(group_id: str, topic_id: UUID, partition: int, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(share_state_key(group_id, topic_id, partition))) % num_partitions


def kafka_uuid_str(topic_id: UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")
