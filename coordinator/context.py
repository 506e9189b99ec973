"""One operation's working set: private copies of the groups it changes, and what it produces.

An operation reads the shard's state, edits copies (never the state the runtime serves), and ends
with `result()`: its durable records, then a record per edited group installing the new copy
(each group kind says which: `Group.memory_record`), then the answers to requests it completes
(parked JoinGroup/SyncGroup requests) and the timers it arms or cancels. Replaying that result is
the only way the change reaches the shard. Any group kind may be created, edited or dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

from coordinator.config import GroupConfigManager, GroupCoordinatorConfig
from coordinator.group import Group
from coordinator.share.metadata import TopicsImage
from kernel.clock import Clock
from kernel.codec import Record
from kernel.result import RequestToken, Result
from kernel.timer import Cancel, Schedule, ShardCall, TimerChange


class ShardState(Protocol):
    """What an operation may read of its shard (coordinator/shard.py is the one implementation)."""

    clock: Clock
    config: GroupCoordinatorConfig
    groups: dict[str, Group]
    offsets: dict[str, dict[tuple[str, int], Any]]
    topics_image: TopicsImage
    topics_new_at: int
    new_member_id: Callable[[str], str]
    group_config_manager: GroupConfigManager


class OperationContext:
    def __init__(self, state: ShardState, token: RequestToken | None = None) -> None:
        self.state = state
        self.token = token
        self.now = state.clock.now_ms()
        self.config = state.config
        self.records: list[Record] = []
        self.completions: list[tuple[RequestToken, Any]] = []
        self.timers: list[TimerChange] = []
        # group id -> (the group as the shard holds it, its new version or None when dropped)
        self._edited: dict[str, tuple[Group | None, Group | None]] = {}

    def group(self, group_id: str) -> Any:
        """The group as this operation sees it (its own copy if it edited it); do not mutate."""
        if group_id in self._edited:
            return self._edited[group_id][1]
        return self.state.groups.get(group_id)

    def edit(self, group_id: str) -> Any:
        if group_id not in self._edited:
            current = self.state.groups.get(group_id)
            if current is None:
                raise KeyError(f"no group {group_id!r} to edit")
            self._edited[group_id] = (current, current.copy())
        group = self._edited[group_id][1]
        assert group is not None
        return group

    def create(self, group: Group) -> Any:
        self._edited[group.group_id] = (None, group)
        return group

    def drop(self, group_id: str) -> None:
        before, after = self._edited.get(group_id, (self.state.groups.get(group_id), None))
        self._edited[group_id] = (before if before is not None else after, None)

    def share_session_timeout_ms(self, group_id: str) -> int:
        """Kafka's GroupMetadataManager.shareGroupSessionTimeoutMs: the group's config, else the broker's."""
        own = self.state.group_config_manager.group_config(group_id)
        if own is None or own.share_session_timeout_ms is None:
            return self.config.share_session_timeout_ms
        return own.share_session_timeout_ms

    def share_heartbeat_interval_ms(self, group_id: str) -> int:
        """Kafka's GroupMetadataManager.shareGroupHeartbeatIntervalMs: the group's config, else the broker's."""
        own = self.state.group_config_manager.group_config(group_id)
        if own is None or own.share_heartbeat_interval_ms is None:
            return self.config.share_heartbeat_interval_ms
        return own.share_heartbeat_interval_ms

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """Kafka's GroupMetadataManager.consumerGroupSessionTimeoutMs: the group's config, else the broker's."""
        own = self.state.group_config_manager.group_config(group_id)
        if own is None or own.consumer_session_timeout_ms is None:
            return self.config.consumer_session_timeout_ms
        return own.consumer_session_timeout_ms

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        """Kafka's GroupMetadataManager.consumerGroupHeartbeatIntervalMs: the group's config, else the broker's."""
        own = self.state.group_config_manager.group_config(group_id)
        if own is None or own.consumer_heartbeat_interval_ms is None:
            return self.config.consumer_heartbeat_interval_ms
        return own.consumer_heartbeat_interval_ms

    def write(self, record: Record) -> None:
        self.records.append(record)

    def schedule(self, key: Hashable, delay_ms: int, method: str, *args: Any) -> None:
        """Arm `key` to run the shard's `method(*args)` after delay_ms (once this result is durable)."""
        self.timers.append(Schedule(key, delay_ms, ShardCall(method, args)))

    def schedule_if_absent(self, key: Hashable, delay_ms: int, method: str, *args: Any) -> None:
        """As `schedule`, unless a timer is armed under `key` already (it keeps its deadline)."""
        self.timers.append(Schedule(key, delay_ms, ShardCall(method, args), if_absent=True))

    def cancel(self, key: Hashable) -> None:
        self.timers.append(Cancel(key))

    def reply(self, token: RequestToken | None, response: Any) -> None:
        if token is not None:
            self.completions.append((token, response))

    def result(self, response: Any = None) -> Result:
        installs = []
        for group_id, (before, after) in self._edited.items():
            kind = after if after is not None else before
            if kind is not None:
                record = kind.memory_record(group_id, after)
                if record is not None:
                    installs.append(record)
        return Result(self.records + installs, response, self.completions, self.timers)
