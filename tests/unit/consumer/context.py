"""A group coordinator shard under a manual clock, for consumer groups (KIP-848): the share groups'
context (tests/unit/share/context.py: replay of each result, timers, a shard rebuilt from the log)
with ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from coordinator.consumer.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from tests.unit.share.context import BAR, FOO, ZED, ShareContext, topic  # noqa: F401 (re-exported)

Owned = Mapping[UUID, Iterable[int]]


def owned(partitions: Owned) -> tuple[tuple[UUID, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(partitions.items()))


class ConsumerContext(ShareContext):
    def heartbeat(  # type: ignore[override]
        self,
        member_id: str,
        epoch: int,
        topics: Iterable[str] | None = None,
        *,
        owned_partitions: Owned | None = None,
        regex: str | None = None,
        group_id: str = "g",
        instance_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        assignor: str | None = None,
        api_version: int = 1,
        **kw: Any,
    ) -> ConsumerGroupHeartbeatResponse:
        req = ConsumerGroupHeartbeatRequest(
            group_id=group_id,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance_id,
            rack_id=kw.get("rack"),
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=tuple(topics) if topics is not None else None,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=owned(owned_partitions) if owned_partitions is not None else None,
            client_id=kw.get("client_id", "client"),
            client_host=kw.get("client_host", "/127.0.0.1"),
            api_version=api_version,
        )
        return self.run(self.shard.consumer_group_heartbeat(req))

    def join(self, member_id: str, topics: Iterable[str] | None = None, **kw: Any) -> ConsumerGroupHeartbeatResponse:  # type: ignore[override]
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("owned_partitions", {})
        return self.heartbeat(member_id, 0, topics, **kw)

    def leave(self, member_id: str, group_id: str = "g", epoch: int = -1, **kw: Any) -> ConsumerGroupHeartbeatResponse:  # type: ignore[override]
        return self.heartbeat(member_id, epoch, group_id=group_id, **kw)

    def describe(self, *group_ids: str):  # type: ignore[override]
        return self.run(self.shard.consumer_group_describe(tuple(group_ids)))


def assignment_of(response: ConsumerGroupHeartbeatResponse) -> dict[UUID, set[int]] | None:
    if response.assignment is None:
        return None
    return {t: set(ps) for t, ps in response.assignment}
