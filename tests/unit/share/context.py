"""A group coordinator shard under a manual clock, for share groups (Kafka's GroupMetadataManagerTestContext).

`run` does what the runtime does with a Result: replay its records, remember the durable ones
(`written`) and arm its timers (`timer`). `advance` moves time and runs every timer that falls due. `initialize` plays the
cluster's part after a heartbeat: it answers the share-state initializations the heartbeat asked for.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import JoinGroupRequest, SyncGroupRequest
from kernel.clock import ManualClock
from kernel.codec import Record
from coordinator.config import GroupCoordinatorConfig
from coordinator.records import CODEC
from coordinator.share.messages import (
    ShareGroupHeartbeatRequest,
    ShareHeartbeatOutcome,
    ShareStateInit,
    ShareStateInitResult,
    TopicImage,
)
from coordinator.shard import GroupCoordinatorShard
from kernel.timer import ManualTimer

FOO = UUID(int=0xF00)
BAR = UUID(int=0xBA4)
ZED = UUID(int=0x2ED)


def topic(name: str, partitions: int, topic_id: UUID | None = None) -> TopicImage:
    ids = {"foo": FOO, "bar": BAR, "zed": ZED}
    default = UUID(int=int.from_bytes(name.encode()[:15].ljust(15, b"\0"), "big"))
    return TopicImage(name, topic_id or ids.get(name) or default, partitions)


class ShareContext:
    def __init__(self, *topics: TopicImage, **config: Any) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = GroupCoordinatorConfig(**config)
        self.clock = ManualClock(1_000_000)
        self.timer = ManualTimer(self.clock)
        self.shard = self.new_shard()
        self.written: list[Record] = []
        self.log: list[Record] = []  # every durable record ever written, for rebuilding by replay
        self.pending_inits: list[ShareStateInit] = []
        if topics:
            self.set_topics(*topics)

    def new_shard(self) -> GroupCoordinatorShard:
        ids = itertools.count(1)
        return GroupCoordinatorShard(
            ("__consumer_offsets", 0), self.clock, config=self.config, new_member_id=lambda prefix: f"{prefix}-{next(ids)}"
        )

    # -- the runtime's part ----------------------------------------------------------------------

    def run(self, result) -> Any:
        for record in result.records:
            self.shard.replay(record)
        durable = [r for r in result.records if not CODEC.is_transient(r)]
        self.written += durable
        self.log += durable
        self.timer.apply(result.timers, self.shard)
        return result.response

    def take_written(self) -> list[Record]:
        out, self.written = self.written, []
        return out

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        while (due := self.timer.pop_expired()) is not None:
            self.run(due[1]())

    # -- requests ----------------------------------------------------------------------------------

    def set_topics(self, *topics: TopicImage):
        return self.run(self.shard.update_topics(tuple(topics)))

    def heartbeat(
        self,
        member_id: str,
        epoch: int,
        topics: Iterable[str] | None = None,
        *,
        group_id: str = "g",
        rack: str | None = None,
        client_id: str = "client",
        client_host: str = "/127.0.0.1",
    ) -> ShareHeartbeatOutcome:
        req = ShareGroupHeartbeatRequest(
            group_id, member_id, epoch, rack, tuple(topics) if topics is not None else None, client_id, client_host
        )
        outcome = self.run(self.shard.share_group_heartbeat(req))
        self.pending_inits += outcome.initialize
        return outcome

    def join(self, member_id: str, topics: Iterable[str], **kw: Any) -> ShareHeartbeatOutcome:
        return self.heartbeat(member_id, 0, topics, **kw)

    def leave(self, member_id: str, group_id: str = "g") -> ShareHeartbeatOutcome:
        return self.heartbeat(member_id, -1, group_id=group_id)

    def initialize(self, inits: Iterable[ShareStateInit] | None = None, error: ErrorCode = ErrorCode.none) -> None:
        """Answer initializations (by default every one asked for so far) as the share coordinator would."""
        if inits is None:
            inits, self.pending_inits = self.pending_inits, []
        by_group: dict[str, list[ShareStateInitResult]] = {}
        for init in inits:
            by_group.setdefault(init.group_id, []).append(ShareStateInitResult(init.topic_id, init.partition, error))
        for group_id, results in by_group.items():
            self.run(self.shard.share_state_initialized(group_id, tuple(results)))

    def describe(self, *group_ids: str):
        return self.run(self.shard.share_group_describe(tuple(group_ids)))

    def group(self, group_id: str = "g"):
        return self.shard.groups.get(group_id)

    def member(self, member_id: str, group_id: str = "g"):
        return self.shard.groups[group_id].members[member_id]

    # -- failover ----------------------------------------------------------------------------------

    def replayed(self, *, load: bool = False, timer: ManualTimer | None = None) -> GroupCoordinatorShard:
        """A fresh shard rebuilt from every record written so far (after an encode/decode round trip)."""
        fresh = self.new_shard()
        fresh.update_topics(tuple(self.shard.topics_image.by_id.values()))
        for record in self.log:
            key, value = CODEC.encode(record)
            fresh.replay(CODEC.decode(key, value))
        if load:
            (timer or ManualTimer(self.clock)).apply(fresh.on_loaded().timers, fresh)
        return fresh


def classic_group(ctx: ShareContext, group_id: str) -> str:
    """A Stable classic group with one member; returns the member id."""
    join = JoinGroupRequest(
        group_id, 10_000, 30_000, "", None, "consumer", (("range", b"meta"),), client_id="c", requires_known_member_id=False
    )
    ctx.run(ctx.shard.join_group(join, 10_001))
    ctx.advance(0)  # the initial delayed join completes
    member_id = next(iter(ctx.group(group_id).members))
    sync = SyncGroupRequest(group_id, 1, member_id, None, "consumer", "range", ((member_id, b"assignment"),))
    ctx.run(ctx.shard.sync_group(sync, 10_002))
    return member_id
