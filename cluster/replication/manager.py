"""ReplicaManager: the replicas one process holds, leading some partitions and following others.

Kafka's ReplicaManager with its fetcher threads, in asyncio (no Ray: the links to other replicas'
hosts and to the controller are given to it, and the actor shells supply ones that cross Ray):
- `apply` takes the controller's registrations: opens logs, makes each replica leader or
  follower (LogReplica.apply), and starts one fetcher per leader this host follows, as Kafka runs
  a fetcher thread per source broker: one call carries every partition it follows from there;
- `append` writes as the leader and, for acks=all, answers once the high watermark passes the
  write (or says why not), within the request's timeout;
- `replica_fetch` answers a follower host's fetch, waiting up to its max wait for something new
  (Kafka's DelayedFetch for followers), and sends the ISR changes the fetches call for;
- `read` serves consumers below the high watermark;
- a timer drops lagging ISR members (Kafka's isr-expiration task), and ISR changes go to the
  controller one at a time per partition, sent again until it answers.

Threads: every call into a replica (its log's writes and reads for followers, and every change of
its leader or follower state) runs on the manager's one I/O thread, in the order the event loop
sends them, so none overlaps another (LogReplica's docstring); the loop itself only reads settled
numbers (a high watermark, a leader epoch) to decide when to answer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kio.schema.errors import ErrorCode

from kernel.clock import Clock

from cluster import eager
from cluster.log import LogConfig, PartitionLog
from cluster.log.files import remove_directory
from cluster.log.partition_metadata import read_topic_id, write_topic_id
from cluster.recordbatch import BatchHeader
from cluster.replication.log_replica import LogReplica, ReplicaFetch, ReplicaFetched, ReplicationConfig
from cluster.replication.registration import AlterPartition, PartitionRegistration

log = logging.getLogger(__name__)

TP = tuple[str, int]
REQUEST_TIMEOUT_MS = 30_000  # how long past its max wait a fetch may go unanswered (request.timeout.ms)


@dataclass(frozen=True, slots=True)
class LeaderWrite:
    error: ErrorCode
    offsets: list[int]
    end: int
    term: int
    replica: LogReplica | None


class LeaderLink(Protocol):
    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]: ...


class ControllerLink(Protocol):
    async def alter_partition(
        self, tp: TP, request: AlterPartition
    ) -> tuple[ErrorCode, PartitionRegistration | None]: ...


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    backoff_ms: int = 1_000  # replica.fetch.backoff.ms
    alter_retry_ms: int = 500  # how soon an unanswered ISR change is sent again


class ReplicaManager:
    def __init__(
        self,
        replica_id: int,
        incarnation: int,
        data_dir: Path,
        log_config: LogConfig,
        config: ReplicationConfig,
        clock: Clock,
        leader_link: Callable[[int], LeaderLink],
        controller: ControllerLink,
        fetcher: FetcherConfig = FetcherConfig(),
        on_demote: Callable[[TP], Awaitable[None]] | None = None,
    ) -> None:
        self.replica_id = replica_id
        self.incarnation = incarnation
        self.data_dir = Path(data_dir)
        self.log_config = log_config
        self.config = config
        self.clock = clock
        self.leader_link = leader_link
        self.controller = controller
        self.fetcher = fetcher
        # Awaited before a replica leading here stops leading (a follower's truncation may follow,
        # or its removal): what serves from the log stops first, as a coordinator must.
        self.on_demote = on_demote
        # One thread: every replica call runs on it, one at a time (the module docstring).
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"replicas-{replica_id}")
        self.replicas: dict[TP, LogReplica] = {}
        self._changed: dict[TP, asyncio.Event] = {}  # set when a partition's log or high watermark moves
        self._fetchers: dict[int, asyncio.Task] = {}  # by the leader they fetch from
        self._alters: dict[TP, asyncio.Task] = {}
        self._expiry: asyncio.Task | None = None
        self._applying = asyncio.Lock()
        self._applied: dict[TP, int] = {}  # the partition epoch last applied, removals included
        self._topic_ids: dict[TP, uuid.UUID] = {}  # the topic each open replica's log belongs to
        # A followed compacted log's segment count after its last compaction (_compact_follower).
        self._compacted_at: dict[TP, int] = {}
        self._closed = False

    # -- the controller's word -------------------------------------------------------------------

    async def apply(
        self, registrations: dict[TP, PartitionRegistration], topic_ids: dict[str, uuid.UUID] | None = None
    ) -> None:
        """Open what is new, make each replica what its registration says, and (re)start fetchers.
        A registration no newer than the last one applied to that partition is stale (a push
        overtaken by a later one) and ignored, a removal included: deleting a log on the word of
        an old assignment would lose what the partition holds here now. Pushes apply one at a
        time; a partition whose log cannot open or write is logged and left for the next push."""
        async with self._applying:
            for tp, registration in registrations.items():
                topic_id = (topic_ids or {}).get(tp[0])
                if topic_id is not None and self._topic_ids.get(tp, topic_id) != topic_id:
                    # The topic was deleted and made again under its name (a delete this host
                    # missed): the old copy goes, and the new topic's epochs start afresh.
                    await self._remove(tp)
                    self._applied.pop(tp, None)
                elif topic_id is not None and tp in self.replicas and tp not in self._topic_ids:
                    await self._io(write_topic_id, self.data_dir / f"{tp[0]}-{tp[1]}", topic_id)
                    self._topic_ids[tp] = topic_id  # opened before its id was known
                if registration.partition_epoch <= self._applied.get(tp, -1):
                    continue
                try:
                    await self._apply_one(tp, registration, topic_id)
                except Exception:
                    log.exception("replica of %s-%s: applying %s failed", *tp, registration)
                    continue
                self._applied[tp] = registration.partition_epoch
            self._start_fetchers()
            if self._expiry is None and not self._closed:
                self._expiry = asyncio.ensure_future(self._expire_isr())

    async def _apply_one(self, tp: TP, registration: PartitionRegistration, topic_id: uuid.UUID | None = None) -> None:
        if self.replica_id not in registration.replicas:
            await self._remove(tp)
            return
        replica = self.replicas.get(tp)
        if replica is not None and replica.leads and registration.leader != self.replica_id \
                and registration.partition_epoch > replica.partition_epoch and self.on_demote is not None:
            await self.on_demote(tp)
        if replica is None:
            path = self.data_dir / f"{tp[0]}-{tp[1]}"
            if topic_id is not None:
                await self._io(_claim_directory, path, topic_id)
                self._topic_ids[tp] = topic_id
            opened = await self._io(PartitionLog.open, path, self.log_config)
            replica = await self._io(LogReplica, self.replica_id, self.incarnation, opened, self.config)
            self.replicas[tp] = replica
            self._changed[tp] = asyncio.Event()
        await self._io(replica.apply, registration, self.clock.now_ms())
        self._notify(tp)

    async def _remove(self, tp: TP) -> None:
        """Left the assignment (a completed reassignment): Kafka's StopReplica with deletion."""
        self._topic_ids.pop(tp, None)
        self._compacted_at.pop(tp, None)
        if self.on_demote is not None and (held := self.replicas.get(tp)) is not None and held.leads:
            await self.on_demote(tp)
        replica = self.replicas.pop(tp, None)
        task = self._alters.pop(tp, None)
        if task is not None:
            task.cancel()
        if replica is not None:
            await self._io(replica.log.delete)
        event = self._changed.pop(tp, None)
        if event is not None:
            event.set()  # waiters find the partition gone, once its log is

    # -- the leader ------------------------------------------------------------------------------

    async def append(
        self, tp: TP, batches: Sequence[bytearray], acks_all: bool, timeout_ms: int
    ) -> tuple[ErrorCode, list[int]]:
        """Append as the leader: (error, base offsets). acks=all waits for the high watermark
        (REQUEST_TIMED_OUT after timeout_ms, as Kafka's DelayedProduce)."""
        write = await self.write(tp, batches, None, acks_all)
        if write.error is not ErrorCode.none or not acks_all:
            return write.error, write.offsets
        return await self.acks(tp, write, write.end, timeout_ms), write.offsets

    async def write(
        self, tp: TP, batches: Sequence[bytearray], headers: Sequence[BatchHeader] | None, acks_all: bool
    ) -> LeaderWrite:
        """Append as the leader, not waiting for followers: the write's error, base offsets, end
        offset and leadership term, for `acks`. A writer that batches requests (cluster/partition.py)
        waits for each acks=all request's own end offset."""
        replica = self.replicas.get(tp)
        if replica is None:
            return LeaderWrite(ErrorCode.not_leader_or_follower, [], -1, -1, None)
        error, offsets, end, term = await self._io(replica.append, batches, headers, acks_all, self.clock.now_ms())
        self._notify(tp)
        return LeaderWrite(error, offsets, end, term, replica)

    async def acks(self, tp: TP, write: LeaderWrite, end: int, timeout_ms: int) -> ErrorCode:
        """Once the high watermark passes `end` (a request's end offset within `write`): none, or
        why not (REQUEST_TIMED_OUT after timeout_ms, as Kafka's DelayedProduce)."""
        replica = write.replica
        if replica is None:
            return write.error
        answer = await self._wait(tp, lambda: self._reached(tp, replica, end, write.term), timeout_ms)
        return answer if answer is not None else ErrorCode.request_timed_out

    def _reached(self, tp: TP, replica: LogReplica, end: int, term: int) -> ErrorCode | None:
        if self.replicas.get(tp) is not replica:
            return ErrorCode.not_leader_or_follower  # removed (or closed) since
        return replica.acks_all_reached(end, term)

    def read(self, tp: TP, offset: int, max_bytes: int) -> tuple[ErrorCode, int, bytes]:
        """A consumer's read: (error, high watermark, whole batches below it). Reads may run beside
        the I/O thread's writes (PartitionLog's rules)."""
        replica = self.replicas.get(tp)
        leader = replica.leader if replica is not None else None
        if replica is None or leader is None:
            return ErrorCode.not_leader_or_follower, -1, b""
        visible = leader.visible_high_watermark
        # In range up to the log end, as Kafka: a new leader's high watermark may lag the one a
        # consumer was shown by the last, and that consumer must wait, not reset its position.
        if offset > replica.log.end_offset or offset < replica.log.log_start_offset:
            return ErrorCode.offset_out_of_range, -1 if visible is None else visible, b""
        if visible is None:
            return ErrorCode.none, -1, b""  # a new leader that cannot yet vouch for its high watermark
        if offset >= visible:
            return ErrorCode.none, visible, b""
        return ErrorCode.none, visible, replica.log.read(offset, max_bytes, up_to=visible - 1)

    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]:
        """A follower host's fetch of several partitions: answered when any has records or an
        error, or after max_wait_ms (each answer records the follower's progress)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        while True:
            # The events to wait on are taken before the answers are read: a change after the
            # read sets one of them, so it is not missed.
            events = [self._changed[tp] for tp, _ in items if tp in self._changed]
            answers, changes, moved = await self._io(self._answer_all, items)
            for tp, change in changes:
                self._send_alter(tp, change)
            for tp in moved:
                self._notify(tp)
            if any(a.records or a.error_code is not ErrorCode.none or a.diverging for a in answers):
                return answers
            remaining = deadline - loop.time()
            if remaining <= 0 or not events:
                return answers
            waiters = [asyncio.ensure_future(e.wait()) for e in events]
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()

    def _answer_all(self, items: list[tuple[TP, ReplicaFetch]]):
        """On the I/O thread: each partition's answer, the ISR changes to send, and the partitions
        whose high watermark moved."""
        answers: list[ReplicaFetched] = []
        changes: list[tuple[TP, AlterPartition]] = []
        moved: list[TP] = []
        now = self.clock.now_ms()
        for tp, fetch in items:
            replica = self.replicas.get(tp)
            if replica is None:
                answers.append(ReplicaFetched(ErrorCode.not_leader_or_follower))
                continue
            before = replica.leader.high_watermark if replica.leader is not None else -1
            answer, change = replica.answer_fetch(fetch, now)
            answers.append(answer)
            if change is not None:
                changes.append((tp, change))
            if replica.leader is not None and replica.leader.high_watermark != before:
                moved.append(tp)
        return answers, changes, moved

    async def _expire_isr(self) -> None:
        """Kafka's isr-expiration task: every half lag time, drop the members that fell behind."""
        period = max(self.config.lag_time_max_ms / 2000, 0.01)
        while not self._closed:
            await asyncio.sleep(period)
            for tp, change in await self._io(self._shrinks):
                self._send_alter(tp, change)

    def _shrinks(self) -> list[tuple[TP, AlterPartition]]:
        now = self.clock.now_ms()
        changes = []
        for tp, replica in list(self.replicas.items()):
            if replica.leader is not None:
                change = replica.leader.maybe_shrink_isr(now)
                if change is not None:
                    changes.append((tp, change))
        return changes

    def _send_alter(self, tp: TP, request: AlterPartition) -> None:
        """Make sure the partition's ISR change reaches the controller. One sender per partition
        sends whatever change is pending when it gets to it (a newer one than `request`, if the
        metadata cleared that and a fetch proposed another meanwhile)."""
        task = self._alters.get(tp)
        if task is None or task.done():
            self._alters[tp] = asyncio.ensure_future(self._alter(tp))

    async def _alter(self, tp: TP) -> None:
        """Send the pending change until the controller answers it, give the leader the answer,
        and go on with the next pending change if there is one. A change still pending after its
        answer (an epoch the controller moved past) waits for the metadata, as Kafka's does."""
        answered: AlterPartition | None = None
        while not self._closed:
            request = await self._io(self._pending, tp)
            if request is None or request == answered:
                return
            try:
                error, registration = await self.controller.alter_partition(tp, request)
            except Exception:  # the controller is away (restarting): send again
                log.debug("AlterPartition for %s-%s not answered; sending again", *tp, exc_info=True)
                await asyncio.sleep(self.fetcher.alter_retry_ms / 1000)
                continue
            replica = self.replicas.get(tp)
            if replica is None:
                return
            await self._io(replica.isr_change_answered, request, error, registration, self.clock.now_ms())
            self._notify(tp)
            answered = request

    def _pending(self, tp: TP) -> AlterPartition | None:
        replica = self.replicas.get(tp)
        leader = replica.leader if replica is not None else None
        return leader.pending if leader is not None else None

    # -- the follower ----------------------------------------------------------------------------

    def _start_fetchers(self) -> None:
        sources = set()
        for replica in self.replicas.values():
            follower = replica.follower  # read once: the I/O thread may replace it
            if follower is not None and follower.leader >= 0:
                sources.add(follower.leader)
        for source in sources:
            task = self._fetchers.get(source)
            if task is None or task.done():
                self._fetchers[source] = asyncio.ensure_future(self._fetch_from(source))

    async def _fetch_from(self, source: int) -> None:
        """Kafka's ReplicaFetcherThread for one source: fetch every partition followed from it in
        one call, apply the answers, again; back off after a failed call or an error answer."""
        link = self.leader_link(source)
        while not self._closed:
            try:
                sent = await self._io(self._next_fetches, source)
            except Exception:  # noqa: BLE001 - a fetcher that ends stops every partition it carries
                log.exception("preparing the fetch from replica %s failed; trying again", source)
                await asyncio.sleep(self.fetcher.backoff_ms / 1000)
                continue
            if not sent:
                return
            try:
                # Bounded: a host that hangs must not hold this fetcher (and its partitions) forever.
                answers = await eager.within(
                    link.replica_fetch(sent, self.fetcher.max_wait_ms), (self.fetcher.max_wait_ms + REQUEST_TIMEOUT_MS) / 1000
                )
            except Exception:  # the leader's host is away: the controller will say who leads next
                log.debug("fetch from replica %s failed", source, exc_info=True)
                await asyncio.sleep(self.fetcher.backoff_ms / 1000)
                continue
            errors = await self._io(self._apply_fetched, sent, answers)
            for tp, _ in sent:
                self._notify(tp)
            if errors:
                await asyncio.sleep(self.fetcher.backoff_ms / 1000)

    def _next_fetches(self, source: int) -> list[tuple[TP, ReplicaFetch]]:
        sent = []
        # A copy taken at once (the event loop adds and removes replicas while this thread runs).
        for tp, replica in list(self.replicas.items()):
            if replica.follower is not None and replica.follower.leader == source:
                fetch = replica.next_fetch()
                if fetch is not None:
                    sent.append((tp, fetch))
        return sent

    def _apply_fetched(self, sent: list[tuple[TP, ReplicaFetch]], answers: list[ReplicaFetched]) -> int:
        """On the I/O thread: apply each answer; a partition whose answer fails (a corrupt batch, a
        disk error) is logged and fetched again after the back-off, the others go on (Kafka marks
        only that partition failed)."""
        errors = 0
        for (tp, fetch), answer in zip(sent, answers):
            replica = self.replicas.get(tp)
            if replica is None:
                continue
            try:
                error = replica.apply_fetched(fetch, answer)
            except Exception:
                log.exception("replica of %s-%s: applying the leader's answer failed", *tp)
                error = ErrorCode.kafka_storage_error
            errors += error is not ErrorCode.none
            if error is ErrorCode.none:
                self._compact_follower(tp, replica)
        return errors

    def _compact_follower(self, tp: TP, replica: LogReplica) -> None:
        """On the I/O thread, after a follower's append: Kafka's cleaner runs on every replica of
        a compacted topic, so a follower's copy (a coordinator's __consumer_offsets or
        __share_group_state on another node) is compacted too, once a segment has rolled since
        its last pass, below its own high watermark: never past what is committed, which no
        truncation cuts. Without it a follower's copy grew until it led, and a coordinator that
        then led it replayed all of it."""
        partition_log = replica.log
        if replica.leads or not partition_log.config.compacted or partition_log.failed:
            return
        count = partition_log.segment_count
        if count < 2 or count <= self._compacted_at.get(tp, 1):
            return
        end = partition_log.end_offset
        try:
            partition_log.compact(self.clock.now_ms(), replica.high_watermark)
        except Exception:  # noqa: BLE001 - the copy stays as it was; the next roll tries again
            log.exception("replica of %s-%s: compacting the follower's copy failed", *tp)
        if partition_log.end_offset < end:
            # Its read found a corrupt batch and cut the log there (a follower's compaction may be
            # the first read of its older segments): the follower fetches again from the cut,
            # rather than from its old end over a hole.
            log.warning("replica of %s-%s: the follower's copy was cut at %d by a corrupt batch",
                        tp[0], tp[1], partition_log.end_offset)
            try:
                replica.cut_at_log_end()
            except Exception:  # noqa: BLE001 - a log that cannot be cut refuses appends from now on
                log.exception("replica of %s-%s: cutting the follower after a corrupt batch failed", *tp)
        self._compacted_at[tp] = partition_log.segment_count

    async def compact(self, tp: TP, now_ms: int) -> None:
        """Compact a leader's log below its high watermark, on the I/O thread (beside appends)."""
        replica = self.replicas.get(tp)
        if replica is not None and replica.leads:
            await self._io(lambda: replica.log.compact(now_ms, replica.high_watermark))

    def changed(self, tp: TP) -> asyncio.Event | None:
        """The event set the next time `tp` changes here (its high watermark, its role, its log);
        None for a partition not held here. A waiter takes it before it reads, so no change
        between the read and the wait is missed."""
        return self._changed.get(tp)

    async def delete(self, tps: list[TP]) -> None:
        """The partitions' topic was deleted: close and remove their logs here."""
        async with self._applying:
            for tp in tps:
                await self._remove(tp)
                self._applied.pop(tp, None)

    # -- plumbing --------------------------------------------------------------------------------

    def _notify(self, tp: TP) -> None:
        event = self._changed.get(tp)
        if event is not None:
            event.set()
            self._changed[tp] = asyncio.Event()

    async def _wait(self, tp: TP, check: Callable[[], ErrorCode | None], timeout_ms: int) -> ErrorCode | None:
        """check() until it answers, re-checking whenever the partition changes; None on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            event = self._changed.get(tp)
            answer = check()
            remaining = deadline - loop.time()
            if answer is not None or remaining <= 0 or event is None:
                return answer
            try:
                await eager.within(event.wait(), remaining)  # a channel call runs this without a Task
            except TimeoutError:
                pass

    async def _io(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def close(self) -> None:
        self._closed = True
        tasks = [*self._fetchers.values(), *self._alters.values(), *([self._expiry] if self._expiry else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with self._applying:
            replicas = list(self.replicas.items())
            self.replicas.clear()
            for _, replica in replicas:
                await self._io(replica.log.close)
            for tp, _ in replicas:
                self._notify(tp)  # acks=all waiters learn the replica is gone
            self._changed.clear()
        self.executor.shutdown(wait=True)


def _claim_directory(path: Path, topic_id: uuid.UUID) -> None:
    """Make `path` the log of topic `topic_id`: a directory holding another topic's id (a deleted
    topic's copy this replica missed) is removed first; then the id is written beside the log."""
    stored = read_topic_id(path)
    if stored is not None and stored != topic_id:
        log.warning("%s held a deleted topic's log (topic id %s, not %s): removed", path, stored, topic_id)
        remove_directory(path)
    if stored != topic_id:
        path.mkdir(parents=True, exist_ok=True)
        write_topic_id(path, topic_id)
