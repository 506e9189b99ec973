"""What the shard and the admin operations know of a group, whatever its kind (Kafka's Group
interface): classic groups (coordinator/classic/group.py) and share groups
(coordinator/share/group.py) implement it, so listing, describing for delete, deleting, offset
commit/fetch validation, loading and the failover view never ask which kind a group is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from kernel.codec import Record

if TYPE_CHECKING:  # pragma: no cover  (only for the annotations)
    from coordinator.classic.messages import ListedGroup, OffsetCommitRequest
    from coordinator.share.messages import ShareStateDelete
    from coordinator.share.metadata import TopicsImage


class Scheduler(Protocol):
    """Where a group arms timers (an operation's context: coordinator/context.py)."""

    config: Any

    def schedule(self, key: Any, delay_ms: int, method: str, *args: Any) -> None: ...


class Group(Protocol):
    group_id: str
    group_type: str  # "classic" | "share", as ListGroups v5 names it

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

    def validate_offset_fetch(self) -> ErrorCode | None: ...

    def offset_expired(self, now: int, value: Any, retention_ms: int) -> bool: ...

    def is_deletable_without_offsets(self) -> bool:
        """Whether the offsets cleanup deletes the group once its last offset expired."""

    def arm_sessions(self, ctx: Scheduler) -> None:
        """After a load: restart every member's session (from now)."""

    def durable_view(self) -> tuple[Any, ...]: ...
