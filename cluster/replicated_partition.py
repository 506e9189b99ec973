"""A replicated user-topic partition on its leader (issue 25): UserPartition over a replica's log.

What changes from a partition kept in one copy (cluster/partition.py), as Kafka's Partition on
its leader does it:
- appends go through the ReplicaManager (cluster/replication/manager.py), on its one I/O thread,
  under the registration's leader epoch, so that followers' fetches and the high watermark see
  them; Produce requests batched into one append are still checked one by one against the
  idempotent producers' state, in arrival order;
- acks=all is refused at once with NOT_ENOUGH_REPLICAS while the ISR is below
  min.insync.replicas, and otherwise answered once the high watermark passes that request's
  batches (each request its own end offset: an acks=1 request in the same append does not wait),
  REQUEST_TIMED_OUT after the request's timeout, as Kafka's DelayedProduce;
- consumers read below the high watermark, the one every in-sync replica holds (records above it
  may be cut by the next leader); a fetch offset up to the log end is in range (Kafka compares
  with the log end: a new leader's high watermark may lag the one a consumer was shown), and a
  fetch waiting for records wakes when the high watermark moves;
- ListOffsets' latest is the high watermark, and a search by time finds nothing at or above it;
  a leader that cannot yet vouch for its high watermark (KIP-207) answers OFFSET_NOT_AVAILABLE;
- the log belongs to the manager: a partition that stops leading here closes, its log stays open
  as a follower's.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

from kio.schema.errors import ErrorCode

from cluster.partition import FetchOutcome, ProduceOutcome, UserPartition, _Append, _resolve
from cluster.producer_state import Accepted, Duplicate, ProducerStateManager
from cluster.replication.log_replica import LogReplica
from cluster.replication.manager import LeaderWrite, ReplicaManager


class ReplicatedPartition(UserPartition):
    def __init__(
        self,
        topic: str,
        partition: int,
        epoch: int,
        manager: ReplicaManager,
        replica: LogReplica,
        executor: Executor,
        max_batch_bytes: int,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        super().__init__(topic, partition, epoch, replica.log, executor, max_batch_bytes, producer_state)
        self._group = None  # one writer per log: the manager's I/O thread
        self.manager = manager
        self.replica = replica
        self._waiting: dict[asyncio.Task, _Append] = {}  # acks=all requests waiting for the high watermark

    # -- produce -------------------------------------------------------------------------------

    async def _write(self, appends: list[_Append]) -> None:
        leader = self.replica.leader
        if leader is None or leader.leader_epoch != self.epoch:
            for a in appends:
                _resolve(a.future, ProduceOutcome(ErrorCode.not_leader_or_follower, message="no longer the leader"))
            return
        # Kafka checks min.insync.replicas before appending an acks=all write.
        short = leader.check_append(True)
        taking: list[_Append] = []
        for a in appends:
            if short is not None and a.acks_all:
                _resolve(a.future, ProduceOutcome(short, message=(
                    f"the ISR {list(leader.isr)} is smaller than min.insync.replicas ({leader.min_insync_replicas})")))
            else:
                taking.append(a)
        plan = self._stage(taking)
        write = LeaderWrite(ErrorCode.none, [], -1, self.replica.term, self.replica)
        if plan.batches:
            try:
                write = await self.manager.write((self.topic, self.partition), plan.batches, plan.headers, False)
            except Exception as exc:  # noqa: BLE001 - any failure: nothing is known written, and every request is answered
                self._write_failed(taking, exc)
                return
            if write.error is not ErrorCode.none:
                for a in taking:
                    _resolve(a.future, ProduceOutcome(write.error, message="the append was refused"))
                return
            assert write.offsets == plan.expected_offsets, (write.offsets, plan.expected_offsets)
            self.producer_state.update(plan.staged)
        i = 0
        for a, verdict, outcome in zip(taking, plan.verdicts, self._outcomes(taking, plan, write.offsets)):
            end = -1
            if isinstance(verdict, Accepted):
                i += len(a.batches)
                end = write.offsets[i - 1] + a.headers[-1].last_offset_delta + 1
            elif isinstance(verdict, Duplicate):
                end = verdict.batch.last_offset + 1  # a retry waits for its original, as in Kafka
            if a.acks_all and end >= 0 and outcome.error_code is ErrorCode.none:
                task = asyncio.ensure_future(self._answer_when_replicated(a, outcome, write, end))
                self._waiting[task] = a
                task.add_done_callback(lambda t: self._waiting.pop(t, None))
            else:
                _resolve(a.future, outcome)

    async def _answer_when_replicated(self, a: _Append, outcome: ProduceOutcome, write: LeaderWrite, end: int) -> None:
        error = await self.manager.acks((self.topic, self.partition), write, end, a.timeout_ms)
        if error is not ErrorCode.none:
            outcome = ProduceOutcome(error, message=_ACK_MESSAGES.get(error))
        _resolve(a.future, outcome)

    # -- fetch and list offsets --------------------------------------------------------------------

    @property
    def data_appended(self) -> asyncio.Event:  # type: ignore[override]
        """Set when the partition changes: its high watermark moves (what a consumer waits for)."""
        return self.manager.changed((self.topic, self.partition)) or self._gone

    @data_appended.setter
    def data_appended(self, _event: asyncio.Event) -> None:
        # UserPartition arms its own event at start; here it serves only to wake the waiters of a
        # partition that closed (the manager drops its events with the replica).
        self._gone = _event

    def high_watermark(self) -> int | None:
        leader = self.replica.leader
        return leader.visible_high_watermark if leader is not None else None

    def read(self, offset: int, max_bytes: int, up_to: int | None = None) -> FetchOutcome:
        log = self.log
        end, start = log.end_offset, log.log_start_offset
        hw = self.high_watermark()
        shown = hw if hw is not None else -1
        if offset > end or offset < start:
            return FetchOutcome(ErrorCode.offset_out_of_range, shown, start)
        if hw is None or max_bytes <= 0 or offset >= hw:
            return FetchOutcome(ErrorCode.none, shown, start)
        last = hw - 1 if up_to is None else min(up_to, hw - 1)
        return FetchOutcome(ErrorCode.none, hw, start, log.read(offset, max_bytes, last))

    def latest_offset(self) -> int:
        """The high watermark; before a new leader can vouch for it (KIP-207), the one it has,
        which may lag the last leader's a little: a share group starting at the latest then gets a
        few recent records again rather than the whole log."""
        hw = self.high_watermark()
        return hw if hw is not None else self.replica.high_watermark

    def offset_for(self, timestamp: int) -> tuple[int, int]:
        return below_high_watermark(timestamp, super().offset_for(timestamp), self.high_watermark())

    async def close(self) -> None:
        self.closed = True
        await self._appends.idle()
        for a in self._appends.take_all():
            _resolve(a.future, ProduceOutcome(ErrorCode.not_leader_or_follower, message="partition moved"))
        waiting = dict(self._waiting)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        for a in waiting.values():
            _resolve(a.future, ProduceOutcome(ErrorCode.not_leader_or_follower, message=_ACK_MESSAGES[ErrorCode.not_leader_or_follower]))
        self._gone.set()


def below_high_watermark(timestamp: int, found: tuple[int, int], hw: int | None) -> tuple[int, int]:
    """A ListOffsets answer from the whole log (UserPartition.offset_for), as consumers may see it:
    the latest offset is the high watermark, and nothing at or above it is found by time."""
    offset, ts = found
    if timestamp >= -1 or timestamp == -3:
        if timestamp == -1:
            return (hw, -1) if hw is not None else (-1, -1)
        if hw is None or offset >= hw:
            return -1, -1  # Kafka's fetchOffsetForTimestamp: nothing at or above the high watermark
    return offset, ts


_ACK_MESSAGES = {
    ErrorCode.request_timed_out: "the in-sync replicas did not all have the write within the request's timeout",
    ErrorCode.not_enough_replicas_after_append: "written, but the ISR fell below min.insync.replicas before it was replicated",
    ErrorCode.not_leader_or_follower: "leadership moved before the write was replicated; it may be lost",
}
