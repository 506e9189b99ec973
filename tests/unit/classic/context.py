"""A group coordinator shard under a manual clock (Kafka's GroupMetadataManagerTestContext).

`run` does what the runtime does with a Result: replay its records, remember the durable ones
(`written`), deliver answers to parked requests (`answers`) and arm its timers (`timer`). `advance` moves time and runs
every timer that falls due, in deadline order.
"""

from __future__ import annotations

import itertools
from typing import Any

from coordinator.classic.messages import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kernel.clock import ManualClock
from kernel.codec import Record
from coordinator.config import GroupCoordinatorConfig
from coordinator.records import CODEC
from kernel.result import PARKED
from coordinator.shard import GroupCoordinatorShard
from kernel.timer import ManualTimer

PROTOCOLS = (("range", b"range-meta"), ("roundrobin", b"rr-meta"))


class Context:
    def __init__(self, **config: Any) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = GroupCoordinatorConfig(**config)
        self.clock = ManualClock(1_000_000)
        self.timer = ManualTimer(self.clock)
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(
            ("__consumer_offsets", 0), self.clock, config=self.config, new_member_id=lambda prefix: f"{prefix}-{next(ids)}"
        )
        self._tokens = itertools.count(1)
        self.written: list[Record] = []
        self.answers: dict[int, Any] = {}

    # -- the runtime's part ----------------------------------------------------------------------

    def run(self, result) -> Any:
        for record in result.records:
            self.shard.replay(record)
        self.written += [r for r in result.records if not CODEC.is_transient(r)]
        for token, response in result.completions:
            self.answers[token] = response
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

    def join(self, group_id: str = "g", member_id: str = "", *, instance: str | None = None, session: int = 10_000,
             rebalance: int = 30_000, protocols=PROTOCOLS, client_id: str = "client", v4: bool = True) -> "Pending":
        token = next(self._tokens)
        req = JoinGroupRequest(group_id, session, rebalance, member_id, instance, "consumer", protocols,
                               client_id=client_id, client_host="/127.0.0.1", requires_known_member_id=v4)
        return Pending(self, token, self.run(self.shard.join_group(req, token)))

    def join_new(self, group_id: str = "g", **kw: Any) -> "Pending":
        """The two-phase join of JoinGroup v4+: MEMBER_ID_REQUIRED, then join with that id.

        Static members skip the first phase: their group.instance.id identifies them already.
        """
        first = self.join(group_id, **kw)
        if kw.get("instance") is not None:
            return first
        assert first.response.error_code.name == "member_id_required", first.response
        return self.join(group_id, first.response.member_id, **kw)

    def sync(self, member_id: str, generation: int, group_id: str = "g", assignments=(), instance=None,
             protocol_type="consumer", protocol_name=None) -> "Pending":
        token = next(self._tokens)
        req = SyncGroupRequest(group_id, generation, member_id, instance, protocol_type, protocol_name, tuple(assignments))
        return Pending(self, token, self.run(self.shard.sync_group(req, token)))

    def heartbeat(self, member_id: str, generation: int, group_id: str = "g", instance=None):
        return self.run(self.shard.heartbeat(HeartbeatRequest(group_id, generation, member_id, instance)))

    def leave(self, *members: LeavingMember | str, group_id: str = "g"):
        leaving = tuple(m if isinstance(m, LeavingMember) else LeavingMember(m) for m in members)
        return self.run(self.shard.leave_group(LeaveGroupRequest(group_id, leaving)))

    def commit(self, offsets: dict[tuple[str, int], int], *, member_id="", generation=-1, group_id="g",
               instance=None, metadata=None, retention=-1, api_version=9):
        by_topic: dict[str, list[CommitPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(CommitPartition(partition, offset, -1, metadata))
        req = OffsetCommitRequest(group_id, generation, member_id, instance,
                                  tuple((t, tuple(ps)) for t, ps in by_topic.items()), retention, api_version)
        return self.run(self.shard.commit_offsets(req))

    def fetch(self, group_id="g", topics=None):
        return self.run(self.shard.fetch_offsets(OffsetFetchRequest(group_id, topics)))

    def group(self, group_id: str = "g"):
        return self.shard.groups.get(group_id)


class Pending:
    """A request that may have been parked: `response` if answered at once, else wait for `answer`."""

    def __init__(self, ctx: Context, token: int, response: Any) -> None:
        self.ctx = ctx
        self.token = token
        self.response = response

    @property
    def parked(self) -> bool:
        return self.response is PARKED and self.token not in self.ctx.answers

    @property
    def answer(self) -> Any:
        if self.response is not PARKED:
            return self.response
        assert self.token in self.ctx.answers, "still parked"
        return self.ctx.answers[self.token]
