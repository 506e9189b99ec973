"""One replica of one partition over its PartitionLog: the state machines joined to the bytes.

Kafka's Partition (makeLeader / makeFollower, appendRecordsToLeader, fetchRecords for a follower)
and the fetcher's processPartitionData / truncate for one partition, as one object an actor holds
per partition it replicates. It is what the state machines of this package decide, carried out on
a real log: the leader appends under its epoch and answers followers with whole batches from its
log; a follower appends them as they are (offsets and epochs kept) and truncates where the
leader's diverging epoch says; the epoch history is kept in the log's leader-epoch checkpoint.

Threads: every method changes the replica's state (a follower's fetch answered moves its
progress and the high watermark), so all of them run where the log's mutating calls run, one at a
time (PartitionLog's module docstring); only reads of the log itself may run beside them. A
follower's log is read by no one else while it follows, which its truncation relies on. It calls
the log directly (file I/O); everything else in cluster/replication is pure. The messages it answers with are flat, as every value that crosses
the actor boundary in numbers (kernel/message.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kernel.message import message

from cluster.log import LogError, PartitionLog
from cluster.recordbatch import BatchHeader
from cluster.replication.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochEntry, LeaderEpochCache
from cluster.replication.follower import FetchPosition, FollowerState
from cluster.replication.leader import LeaderState
from cluster.replication.registration import NO_LEADER, AlterPartition, PartitionRegistration


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    min_insync_replicas: int = 2  # min.insync.replicas
    lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    fetch_max_bytes: int = 1 << 20  # replica.fetch.max.bytes


@message(flat=True)
class ReplicaFetch:
    """A follower's fetch (Kafka's FetchRequest with a replica id, one partition)."""

    replica: int
    incarnation: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    sequence: int  # the follower's own count: only the answer to its latest fetch is taken


@message(flat=True)
class ReplicaFetched:
    """The leader's answer: an error, or a diverging epoch to truncate to, or records."""

    error_code: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: int = UNDEFINED_EPOCH
    diverging_end_offset: int = UNDEFINED_OFFSET
    records: bytes = b""

    @property
    def diverging(self) -> bool:
        return self.diverging_end_offset != UNDEFINED_OFFSET or self.diverging_epoch != UNDEFINED_EPOCH


class LogReplica:
    """A replica that leads, follows, or (without a leader) waits."""

    def __init__(self, replica_id: int, incarnation: int, log: PartitionLog, config: ReplicationConfig) -> None:
        self.replica_id = replica_id
        self.incarnation = incarnation
        self.log = log
        self.config = config
        on_disk = log.read_epoch_history()
        self.epochs = load_epochs(log, on_disk)
        # What the file holds, so that the first change (or the cut load made) is written.
        self._persisted = tuple(EpochEntry(e, s) for e, s in on_disk or [])
        self._persist_epochs()
        self.leader: LeaderState | None = None
        self.follower: FollowerState | None = None
        self.partition_epoch = -1  # of the newest registration applied: older ones are stale
        # Counts the times this replica stopped leading: a write waits for acks=all within one term
        # (as a follower it may have cut the write; leading again under a new epoch straight from
        # leading, as a reassignment does, cuts nothing).
        self.term = 0
        # Until it learns better from a leader, nothing here is known to be committed.
        self._high_watermark = log.log_start_offset

    # -- roles -----------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        role = self.leader or self.follower
        return role.high_watermark if role is not None else self._high_watermark

    def apply(self, registration: PartitionRegistration, now_ms: int) -> None:
        """The controller's registration for this partition (Kafka's makeLeader / makeFollower).
        One older than the newest applied (a metadata push overtaken by a later one) is ignored:
        leading an older epoch would rewrite the epoch cache under the log's newer batches."""
        if registration.partition_epoch <= self.partition_epoch:
            return
        self.partition_epoch = registration.partition_epoch
        if registration.leader == self.replica_id:
            if self.leader is not None and self.leader.metadata(registration, now_ms):
                return
            hw = self.high_watermark
            self.follower = None
            self.leader = LeaderState(
                self.replica_id, registration, self.epochs, self.log.log_start_offset, self.log.end_offset, hw,
                now_ms, self.config.min_insync_replicas, self.config.lag_time_max_ms,
            )
            self._persist_epochs()  # before anything is appended under the new epoch
            return
        if self.follower is not None and self.follower.leader_epoch == registration.leader_epoch \
                and self.follower.leader == registration.leader:
            return
        self._high_watermark = self.high_watermark
        if self.leader is not None:
            self.term += 1
        self.leader = None
        self.follower = FollowerState(
            self.replica_id, registration.leader, registration.leader_epoch, self.epochs,
            self.log.log_start_offset, self.log.end_offset, self._high_watermark,
        )

    @property
    def leads(self) -> bool:
        return self.leader is not None

    # -- the leader ------------------------------------------------------------------------------

    def append(self, batches: Sequence[bytearray], headers: Sequence[BatchHeader] | None, acks_all: bool,
               now_ms: int) -> tuple[ErrorCode, list[int], int, int]:
        """Append as the leader under its epoch: (error, base offsets, the write's end offset, the
        leadership term). An acks=all write is answered once `acks_all_reached(end, term)` says so."""
        leader = self.leader
        if leader is None:
            return ErrorCode.not_leader_or_follower, [], -1, self.term
        error = leader.check_append(acks_all)
        if error is not None:
            return error, [], -1, self.term
        base_offsets = self.log.append(batches, leader.leader_epoch, headers)
        end = self.log.end_offset
        leader.appended(end, now_ms)
        return ErrorCode.none, base_offsets, end, self.term

    def acks_all_reached(self, required_offset: int, term: int) -> ErrorCode | None:
        """For a write ending at `required_offset` appended in leadership `term`: None while the
        high watermark is below it. A replica that has stopped leading since answers
        NOT_LEADER_OR_FOLLOWER: as a follower it may have cut the write (Kafka completes a delayed
        produce when its replica becomes a follower). Safe to call from another thread: it reads
        the role once."""
        leader = self.leader
        if leader is None or self.term != term:
            return ErrorCode.not_leader_or_follower
        return leader.acks_all(required_offset)

    def answer_fetch(self, fetch: ReplicaFetch, now_ms: int) -> tuple[ReplicaFetched, AlterPartition | None]:
        """A follower's fetch: the answer, and the ISR change to send the controller if it joins."""
        if self.leader is None:
            return ReplicaFetched(ErrorCode.not_leader_or_follower), None
        verdict = self.leader.follower_fetch(
            fetch.replica, fetch.incarnation, fetch.current_leader_epoch, fetch.fetch_offset,
            fetch.last_fetched_epoch, now_ms,
        )
        if verdict.diverging_epoch is not None:
            epoch, end_offset = verdict.diverging_epoch
            return ReplicaFetched(ErrorCode.none, verdict.high_watermark, verdict.log_start_offset, epoch, end_offset), None
        if not verdict.read:
            return ReplicaFetched(verdict.error, verdict.high_watermark, verdict.log_start_offset), None
        records = self.log.read(fetch.fetch_offset, self.config.fetch_max_bytes)
        answer = ReplicaFetched(ErrorCode.none, verdict.high_watermark, verdict.log_start_offset, records=records)
        return answer, self.leader.maybe_expand_isr(fetch.replica)

    def isr_change_answered(self, request: AlterPartition, error: ErrorCode,
                            registration: PartitionRegistration | None, now_ms: int) -> None:
        """The controller's answer to this leader's ISR change; a registration it committed is
        the newest this replica knows (a later push of it is not applied twice)."""
        if self.leader is None:
            return
        self.leader.isr_change_answered(request, error, registration, now_ms)
        if error is ErrorCode.none and registration is not None and registration.leader_epoch == self.leader.leader_epoch:
            self.partition_epoch = max(self.partition_epoch, registration.partition_epoch)

    # -- the follower ----------------------------------------------------------------------------

    def next_fetch(self) -> ReplicaFetch | None:
        if self.follower is None or self.follower.leader == NO_LEADER:
            return None
        position = self.follower.start_fetch()
        return ReplicaFetch(self.replica_id, self.incarnation, position.fetch_offset, position.last_fetched_epoch,
                            position.current_leader_epoch, position.sequence)

    def apply_fetched(self, sent: ReplicaFetch, answer: ReplicaFetched) -> ErrorCode:
        """The leader's answer to `sent`: truncate, or append, or nothing (a stale answer, or an
        error the caller retries after); the answer's error, none for a stale one."""
        f = self.follower
        sent_position = FetchPosition(sent.fetch_offset, sent.last_fetched_epoch, sent.current_leader_epoch, sent.sequence)
        if f is None or not f.take(sent_position):
            return ErrorCode.none
        if answer.error_code is ErrorCode.offset_out_of_range:
            if answer.log_start_offset > self.log.end_offset:
                # Kafka resets such a follower to the leader's start (truncateFullyAndStartAt); a
                # raygroups log never moves its start (no retention; compaction keeps segment
                # bases), so a leader starting past this whole log is a bug, not a state to handle.
                raise LogError(f"{self.log.directory}: the leader's log starts at {answer.log_start_offset}, "
                               f"past this replica's end {self.log.end_offset}")
            self._truncate(min(f.high_watermark, self.log.end_offset))
            return answer.error_code
        if answer.error_code is not ErrorCode.none:
            return answer.error_code
        if answer.diverging:
            self._truncate(f.truncation_offset(answer.diverging_epoch, answer.diverging_end_offset))
            return ErrorCode.none
        headers = self.log.append_replicated(answer.records) if answer.records else []
        f.appended([(h.partition_leader_epoch, h.base_offset, h.last_offset) for h in headers], answer.high_watermark)
        self._persist_epochs()
        return ErrorCode.none

    def cut_at_log_end(self) -> None:
        """The log was cut below where this follower had it (a read found a corrupt batch): fetch
        again from its end, the epoch history cut with it."""
        self._truncate(self.log.end_offset)

    def _truncate(self, offset: int) -> None:
        self.log.truncate_replica(offset)
        assert self.follower is not None
        # The log cuts at whole batches: its end is where the cut really fell.
        self.follower.truncated(self.log.end_offset)
        self._persist_epochs()

    def _persist_epochs(self) -> None:
        entries = self.epochs.entries
        if entries != self._persisted:
            self.log.write_epoch_history([(e.epoch, e.start_offset) for e in entries])
            self._persisted = entries


def load_epochs(log: PartitionLog, on_disk: list[tuple[int, int]] | None) -> LeaderEpochCache:
    """The epoch history of a log: its checkpoint `on_disk` (epoch_checkpoint.py says why the batch
    headers alone will not do once compaction ran), cut at the log's end (a crash between a cut and
    the checkpoint's rewrite, or an epoch led without a batch), then any newer epoch the batch
    headers show (batches a crash left after the checkpoint's last write)."""
    cache = LeaderEpochCache(EpochEntry(e, s) for e, s in on_disk or [])
    cache.truncate_from_end(log.end_offset)
    for header in log.batch_headers():
        if header.partition_leader_epoch > cache.latest_epoch:
            cache.assign(header.partition_leader_epoch, header.base_offset)
    return cache
