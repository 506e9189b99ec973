"""What gateways send to a partition leader's share partitions, and what they get back.

Each crosses Ray on every ShareFetch, so each pickles as plain tuples of ints, strings and bytes
(as ProduceOutcome and FetchOutcome do): with cloudpickle's default reduce of slots dataclasses
holding enums and nested dataclasses a call of three partitions took 35-49 us to pickle, 14 us
now, and their answers 27-29 us, 16 us now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate.state_batches import AcknowledgementBatch, AcquiredRecords


@dataclass(frozen=True, slots=True)
class ShareItem:
    """One partition of a ShareFetch or ShareAcknowledge, routed to its leader at `epoch`."""

    topic: str
    partition: int
    epoch: int
    topic_id: Any
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()
    fetch: bool = True

    def __reduce__(self):
        return _share_item, _item_fields(self)


@dataclass(frozen=True, slots=True)
class ShareFetchCall:
    group_id: str
    member_id: str
    items: tuple[ShareItem, ...]
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
    wake_key: str | None = None  # lets the gateway end the long poll early (see FetchWakers)
    gateway: int = 0  # the gateway whose share session sent it (see SharePartitionManager.evict)

    def __reduce__(self):
        return _share_fetch_call, (
            self.group_id, self.member_id, tuple(_item_fields(i) for i in self.items), self.max_wait_ms,
            self.min_bytes, self.max_bytes, self.max_records, self.wake_key, self.gateway,
        )


@dataclass(slots=True)
class ShareOutcome:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    acknowledge_error_code: ErrorCode = ErrorCode.none
    acknowledge_error_message: str | None = None
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()

    def __reduce__(self):
        return _share_outcome, (
            self.error_code.value, self.error_message, self.acknowledge_error_code.value, self.acknowledge_error_message,
            self.records, tuple((a.first_offset, a.last_offset, a.delivery_count) for a in self.acquired),
        )

    def fail(self, code: ErrorCode, message: str | None, acknowledging: bool) -> None:
        self.error_code, self.error_message = code, message
        if acknowledging:
            self.acknowledge_error_code, self.acknowledge_error_message = code, message


def persister_error(code: ErrorCode) -> ErrorCode:
    """The error a client gets when the share coordinator refused or could not be reached
    (Kafka's SharePartition.fetchPersisterError)."""
    if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch):
        return ErrorCode.not_leader_or_follower
    if code in (ErrorCode.group_id_not_found, ErrorCode.unknown_topic_or_partition):
        return code
    return ErrorCode.unknown_server_error


def _item_fields(item: ShareItem) -> tuple:
    acks = tuple((a.first_offset, a.last_offset, a.acknowledge_types) for a in item.acknowledgements)
    return item.topic, item.partition, item.epoch, item.topic_id, acks, item.fetch


def _share_item(topic: str, partition: int, epoch: int, topic_id: Any, acks: tuple, fetch: bool) -> ShareItem:
    return ShareItem(topic, partition, epoch, topic_id, tuple(AcknowledgementBatch(*a) for a in acks), fetch)


def _share_fetch_call(group_id: str, member_id: str, items: tuple, *rest: Any) -> ShareFetchCall:
    return ShareFetchCall(group_id, member_id, tuple(_share_item(*i) for i in items), *rest)


def _share_outcome(code: int, message: str | None, ack_code: int, ack_message: str | None, records: bytes,
                   acquired: tuple) -> ShareOutcome:
    return ShareOutcome(ErrorCode(code), message, ErrorCode(ack_code), ack_message, records,
                        tuple(AcquiredRecords(*a) for a in acquired))
