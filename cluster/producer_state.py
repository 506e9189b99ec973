"""Idempotent producers on a partition leader: Kafka's producer state for non-transactional batches.

Per (partition, producer id) the leader keeps the producer's epoch and the metadata of its last
five batches (Kafka's `ProducerStateEntry`, `NUM_BATCHES_TO_RETAIN = 5`: a producer has at most
five requests in flight per partition). Every batch of one Produce request for one partition is
checked against that state before any of them is appended (Kafka's
`UnifiedLog.analyzeAndValidateProducerState` and `ProducerAppendInfo`, for `AppendOrigin.CLIENT`):

- a batch whose epoch is the producer's and whose first and last sequence equal one of those five
  batches is a retry: the request is answered with the original offsets and nothing is appended;
- an epoch older than the producer's is fenced: `INVALID_PRODUCER_EPOCH`;
- a newer epoch must start at sequence 0, otherwise `OUT_OF_ORDER_SEQUENCE_NUMBER`;
- in the same epoch the first sequence must follow the last one (wrapping from 2^31-1 to 0),
  otherwise `OUT_OF_ORDER_SEQUENCE_NUMBER`;
- a producer the leader has no state for is accepted at any sequence: since KIP-360 (Kafka 2.5)
  the broker no longer answers `UNKNOWN_PRODUCER_ID`, because the producer's batches may simply
  have been removed by retention.

Nothing here is written anywhere: the stored batch headers are the durable form. A leader that
loads a partition rebuilds the state from them (`rebuild`), as Kafka's `loadProducersFromRecords`
does for the log after its last producer snapshot (we keep no snapshots, so the whole log).
Entries are immutable, so a group commit can stage the entries of several requests and drop them
if the write fails.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from cluster.recordbatch import CONTROL_FLAG, BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap from 2^31-1 to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """ProducerAppendInfo.inSequence."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What a retry is matched against and answered with (Kafka's BatchMetadata)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: tuple[BatchMetadata, ...] = ()  # oldest first, at most NUM_BATCHES_TO_RETAIN

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """ProducerStateEntry.findDuplicateBatch: same epoch and exactly the same sequence range."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        """ProducerStateEntry.addBatch: a new epoch forgets the old epoch's batches."""
        kept = self.batches if epoch == self.producer_epoch else ()
        return ProducerStateEntry(self.producer_id, epoch, (*kept, batch)[-NUM_BATCHES_TO_RETAIN:])


@dataclass(frozen=True, slots=True)
class Accepted:
    """Every batch passed: the producers' entries once the batches are in the log."""

    entries: dict[int, ProducerStateEntry] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retry of a batch already in the log: answer with its offsets, append nothing."""

    batch: BatchMetadata


@dataclass(frozen=True, slots=True)
class Rejected:
    error_code: ErrorCode
    message: str


Verdict = Accepted | Duplicate | Rejected


class ProducerStateManager:
    """The producer entries of one partition (Kafka's ProducerStateManager, without transactions)."""

    def __init__(self, producers: dict[int, ProducerStateEntry] | None = None) -> None:
        self.producers: dict[int, ProducerStateEntry] = producers if producers is not None else {}

    @classmethod
    def rebuild(cls, headers: Iterable[BatchHeader]) -> ProducerStateManager:
        """The state the stored batches leave, read from their headers alone.

        Batches in the log were validated when they were appended, so they are replayed without
        checks (Kafka loads with AppendOrigin.REPLICATION for the same reason).
        """
        # Per producer: its latest epoch and that epoch's last batches (what with_batch would leave,
        # without building an entry per batch: a long log has many).
        epochs: dict[int, int] = {}
        latest: dict[int, deque[BatchHeader]] = {}
        for header in headers:
            producer_id = header.producer_id
            if producer_id < 0 or header.attributes & CONTROL_FLAG:
                continue
            recent = latest.get(producer_id)
            if recent is None or epochs[producer_id] != header.producer_epoch:
                recent = latest[producer_id] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
                epochs[producer_id] = header.producer_epoch
            recent.append(header)
        return cls(
            {
                producer_id: ProducerStateEntry(
                    producer_id, epochs[producer_id], tuple(_metadata(h, h.base_offset) for h in recent)
                )
                for producer_id, recent in latest.items()
            }
        )

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def analyze(
        self,
        headers: Sequence[BatchHeader],
        first_offset: int,
        staged: Mapping[int, ProducerStateEntry] | None = None,
    ) -> Verdict:
        """Check one request's batches for one partition; changes nothing.

        first_offset is the offset the first batch will get; staged holds entries of requests that
        go into the same append ahead of this one (they count as already written).
        """
        staged = staged or {}
        updated: dict[int, ProducerStateEntry] = {}
        offset = first_offset
        for header in headers:
            producer_id = header.producer_id
            if producer_id < 0:  # not idempotent: no producer state (Kafka's batch.hasProducerId)
                offset += header.last_offset_delta + 1
                continue
            batch = _metadata(header, offset)
            offset = batch.last_offset + 1
            current = staged.get(producer_id) or self.producers.get(producer_id)
            if current is not None:
                # Duplicates are looked up in the state before this request (Kafka's lastEntry), and
                # one duplicate batch answers the whole request.
                duplicate = current.find_duplicate(header.producer_epoch, batch.first_seq, batch.last_seq)
                if duplicate is not None:
                    return Duplicate(duplicate)
            else:
                current = ProducerStateEntry(producer_id)
            working = updated.get(producer_id, current)
            problem = _check(current, working, header)
            if problem is not None:
                return problem
            updated[producer_id] = working.with_batch(header.producer_epoch, batch)
        return Accepted(updated)

    def update(self, entries: Mapping[int, ProducerStateEntry]) -> None:
        """The batches of accepted requests are in the log: their entries become the state."""
        self.producers.update(entries)


def _metadata(header: BatchHeader, first_offset: int) -> BatchMetadata:
    return BatchMetadata(
        first_seq=header.base_sequence,
        last_seq=increment_sequence(header.base_sequence, header.last_offset_delta),
        first_offset=first_offset,
        last_offset=first_offset + header.last_offset_delta,
    )


def _check(current: ProducerStateEntry, working: ProducerStateEntry, header: BatchHeader) -> Rejected | None:
    """ProducerAppendInfo.checkProducerEpoch then checkSequence, for a client's data batch.

    current is the producer's entry before this request, working the entry after the request's
    earlier batches (Kafka's currentEntry and updatedEntry).
    """
    epoch, first_seq = header.producer_epoch, header.base_sequence
    producer_id = header.producer_id
    if epoch < working.producer_epoch:
        # Since Kafka 2.7 a fenced epoch is INVALID_PRODUCER_EPOCH, not the fatal PRODUCER_FENCED.
        return Rejected(
            ErrorCode.invalid_producer_epoch,
            f"epoch {epoch} of producer {producer_id} is older than its current epoch {working.producer_epoch}",
        )
    if epoch != working.producer_epoch:
        if first_seq != 0 and working.producer_epoch != NO_PRODUCER_EPOCH:
            return Rejected(
                ErrorCode.out_of_order_sequence_number,
                f"producer {producer_id} started epoch {epoch} at sequence {first_seq}; a new epoch starts at 0",
            )
        return None
    # No epoch known (no state): any sequence is accepted, as Kafka does after retention removed it.
    if current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(working.last_seq, first_seq):
        return Rejected(
            ErrorCode.out_of_order_sequence_number,
            f"producer {producer_id} sent sequence {first_seq} after {working.last_seq} (epoch {epoch})",
        )
    return None
