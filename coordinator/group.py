"""What the shard and the admin operations know of a group, whatever its kind (Kafka's Group
interface): classic groups (coordinator/classic/group.py), share groups
(coordinator/share/group.py) and consumer groups (coordinator/consumer/group.py) implement it, so listing, describing for delete, deleting, offset
commit/fetch validation, loading and the failover view never ask which kind a group is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from kernel.codec import Record

if TYPE_CHECKING:  # pragma: no cover  (only for the annotations)
    from coordinator.classic.messages import ListedGroup, OffsetCommitRequest
    from coordinator.share.messages import ShareStateDelete
    from coordinator.share.metadata import TopicsImage


@dataclass(frozen=True, slots=True)
class OffsetExpirationCondition:
    """Kafka's OffsetExpirationConditionImpl: an offset expires `offsets.retention.minutes` after its
    base timestamp: the group's (when it became Empty) if given, else the offset's own commit."""

    state_timestamp: int | None = None

    def is_offset_expired(self, value: Any, now: int, retention_ms: int) -> bool:
        if value.expire_timestamp >= 0:  # an old client (OffsetCommit v2-v4) asked for its own retention
            return now >= value.expire_timestamp
        base = value.commit_timestamp if self.state_timestamp is None else self.state_timestamp
        return now - base >= retention_ms


class Scheduler(Protocol):
    """Where a group arms timers (an operation's context: coordinator/context.py)."""

    config: Any

    def schedule(self, key: Any, delay_ms: int, method: str, *args: Any) -> None: ...

    def share_session_timeout_ms(self, group_id: str) -> int: ...


class Group(Protocol):
    group_id: str
    group_type: str  # "classic" | "share" | "consumer", as ListGroups v5 names it

    def copy(self) -> Any: ...

    def memory_record(self, group_id: str, group: Any) -> Record | None:
        """The record that installs an operation's edited copy (None: the kind changes only by
        its durable records)."""

    def listed(self) -> "ListedGroup": ...

    def validate_delete(self) -> ErrorCode | None: ...

    def delete_records(self, offsets: Iterable[tuple[str, int]]) -> list[Record]:
        """The tombstones a DeleteGroups writes, the group's committed offsets' first."""

    def share_state_deletes(self, image: "TopicsImage") -> tuple["ShareStateDelete", ...]: ...

    def validate_offset_commit(self, req: "OffsetCommitRequest") -> ErrorCode | None: ...

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None: ...

    def validate_offset_delete(self) -> ErrorCode | None: ...

    def offset_expiration_condition(self) -> OffsetExpirationCondition | None:
        """How the group's offsets expire (Kafka's Group.offsetExpirationCondition); None: they do not."""

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether a member may still commit the topic: its offsets do not expire (KIP-496)."""

    def is_deletable_without_offsets(self) -> bool:
        """Whether the offsets cleanup deletes the group once its last offset expired."""

    def arm_sessions(self, ctx: Scheduler) -> None:
        """After a load: restart every member's session (from now)."""

    def durable_view(self) -> tuple[Any, ...]: ...
