"""Helpers the partition-routed handlers share."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode


def resolve_topic(gw: Any, name: str | None, topic_id: Any = None) -> tuple[str | None, ErrorCode]:
    """The topic name behind a name or a topic id, or the error a client gets for it."""
    leadership = gw.leadership
    if name is None and topic_id is not None:
        info = leadership.topics_by_id.get(topic_id)
        return (info.name, ErrorCode.none) if info else (None, ErrorCode.unknown_topic_id)
    if name is None or name not in leadership.topics:
        return None, ErrorCode.unknown_topic_or_partition
    return name, ErrorCode.none


async def refresh_if_unknown(gw: Any, names: list[str | None], topic_ids: list[Any] = ()) -> None:
    """A topic another gateway just created may not have reached this one yet: pull once."""
    # Loops, not any() over generators: this runs on every OffsetCommit (about 0.4 us less).
    leadership = gw.leadership
    topics = leadership.topics
    for name in names:
        if name is not None and name not in topics:
            await gw.router.refresh()
            return
    by_id = leadership.topics_by_id
    for topic_id in topic_ids:
        if topic_id is not None and topic_id not in by_id:
            await gw.router.refresh()
            return


def partition_known(gw: Any, topic: str, partition: int) -> bool:
    info = gw.leadership.topics.get(topic)
    return info is not None and 0 <= partition < info.partitions
