"""The leader's side of a replicated partition: follower progress, the ISR, the high watermark.

Kafka's Partition on its leader (Partition.scala: makeLeader, updateFollowerFetchState,
maybeExpandIsr, maybeShrinkIsr, maybeIncrementLeaderHW, checkEnoughReplicasReachOffset) and
Replica.scala's fetch state, as a plain object the replica's host feeds:
- `follower_fetch` for each fetch a follower sends (validated, then its progress recorded);
- `appended` after the leader's own log grew;
- `maybe_expand_isr` after a follower's fetch and `maybe_shrink_isr` on the lag timer, each
  the change to propose if any, and `isr_change_answered` with the controller's answer;
- `acks_all` to learn whether an acks=all write (or a coordinator's append) may be answered.

The ISR the controller committed (`isr`) and a change it has not answered (`pending`) make the
maximal ISR (KIP-497's PendingExpandIsr / PendingShrinkIsr): the high watermark waits for every
member of it, so a replica being added counts at once and one being removed counts until the
controller agrees. One change is in flight at a time.

A new leader's high watermark may be behind the one its predecessor exposed (followers learn it
one fetch late). Until it reaches the offset where this leader's epoch began, which is past
everything committed before, `visible_high_watermark` is None and nothing below it is promised to
readers (Kafka's KIP-207 answers OFFSET_NOT_AVAILABLE then): what readers see never goes back.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from cluster.replication.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from cluster.replication.registration import AlterPartition, PartitionRegistration

NO_OFFSET = -1


def check_leader_epoch(request_epoch: int, leader_epoch: int) -> ErrorCode | None:
    """KIP-320, for clients and followers alike (cluster/partition.py uses it too): a request behind
    the leader's epoch is fenced (FENCED_LEADER_EPOCH); one ahead of it must wait
    (UNKNOWN_LEADER_EPOCH); -1 sent none."""
    if request_epoch < 0 or request_epoch == leader_epoch:
        return None
    return ErrorCode.fenced_leader_epoch if request_epoch < leader_epoch else ErrorCode.unknown_leader_epoch


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower (Kafka's Replica / ReplicaState)."""

    log_end_offset: int = NO_OFFSET  # unknown until its first fetch to this leader
    incarnation: int = -1  # of the process whose fetches these are (Kafka's broker epoch, KIP-903)
    last_caught_up_ms: int = 0
    last_fetch_leader_end_offset: int = NO_OFFSET
    last_fetch_ms: int = 0

    def fetched(self, fetch_offset: int, now_ms: int, leader_end_offset: int, incarnation: int) -> None:
        self.incarnation = incarnation
        # Kafka's Replica.updateFetchStateOrThrow: caught up now if it asked for the log end; caught
        # up as of its previous fetch if it now asks for what the log end was then.
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now_ms


@dataclass(frozen=True, slots=True)
class FetchVerdict:
    """The leader's answer to a follower's fetch, short of the records (the host reads them from
    `fetch_offset` when `error` is none and there is no `diverging_epoch`)."""

    error: ErrorCode
    high_watermark: int = NO_OFFSET
    log_start_offset: int = NO_OFFSET
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset): truncate, then fetch again

    @property
    def read(self) -> bool:
        return self.error is ErrorCode.none and self.diverging_epoch is None


class LeaderState:
    def __init__(
        self,
        replica_id: int,
        registration: PartitionRegistration,
        epochs: LeaderEpochCache,
        log_start_offset: int,
        log_end_offset: int,
        high_watermark: int,
        now_ms: int,
        min_insync_replicas: int,
        lag_time_max_ms: int,
    ) -> None:
        """Kafka's makeLeader: this replica leads `registration`'s epoch from its log end."""
        if registration.leader != replica_id:
            raise ValueError(f"replica {replica_id} is not the leader of {registration}")
        self.replica_id = replica_id
        self.leader_epoch = registration.leader_epoch
        self.partition_epoch = registration.partition_epoch
        self.replicas = registration.replicas
        self.isr: tuple[int, ...] = registration.isr
        self.pending: AlterPartition | None = None
        self._proposals = 0  # AlterPartition.sequence
        # Kafka's effectiveMinIsr: a partition with fewer replicas than the setting needs them all.
        self.min_insync_replicas = min(min_insync_replicas, len(registration.replicas))
        self.lag_time_max_ms = lag_time_max_ms
        self.epochs = epochs
        self.epochs.assign(self.leader_epoch, log_end_offset)
        self.epoch_start_offset = log_end_offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.high_watermark = min(high_watermark, log_end_offset)
        # Members of the ISR count as caught up now: they get a full lag time to fetch from this
        # leader before they can be dropped; others must catch up first.
        self.followers = {
            r: FollowerProgress(last_caught_up_ms=now_ms if r in registration.isr else 0)
            for r in registration.replicas
            if r != replica_id
        }
        self._advance_high_watermark(now_ms)

    # -- the ISR ---------------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending.new_isr if r not in self.isr)

    def _in_sync(self, replica: int, now_ms: int) -> bool:
        """Kafka's isCaughtUp: at the log end, or caught up within the lag time."""
        progress = self.followers[replica]
        return (
            progress.log_end_offset == self.log_end_offset
            or now_ms - progress.last_caught_up_ms <= self.lag_time_max_ms
        )

    def _may_join(self, replica: int) -> bool:
        """Kafka's isFollowerInSync for expansion: it has the high watermark and this epoch's start."""
        end = self.followers[replica].log_end_offset
        return end >= self.high_watermark and end >= self.epoch_start_offset

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartition | None:
        """On the lag timer (Kafka's maybeShrinkIsr): the change that drops the members that fell
        behind, to send the controller and hold as pending. None while one is in flight."""
        if self.pending is not None:
            return None
        keep = tuple(r for r in self.isr if r == self.replica_id or self._in_sync(r, now_ms))
        return self._propose(keep) if keep != self.isr else None

    def maybe_expand_isr(self, replica: int) -> AlterPartition | None:
        """After `replica`'s fetch (Kafka's maybeExpandIsr): the change that adds it, once it holds
        the high watermark and this epoch's start. Only a fetching replica joins: one that stopped
        fetching is not added back on the strength of an old position."""
        if self.pending is not None or replica in self.isr or replica not in self.followers:
            return None
        if not self._may_join(replica):
            return None
        return self._propose(tuple(r for r in self.replicas if r in self.isr or r == replica))

    def _propose(self, new_isr: tuple[int, ...]) -> AlterPartition:
        incarnations = tuple(-1 if r == self.replica_id else self.followers[r].incarnation for r in new_isr)
        self._proposals += 1
        self.pending = AlterPartition(
            self.replica_id, self.leader_epoch, self.partition_epoch, new_isr, incarnations, self._proposals
        )
        return self.pending

    def isr_change_answered(
        self, request: AlterPartition, error: ErrorCode, registration: PartitionRegistration | None, now_ms: int
    ) -> None:
        """The controller's answer to `request` (Kafka's handleAlterPartitionUpdate / Error).

        Committed: the ISR is what the controller recorded. INELIGIBLE_REPLICA or
        OPERATION_NOT_ATTEMPTED: the controller says the change was not applied and never will be
        (answer_alter_partition), so the committed ISR stands; after INELIGIBLE_REPLICA the
        joiners wait for their next fetch to count again. Any other error (a fenced
        epoch, a partition epoch the controller moved past, perhaps by applying this very change
        whose first answer was lost) leaves the change pending, its replicas still counted, until
        the metadata brings the registration: dropping it could let the high watermark pass a
        replica the controller already put in the ISR and may elect."""
        if self.pending != request:
            return  # an answer to a change this leader no longer waits for
        if error is ErrorCode.none and registration is not None:
            if registration.leader_epoch != self.leader_epoch or registration.partition_epoch < self.partition_epoch:
                return
            self.pending = None
            self.metadata(registration, now_ms)
        elif error is ErrorCode.ineligible_replica:
            self.pending = None
            # The controller takes a joiner named here as dead, fenced or restarted.
            for r in request.new_isr:
                if r not in self.isr:
                    self._forget_progress(r)
        elif error is ErrorCode.operation_not_attempted:
            self.pending = None
        self._advance_high_watermark(now_ms)

    def _forget_progress(self, replica: int) -> None:
        """A replica the controller holds ineligible (out of the ISR, or refused as a joiner) is
        known again only from its next fetch: Kafka's isReplicaIsrEligible stops a fenced or
        shut-down replica from holding the high watermark as one "caught up, about to join".
        Its last progress would otherwise hold it for replica.lag.time.max.ms (a dead replica
        never fetches to end it): every write to the partition waited that long after its node's
        loss."""
        if replica in self.followers:
            self.followers[replica] = FollowerProgress(incarnation=self.followers[replica].incarnation)

    def metadata(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """A newer registration in which this replica still leads the same epoch (the controller
        fenced a member, committed our change, or started a reassignment). False when it no longer applies to this leader:
        the host then makes the replica a follower, or a leader of the new epoch."""
        if registration.leader != self.replica_id or registration.leader_epoch != self.leader_epoch:
            return False
        if registration.partition_epoch <= self.partition_epoch:
            return True
        for r in self.isr:
            if r not in registration.isr:
                # Out of the ISR: the controller takes a member out when its host died, was
                # fenced or restarted, or when this leader asked (it lagged).
                self._forget_progress(r)
        self.isr = registration.isr
        self.partition_epoch = registration.partition_epoch
        if registration.replicas != self.replicas:
            # A reassignment started under this epoch: the new replicas fetch from here, unknown
            # until they do. (One that leaves the assignment comes with a new leader epoch.)
            self.replicas = registration.replicas
            for r in registration.replicas:
                if r != self.replica_id and r not in self.followers:
                    self.followers[r] = FollowerProgress()
            for r in [r for r in self.followers if r not in registration.replicas]:
                del self.followers[r]
        if self.pending is not None and self.pending.partition_epoch < registration.partition_epoch:
            self.pending = None  # built on an ISR the controller has since changed: it will be refused
        self._advance_high_watermark(now_ms)
        return True

    # -- appends and the high watermark ------------------------------------------------------------

    def check_append(self, acks_all: bool) -> ErrorCode | None:
        """Before appending: an acks=all write needs min.insync.replicas in the committed ISR."""
        if acks_all and len(self.isr) < self.min_insync_replicas:
            return ErrorCode.not_enough_replicas
        return None

    def appended(self, log_end_offset: int, now_ms: int) -> None:
        self.log_end_offset = log_end_offset
        self._advance_high_watermark(now_ms)

    def acks_all(self, required_offset: int) -> ErrorCode | None:
        """Kafka's checkEnoughReplicasReachOffset for a write ending at `required_offset` (its last
        offset + 1): None while the high watermark is below it; then none, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum meanwhile."""
        if self.high_watermark < required_offset:
            return None
        if len(self.maximal_isr) < self.min_insync_replicas:
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none

    @property
    def visible_high_watermark(self) -> int | None:
        return self.high_watermark if self.high_watermark >= self.epoch_start_offset else None

    def _advance_high_watermark(self, now_ms: int) -> bool:
        """Kafka's maybeIncrementLeaderHW: the least log end among the maximal ISR, and among the
        replicas that are caught up but not yet in it (so a joining replica is not outrun while
        its change waits); never while the committed ISR is below the minimum (KAFKA-15583: what
        fewer replicas than promised hold is not exposed)."""
        if len(self.isr) < self.min_insync_replicas:
            return False
        maximal = self.maximal_isr
        new = self.log_end_offset
        for replica, progress in self.followers.items():
            if progress.log_end_offset < new and (
                replica in maximal or (progress.log_end_offset >= 0 and self._in_sync(replica, now_ms))
            ):
                new = progress.log_end_offset
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False

    # -- follower fetches -------------------------------------------------------------------------

    def follower_fetch(
        self,
        replica: int,
        incarnation: int,
        current_leader_epoch: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        now_ms: int,
    ) -> FetchVerdict:
        """Validate a follower's fetch and record its progress (Kafka's fetchRecords for a follower).
        `incarnation` names the follower's process (it changes when the replica restarts). Checked
        in Kafka's order: the leader epoch, the replica, the log start, the last fetched epoch,
        the log end."""
        error = check_leader_epoch(current_leader_epoch, self.leader_epoch)
        if error is not None:
            return FetchVerdict(error)
        if replica not in self.followers:
            # Kafka: one that named an epoch may not know the assignment yet and retries.
            unknown = ErrorCode.unknown_leader_epoch if current_leader_epoch >= 0 else ErrorCode.not_leader_or_follower
            return FetchVerdict(unknown)
        if fetch_offset < self.log_start_offset:
            return FetchVerdict(ErrorCode.offset_out_of_range, self.high_watermark, self.log_start_offset)
        if last_fetched_epoch != UNDEFINED_EPOCH:
            epoch, end_offset = self.epochs.end_offset_for(last_fetched_epoch, self.log_end_offset)
            if epoch == UNDEFINED_EPOCH and end_offset == UNDEFINED_OFFSET:
                # An epoch past every one this leader knows: Kafka answers out of range.
                return FetchVerdict(ErrorCode.offset_out_of_range, self.high_watermark, self.log_start_offset)
            if end_offset < fetch_offset or epoch < last_fetched_epoch:
                # Its log holds what this one never had: it truncates first. Its progress is not
                # recorded: the offset it asked for is not one this log agrees with.
                return FetchVerdict(ErrorCode.none, self.high_watermark, self.log_start_offset, (epoch, end_offset))
        if fetch_offset > self.log_end_offset:
            return FetchVerdict(ErrorCode.offset_out_of_range, self.high_watermark, self.log_start_offset)
        self.followers[replica].fetched(fetch_offset, now_ms, self.log_end_offset, incarnation)
        self._advance_high_watermark(now_ms)
        return FetchVerdict(ErrorCode.none, self.high_watermark, self.log_start_offset)
