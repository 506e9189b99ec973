"""One operation's working set: private copies of the groups it changes, and what it produces.

An operation reads the shard's state, edits copies (never the state the runtime serves), and ends
with `result()`: its durable records, then a transient record per edited group carrying the new
copy, then the answers to requests it completes (parked JoinGroup/SyncGroup requests). Replaying
that result is the only way the change reaches the shard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.classic.group import ClassicGroup
from kernel.codec import Record
from coordinator.records import classic_group_state
from kernel.result import RequestToken, Result
from kernel.timer import Cancel, Schedule, ShardCall, TimerChange

if TYPE_CHECKING:  # pragma: no cover
    from coordinator.shard import GroupCoordinatorShard


class Txn:
    def __init__(self, shard: "GroupCoordinatorShard", token: RequestToken | None = None) -> None:
        self.shard = shard
        self.token = token
        self.now = shard.clock.now_ms()
        self.config = shard.config
        self.records: list[Record] = []
        self.timers: list[TimerChange] = []
        self.completions: list[tuple[RequestToken, Any]] = []
        self._edited: dict[str, ClassicGroup | None] = {}

    def group(self, group_id: str) -> Any:
        """The group as this operation sees it (its own copy if it edited it); do not mutate."""
        if group_id in self._edited:
            return self._edited[group_id]
        return self.shard.groups.get(group_id)

    def edit(self, group_id: str) -> ClassicGroup:
        if group_id not in self._edited:
            current = self.shard.groups.get(group_id)
            if not isinstance(current, ClassicGroup):
                raise KeyError(f"no classic group {group_id!r} to edit")
            self._edited[group_id] = current.copy()
        group = self._edited[group_id]
        assert group is not None
        return group

    def create(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, state_timestamp=self.now)
        self._edited[group_id] = group
        return group

    def drop(self, group_id: str) -> None:
        self._edited[group_id] = None

    def write(self, record: Record) -> None:
        self.records.append(record)

    def schedule(self, key: Any, delay_ms: int, method: str, *args: Any) -> None:
        """Arm `key` to run the shard's `method(*args)` after delay_ms (once this result is durable)."""
        self.timers.append(Schedule(key, delay_ms, ShardCall(method, args)))

    def cancel(self, key: Any) -> None:
        self.timers.append(Cancel(key))

    def reply(self, token: RequestToken | None, response: Any) -> None:
        if token is not None:
            self.completions.append((token, response))

    def result(self, response: Any = None) -> Result:
        records = self.records + [classic_group_state(gid, g) for gid, g in self._edited.items()]
        return Result(records=records, response=response, completions=self.completions, timers=self.timers)
