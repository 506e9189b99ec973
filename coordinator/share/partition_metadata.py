"""Which share partitions of a share group have share state, as ShareGroupStatePartitionMetadata
records it (Kafka 4.x ShareGroupStatePartitionMetadataInfo, ShareGroup.InitMapValue,
GroupMetadataManager.combineInitMaps and shareGroupBuildPartitionDeleteRequest's candidates).

Values only: the operations that move partitions between the three maps are in share_state.py
(initialize, topic deletion) and deletion.py (DeleteGroups)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from coordinator.share.messages import ShareStateDelete
from coordinator.share.metadata import TopicsImage


@dataclass(frozen=True, slots=True)
class InitMapValue:
    """Kafka's ShareGroup.InitMapValue: a topic's name, partitions and when they were recorded."""

    name: str
    partitions: frozenset[int]
    timestamp: int


@dataclass(frozen=True, slots=True)
class ShareStatePartitionMetadata:
    """Kafka's ShareGroupStatePartitionMetadataInfo: share partitions whose share state is being
    initialized, is initialized (and so may be assigned), or is being deleted."""

    initializing: Mapping[UUID, InitMapValue] = field(default_factory=dict)
    initialized: Mapping[UUID, InitMapValue] = field(default_factory=dict)
    deleting: Mapping[UUID, str] = field(default_factory=dict)  # topic id -> topic name


EMPTY_SHARE_STATE = ShareStatePartitionMetadata()


def combine_init_maps(first: Mapping[UUID, InitMapValue], second: Mapping[UUID, InitMapValue]) -> dict[UUID, InitMapValue]:
    """Kafka's combineInitMaps: partitions united per topic; name and timestamp from `second` where
    it has the topic."""
    combined: dict[UUID, InitMapValue] = {}
    for topic_id in set(first) | set(second):
        old, new = first.get(topic_id), second.get(topic_id)
        partitions = (old.partitions if old else frozenset()) | (new.partitions if new else frozenset())
        source = new if new is not None else old
        assert source is not None
        combined[topic_id] = InitMapValue(source.name, partitions, source.timestamp)
    return combined


def known_partitions(info: ShareStatePartitionMetadata) -> dict[UUID, InitMapValue]:
    """Initialized and initializing partitions: those whose state may exist (an initialization may
    have succeeded without the answer reaching us; deleting absent state is harmless)."""
    return combine_init_maps(info.initialized, info.initializing)


def partitions_to_delete(info: ShareStatePartitionMetadata, image: TopicsImage) -> dict[UUID, frozenset[int]]:
    """Kafka's shareGroupBuildPartitionDeleteRequest candidates: the known partitions, and topics
    left deleting by an earlier attempt, whole, if they still exist (a retry must cover them)."""
    out = {tid: v.partitions for tid, v in known_partitions(info).items()}
    for topic_id in info.deleting:
        topic = image.by_id.get(topic_id)
        if topic is not None:
            out[topic_id] = out.get(topic_id, frozenset()) | frozenset(range(topic.partitions))
    return out


def deletes_for(group_id: str, partitions: Mapping[UUID, frozenset[int]]) -> tuple[ShareStateDelete, ...]:
    return tuple(
        ShareStateDelete(group_id, topic_id, partition)
        for topic_id in sorted(partitions)
        for partition in sorted(partitions[topic_id])
    )
