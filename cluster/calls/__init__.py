"""The gateway↔actor contract: which operations a gateway asks of which actor, and what comes back.

Handlers speak in these terms and never name an actor method; the clients (cluster/clients/) turn
a call into a batched Ray call and an outcome back into one of these types. The operation enums
are `str` enums whose values are the names the actors dispatch on, so an actor comparing strings
understands them unchanged.
"""

from __future__ import annotations

import enum
import pickle
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcknowledgementBatch

from cluster.share.requests import ShareItem


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
    SHARE_DELETE_PREPARE = "share_delete_prepare"
    OFFSET_DELETE = "offset_delete"
    SHARE_OFFSETS_ALTER = "share_offsets_alter"
    SHARE_OFFSETS_INITIALIZED = "share_offsets_initialized"
    SHARE_OFFSETS_DELETE = "share_offsets_delete"
    SHARE_OFFSETS_DELETE_COMPLETE = "share_offsets_delete_complete"

    @property
    def parks(self) -> bool:
        """JoinGroup and SyncGroup may wait for the rest of the group: they travel as a stream."""
        return self is CoordinatorOp.JOIN or self is CoordinatorOp.SYNC  # identity: no enum __eq__ per request


# The group coordinators' batches and their answers cross Ray packed: one C pickle each way
# (`execute_packed`). Ray pickles arguments and results with cloudpickle, whose Python
# reducer_override runs for every string and tuple: 50 heartbeats took 63 us against 24 us packed
# here, and their 50 answers 61 us against 17 us, about 2 us a heartbeat on the gateway and the
# coordinator together. What C pickle refuses goes as Ray would send it (a list), and comes back so.
PACKED_METHODS = frozenset({"execute_packed"})


def pack(values: list[Any]) -> bytes | list[Any]:
    try:
        return pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return values


def unpack(data: bytes | list[Any]) -> list[Any]:
    return pickle.loads(data) if type(data) is bytes else data


class PartitionOp(str, enum.Enum):
    """Operations of the actor leading a user partition. Produce and ListOffsets are batched per
    loop tick; Fetch and ShareFetch long-poll, one call per actor and request; the rest end a
    long poll early or act on a member's or a group's share partitions."""

    PRODUCE = "produce"
    LIST_OFFSETS = "list_offsets"
    FETCH = "fetch"
    SHARE_FETCH = "share_fetch"
    SHARE_WAKE = "share_wake"
    SHARE_RELEASE = "share_release"
    SHARE_EVICT = "share_evict"


@dataclass(frozen=True, slots=True)
class CoordinatorCall:
    """One operation on the coordinator of one partition; `item` is what the actor's batch holds."""

    op: CoordinatorOp
    partition: int
    request: Any

    def item(self, epoch: int) -> tuple[str, int, int, Any]:
        return (self.op.value, self.partition, epoch, self.request)


# An item of a coordinator's batched call: (operation name, partition, leader epoch the gateway
# routed with, request).
Item = tuple[str, int, int, Any]


@dataclass(frozen=True, slots=True)
class Failed:
    """The call did not reach a coordinator that ran it (moving, loading, dead, storage failed):
    what the coordinator answers for an operation it could not run, and what the client answers
    for a call that found no coordinator. The gateway answers the API's error response."""

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


@dataclass(frozen=True, slots=True)
class FetchPartition:
    """One partition of a Fetch: where to read, how much, and the client's view of its leader."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    client_epoch: int = -1  # the client's current leader epoch; -1 when it sent none

    def item(self, epoch: int) -> tuple[str, int, int, int, int, int]:
        return (self.topic, self.partition, epoch, self.client_epoch, self.offset, self.max_bytes)


@dataclass(frozen=True, slots=True)
class SharePartitionCall:
    """One partition of a ShareFetch or ShareAcknowledge: what to acknowledge, whether to fetch."""

    topic: str
    partition: int
    topic_id: Any
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()
    fetch: bool = True

    def item(self, epoch: int) -> ShareItem:
        return ShareItem(self.topic, self.partition, epoch, self.topic_id, self.acknowledgements, self.fetch)


@dataclass(frozen=True, slots=True)
class ShareFetchSpec:
    """What a ShareFetch asks of every leader concerned: whose session, how long, how much."""

    group_id: str
    member_id: str
    gateway: int = 0  # the gateway whose share session sends it (the leader's eviction counts them)
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
