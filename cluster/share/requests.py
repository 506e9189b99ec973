"""What gateways send to a partition leader's share partitions, and what they get back.

Each crosses Ray on every ShareFetch, so each is a flat message (kernel/message.py): one tuple of
ints, strings and bytes for the whole call or answer. With cloudpickle's default reduce of slots
dataclasses holding enums and nested dataclasses a call of three partitions took 35-49 us to
pickle and its answers 27-29 us; flat, 8.5 and 8 us.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kernel.message import message
from sharestate.state_batches import AcknowledgementBatch, AcquiredRecords


@message(flat=True)
class ShareItem:
    """One partition of a ShareFetch or ShareAcknowledge, routed to its leader at `epoch`."""

    topic: str
    partition: int
    epoch: int
    topic_id: Any
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()
    fetch: bool = True


@message(flat=True)
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
    record_limit: bool = False  # ShareAcquireMode RECORD_LIMIT: acquire at most max_records, exactly


@message(flat=True, frozen=False)
class ShareOutcome:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    acknowledge_error_code: ErrorCode = ErrorCode.none
    acknowledge_error_message: str | None = None
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()

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
