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
    leadership = gw.leadership
    if any(n is not None and n not in leadership.topics for n in names) or any(
        t is not None and t not in leadership.topics_by_id for t in topic_ids
    ):
        await gw.router.refresh()


def partition_known(gw: Any, topic: str, partition: int) -> bool:
    info = gw.leadership.topics.get(topic)
    return info is not None and 0 <= partition < info.partitions
