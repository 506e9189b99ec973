"""Topic partitions as the members of modern groups (consumer and share, KIP-848 and KIP-932) hold
them: topic id -> a frozenset of partitions, never an empty one, and the sorted view the groups'
durable views and records compare."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from uuid import UUID

TopicPartitions = Mapping[UUID, frozenset[int]]  # topic id -> partitions; never an empty set


def freeze_partitions(partitions: Mapping[UUID, Iterable[int]]) -> dict[UUID, frozenset[int]]:
    """An assignment in canonical form: frozensets, no topic without partitions."""
    out: dict[UUID, frozenset[int]] = {}
    for topic_id, ps in partitions.items():
        frozen = ps if isinstance(ps, frozenset) else frozenset(ps)
        if frozen:
            out[topic_id] = frozen
    return out


def partitions_view(partitions: Mapping[UUID, Iterable[int]]) -> tuple[tuple[UUID, tuple[int, ...]], ...]:
    """The assignment sorted by topic id, each topic's partitions ascending."""
    return tuple((topic_id, tuple(sorted(ps))) for topic_id, ps in sorted(partitions.items()))
