"""What a client asks of an actor, one item of a batch each: built by the handlers' calls with the
leader epoch the router chose, and crossing Ray as `@message` values (a class and a tuple of its
fields, kernel/message.py).
"""

from __future__ import annotations

from typing import Any

from kernel.message import message
from sharestate.state_batches import AcknowledgementBatch

from cluster.calls.operations import CoordinatorOp, ShareStateOp
from cluster.share.requests import ShareItem


@message
class CoordinatorItem:
    """One operation on one coordinator partition, routed at `epoch`: what a coordinator's batch holds."""

    op: CoordinatorOp | ShareStateOp
    partition: int
    epoch: int
    request: Any


@message
class ParkedItem:
    """An operation that may park, and where its answer goes: the gateway's channel and ticket."""

    channel: str
    ticket: int
    item: CoordinatorItem


@message
class CoordinatorCall:
    """One operation on the coordinator of one partition, before the router picks the epoch."""

    op: CoordinatorOp
    partition: int
    request: Any

    def item(self, epoch: int) -> CoordinatorItem:
        return CoordinatorItem(self.op, self.partition, epoch, self.request)


@message
class FetchPartition:
    """One partition of a Fetch: where to read, how much, and the client's view of its leader."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    client_epoch: int = -1  # the client's current leader epoch; -1 when it sent none

    def item(self, epoch: int) -> "FetchItem":
        return FetchItem(self.topic, self.partition, epoch, self.client_epoch, self.offset, self.max_bytes)


# The partition leaders' items cross on every produce, fetch and list: flat, one tuple a batch
# (kernel/message.py), as the share fetch items do.


@message(flat=True)
class ProduceItem:
    """One Produce partition's records, routed at `epoch`. `acks_all` and `timeout_ms` matter to a
    replicated partition (acks=all waits for its in-sync replicas, up to the request's timeout);
    one kept in one copy answers every acks alike, once its log has the records."""

    topic: str
    partition: int
    epoch: int
    records: bytes
    acks_all: bool = True
    timeout_ms: int = 30_000


@message(flat=True)
class FetchItem:
    """One Fetch partition routed at `epoch`: the client's view of the leader (KIP-320), where to
    read and how much."""

    topic: str
    partition: int
    epoch: int
    client_epoch: int
    offset: int
    max_bytes: int


@message(flat=True)
class ListOffsetsItem:
    """One ListOffsets partition routed at `epoch`: the offset for `timestamp` (or -1 latest, -2
    earliest), with the client's view of the leader."""

    topic: str
    partition: int
    epoch: int
    client_epoch: int
    timestamp: int


@message
class SharePartitionCall:
    """One partition of a ShareFetch or ShareAcknowledge: what to acknowledge, whether to fetch."""

    topic: str
    partition: int
    topic_id: Any
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()
    fetch: bool = True

    def item(self, epoch: int) -> ShareItem:
        return ShareItem(self.topic, self.partition, epoch, self.topic_id, self.acknowledgements, self.fetch)


@message
class ShareFetchSpec:
    """What a ShareFetch asks of every leader concerned: whose session, how long, how much."""

    group_id: str
    member_id: str
    gateway: int = 0  # the gateway whose share session sends it (the leader's eviction counts them)
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
    record_limit: bool = False  # ShareAcquireMode RECORD_LIMIT (v2): max_records is exact
