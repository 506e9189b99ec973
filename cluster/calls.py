"""The gateway↔actor contract: which operations a gateway asks of which actor, and what comes back.

Handlers speak in these terms and never name an actor method; the clients (cluster/clients/) turn
a call into a batched Ray call and an outcome back into one of these types. The operation enums
are `str` enums whose values are the names the actors dispatch on, so an actor comparing strings
understands them unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode


class CoordinatorOp(str, enum.Enum):
    """Operations of a group coordinator on one `__consumer_offsets` partition."""

    JOIN = "join"
    SYNC = "sync"
    HEARTBEAT = "heartbeat"
    LEAVE = "leave"
    COMMIT = "commit"
    FETCH_OFFSETS = "fetch_offsets"
    DESCRIBE = "describe"
    DELETE = "delete"
    SHARE_HEARTBEAT = "share_heartbeat"
    SHARE_DESCRIBE = "share_describe"
    SHARE_TOPICS = "share_topics"

    @property
    def parks(self) -> bool:
        """JoinGroup and SyncGroup may wait for the rest of the group: they travel as a stream."""
        return self in (CoordinatorOp.JOIN, CoordinatorOp.SYNC)


class PartitionOp(str, enum.Enum):
    """Batched operations of the actor leading a user partition."""

    PRODUCE = "produce"
    LIST_OFFSETS = "list_offsets"


@dataclass(frozen=True, slots=True)
class CoordinatorCall:
    """One operation on the coordinator of one partition; `item` is what the actor's batch holds."""

    op: CoordinatorOp
    partition: int
    request: Any

    def item(self, epoch: int) -> tuple[str, int, int, Any]:
        return (self.op.value, self.partition, epoch, self.request)


@dataclass(frozen=True, slots=True)
class Failed:
    """The call did not reach a coordinator that ran it (moving, loading, dead, storage failed)."""

    error_code: ErrorCode
    message: str = ""


@dataclass(frozen=True, slots=True)
class Listing:
    """ListGroups over every coordinator: the groups, or the error that makes the answer partial."""

    error_code: ErrorCode
    groups: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class LogEnd:
    """ListOffsets of one partition: (error, offset, timestamp, leader epoch)."""

    error_code: ErrorCode
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
