"""Share partitions on a partition leader: ShareFetch, acknowledgements and acquisition locks.

For every (share group, partition) it leads and that a share consumer fetched, the partition
leader keeps a `SharePartition` (sharestate/partition.py) and talks to the share coordinator
through the `Persister`, as Kafka's SharePartitionManager does:

- the first fetch reads the durable state (ReadShareGroupState with this leader's epoch, which
  fences any older leader) and resolves `share.auto.offset.reset` against the log;
- acknowledgements are applied first, written to the share coordinator, and answered only once
  the write is durable; a failed write rolls them back (write before success);
- then records are acquired from the log at the share partition's next fetch offset; with
  nothing to acquire the call waits up to MaxWaitMs (Kafka's DelayedShareFetch), woken early by
  new records, by records becoming available again, or by the gateway (`wake`);
- an expired acquisition lock releases its records and writes that too.

Writes of one share partition go out one at a time, in order, and those queued meanwhile go
together in the next write: the start offset written never moves backwards, and a busy
partition costs one Ray call per round trip, not one per acknowledgement.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate import messages as m
from sharestate.offset_reset import OffsetReset
from sharestate.partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    SharePartition,
    SharePartitionConfig,
    StateWrite,
)

from cluster.config import Config
from cluster.partition import UserPartition
from cluster.recordbatch import iter_batches
from cluster.runtime import WakeupTimer

log = logging.getLogger(__name__)

ShareKey = tuple[str, str, int]  # (group id, topic, partition)


# -- what gateways send and get back ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareItem:
    """One partition of a ShareFetch or ShareAcknowledge, routed to its leader at `epoch`."""

    topic: str
    partition: int
    epoch: int
    topic_id: Any
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()
    fetch: bool = True


@dataclass(frozen=True, slots=True)
class ShareFetchCall:
    group_id: str
    member_id: str
    items: tuple[ShareItem, ...]
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
    wake_key: str | None = None  # lets the gateway end the long poll early (see `wake`)
    gateway: int = 0  # the gateway whose share session sent it (see `evict`)


@dataclass(slots=True)
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


# -- one share partition -------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Context:
    key: ShareKey
    topic_id: Any
    leader_epoch: int
    share: SharePartition
    timer: WakeupTimer
    ready: asyncio.Future  # -> (ErrorCode, message): the durable state was read, or why not
    available: asyncio.Event = field(default_factory=asyncio.Event)
    queue: list[tuple[StateWrite, asyncio.Future | None]] = field(default_factory=list)
    sending: bool = False
    dropped: bool = False
    gateways: set[int] = field(default_factory=set)  # those with a session of the group fetching here


class ShareLeader:
    def __init__(
        self,
        config: Config,
        persister: Any,
        clock: Any,
        wakeups: Any,
        leading: Callable[[str, int, int], UserPartition | None],
    ) -> None:
        self.persister = persister
        self.clock = clock
        self.wakeups = wakeups
        self._leading = leading
        self.reset: OffsetReset = config["share.auto.offset.reset"]
        self.partition_config = SharePartitionConfig(
            record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
            delivery_count_limit=config["group.share.delivery.count.limit"],
            max_inflight_records=config["group.share.partition.max.record.locks"],
        )
        self.contexts: dict[ShareKey, _Context] = {}
        self._wakers: dict[str, asyncio.Event] = {}
        self._woken: dict[str, None] = {}  # wakes that arrived before their fetch (bounded)
        self.writes = 0

    # -- ShareFetch and ShareAcknowledge -------------------------------------------------------

    async def share_fetch(self, call: ShareFetchCall) -> list[ShareOutcome]:
        """Acknowledge, then acquire (waiting up to max_wait_ms for something to acquire)."""
        outcomes = [ShareOutcome() for _ in call.items]
        contexts: list[_Context | None] = [None] * len(call.items)
        for i, item in enumerate(call.items):
            partition = self._leading(item.topic, item.partition, item.epoch)
            if partition is None:
                outcomes[i].fail(ErrorCode.not_leader_or_follower, None, bool(item.acknowledgements))
                continue
            contexts[i] = self._context(call.group_id, item, partition)
            contexts[i].gateways.add(call.gateway)
        readiness = await asyncio.gather(*(asyncio.shield(c.ready) if c else _none() for c in contexts))
        for i, ready in enumerate(readiness):
            if ready is not None and ready[0] != ErrorCode.none:
                outcomes[i].fail(ready[0], ready[1], bool(call.items[i].acknowledgements))
                contexts[i] = None
        # Acknowledgements change the in-memory state at once (their records pending until the
        # write is answered); the fetch then runs while the writes are on their way.
        writes = [
            self._acknowledge(ctx, call.member_id, item.acknowledgements, out)
            for item, ctx, out in zip(call.items, contexts, outcomes)
            if ctx is not None and item.acknowledgements
        ]
        fetching = [
            (item, ctx, out) for item, ctx, out in zip(call.items, contexts, outcomes) if ctx is not None and item.fetch
        ]
        if fetching:
            await self._fetch(call, fetching)
        await asyncio.gather(*writes)
        return outcomes

    async def _fetch(self, call: ShareFetchCall, fetching: list[tuple[ShareItem, _Context, ShareOutcome]]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + call.max_wait_ms / 1000
        woken = asyncio.Event()
        if call.wake_key is not None:
            if self._woken.pop(call.wake_key, 0) is None:
                woken.set()
            self._wakers[call.wake_key] = woken
        try:
            while True:
                if self._acquire_all(call, fetching) or woken.is_set():
                    return
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                events = [woken]
                for item, ctx, out in fetching:
                    partition = self._leading(item.topic, item.partition, item.epoch)
                    if partition is None or ctx.dropped:
                        return  # moved away meanwhile: _acquire_all reports it on the next round
                    events += (partition.data_appended, ctx.available)
                waiters = [asyncio.ensure_future(e.wait()) for e in events]
                try:
                    await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waiters:
                        w.cancel()
        finally:
            if call.wake_key is not None:
                self._wakers.pop(call.wake_key, None)
            self._acquire_all(call, fetching, report_only=True)

    def _acquire_all(
        self, call: ShareFetchCall, fetching: list[tuple[ShareItem, _Context, ShareOutcome]], report_only: bool = False
    ) -> bool:
        """One round over the partitions, sharing max_records and max_bytes; True once any
        record was acquired (Kafka's DelayedShareFetch completes with what it acquired)."""
        records_left = call.max_records - sum(_count(o.acquired) for _, _, o in fetching)
        bytes_left = call.max_bytes - sum(len(o.records) for _, _, o in fetching)
        acquired_any = any(o.acquired for _, _, o in fetching)
        for item, ctx, out in fetching:
            if out.error_code != ErrorCode.none or (report_only and out.acquired):
                continue
            partition = self._leading(item.topic, item.partition, item.epoch)
            if partition is None or ctx.dropped:
                out.fail(ErrorCode.not_leader_or_follower, None, False)
                continue
            if report_only or out.acquired or records_left <= 0 or (acquired_any and bytes_left <= 0):
                continue
            records, acquired = self._acquire(ctx, partition, call.member_id, records_left, max(bytes_left, 1))
            if acquired:
                out.records, out.acquired = records, tuple(acquired)
                records_left -= _count(acquired)
                bytes_left -= len(records)
                acquired_any = True
        return acquired_any

    def _acquire(
        self, ctx: _Context, partition: UserPartition, member_id: str, max_records: int, max_bytes: int
    ) -> tuple[bytes, list[AcquiredRecords]]:
        share = ctx.share
        log_start = partition.log.log_start_offset
        if log_start > share.start_offset:
            self._send(ctx, share.archive_before(log_start))
        if not share.can_acquire_records():
            return b"", []
        offset = share.next_fetch_offset()
        read = partition.read(offset, max_bytes)
        if read.error_code != ErrorCode.none or not read.records:
            return b"", []
        spans = [(pos, header) for pos, header in iter_batches(read.records)]
        acquired = share.acquire(member_id, max_records, offset, [(h.base_offset, h.last_offset) for _, h in spans])
        if not acquired:
            return b"", []
        # Whole batches that hold an acquired offset; the client skips records outside the
        # acquired ranges (they belong to someone else or are done).
        view = memoryview(read.records)
        parts, i = [], 0
        for pos, header in spans:
            while i < len(acquired) and acquired[i].last_offset < header.base_offset:
                i += 1
            if i < len(acquired) and acquired[i].first_offset <= header.last_offset:
                parts.append(view[pos : pos + header.size])
        return b"".join(parts), acquired

    def _acknowledge(
        self, ctx: _Context, member_id: str, batches: Sequence[AcknowledgementBatch], out: ShareOutcome
    ) -> Awaitable[None]:
        """Apply the acknowledgements now; the returned awaitable ends when their write is answered."""
        outcome = ctx.share.acknowledge(member_id, batches)
        if outcome.error_code != ErrorCode.none:
            out.acknowledge_error_code, out.acknowledge_error_message = outcome.error_code, outcome.message or None
            return _none()
        if outcome.write is None:
            return _none()  # RENEW only: nothing to store
        answer = self._send(ctx, outcome.write, answer=True)
        assert answer is not None
        return self._answered(answer, out)

    @staticmethod
    async def _answered(answer: asyncio.Future, out: ShareOutcome) -> None:
        code, message = await answer
        if code != ErrorCode.none:
            out.acknowledge_error_code, out.acknowledge_error_message = persister_error(code), message

    # -- members leaving -----------------------------------------------------------------------------

    def release(self, group_id: str, member_id: str, items: Sequence[tuple[str, int]]) -> int:
        """A member's share session closed (or its connection dropped): what it holds on these
        partitions is available again at once. Returns how many partitions had something."""
        released = 0
        for topic, partition in items:
            ctx = self.contexts.get((group_id, topic, partition))
            if ctx is None or not ctx.ready.done() or ctx.ready.result()[0] != ErrorCode.none:
                continue
            write = ctx.share.release_member(member_id)
            if write is not None:
                released += 1
                self._send(ctx, write)
        return released

    def wake(self, keys: Sequence[str]) -> None:
        """End these long polls now (the gateway has data from another leader to answer with)."""
        for key in keys:
            event = self._wakers.get(key)
            if event is not None:
                event.set()
            else:
                self._woken[key] = None
                while len(self._woken) > 10_000:
                    self._woken.pop(next(iter(self._woken)))

    def evict(self, group_id: str, items: Sequence[tuple[str, int]], gateway: int = 0) -> None:
        """`gateway` has no share session of the group left: once no gateway has (Kafka's
        onGroupEmpty), forget the group's share partitions here, so that the next fetch reads the
        durable state afresh. Members on other gateways may still hold records meanwhile."""
        for topic, partition in items:
            ctx = self.contexts.get((group_id, topic, partition))
            if ctx is not None:
                ctx.gateways.discard(gateway)
                if not ctx.gateways:
                    self._drop(ctx)

    # -- leadership --------------------------------------------------------------------------------

    def drop_partition(self, topic: str, partition: int) -> None:
        """The partition moved away or is reloaded: forget its share partitions. Their locks die
        with them; the next leader reads the durable state, where acquisitions do not exist."""
        for key in [k for k in self.contexts if k[1] == topic and k[2] == partition]:
            self._drop(self.contexts[key])

    def _drop(self, ctx: _Context | None) -> None:
        if ctx is None:
            return
        if self.contexts.get(ctx.key) is ctx:
            del self.contexts[ctx.key]
        ctx.dropped = True
        ctx.timer.cancel_all()
        _notify(ctx)

    # -- initialization ------------------------------------------------------------------------------

    def _context(self, group_id: str, item: ShareItem, partition: UserPartition) -> _Context:
        key = (group_id, item.topic, item.partition)
        ctx = self.contexts.get(key)
        if ctx is not None and ctx.leader_epoch == partition.epoch:
            return ctx
        if ctx is not None:
            self.drop_partition(item.topic, item.partition)
        holder: list[_Context] = []
        # An expired lock's operation returns the write that releases its records.
        timer = WakeupTimer(self.clock, self.wakeups, lambda operation: self._send(holder[0], operation()))
        share = SharePartition(
            group_id, item.topic_id, item.partition, clock=self.clock, timer=timer, config=self.partition_config
        )
        ready = asyncio.get_running_loop().create_future()
        ctx = _Context(key, item.topic_id, partition.epoch, share, timer, ready)
        holder.append(ctx)
        self.contexts[key] = ctx
        asyncio.ensure_future(self._initialize(ctx, partition))
        return ctx

    async def _initialize(self, ctx: _Context, partition: UserPartition) -> None:
        group_id, _, p = ctx.key
        try:
            response = await self.persister.read(
                m.ReadShareGroupStateRequest(group_id, ctx.topic_id, p, leader_epoch=ctx.leader_epoch)
            )
        except Exception as exc:  # never leave fetches waiting on a future nobody completes
            log.exception("reading share state of %s failed", ctx.key)
            response = m.ReadShareGroupStateResponse(ErrorCode.unknown_server_error, str(exc))
        if response.error_code != ErrorCode.none:
            if self.contexts.get(ctx.key) is ctx:
                del self.contexts[ctx.key]  # the next fetch tries again
            ctx.ready.set_result((persister_error(response.error_code), response.error_message))
            return
        ctx.share.initialize(
            response.start_offset, response.state_epoch, response.state_batches, self._reset_offset(partition)
        )
        ctx.ready.set_result((ErrorCode.none, None))

    def _reset_offset(self, partition: UserPartition) -> int:
        log_ = partition.log
        if self.reset.strategy == "earliest":
            return log_.log_start_offset
        if self.reset.strategy == "by_duration":
            offset, _ = partition.offset_for(self.clock.now_ms() - self.reset.duration_ms)
            return log_.end_offset if offset < 0 else offset
        return log_.end_offset

    # -- writing the durable state --------------------------------------------------------------------

    def _send(self, ctx: _Context, write: StateWrite | None, answer: bool = False) -> asyncio.Future | None:
        """Queue a write of this share partition; with `answer`, a future of (error code, message)."""
        if write is None:
            return None
        future = asyncio.get_running_loop().create_future() if answer else None
        ctx.queue.append((write, future))
        if not ctx.sending:
            ctx.sending = True
            asyncio.ensure_future(self._drain(ctx))
        _notify(ctx)  # released records may be acquirable already
        return future

    async def _drain(self, ctx: _Context) -> None:
        group_id, _, p = ctx.key
        share = ctx.share
        try:
            while ctx.queue:
                batch, ctx.queue = ctx.queue, []
                transitions = [w.transition for w, _ in batch if w.transition is not None]
                request = m.WriteShareGroupStateRequest(
                    group_id,
                    ctx.topic_id,
                    p,
                    state_epoch=share.state_epoch,
                    leader_epoch=ctx.leader_epoch,
                    start_offset=share.persisted_start_offset(transitions),
                    delivery_complete_count=share.delivery_complete_count(transitions),
                    state_batches=tuple(b for w, _ in batch for b in w.batches),
                )
                try:
                    response = await self.persister.write(request)
                except Exception as exc:
                    log.exception("writing share state of %s failed", ctx.key)
                    response = m.WriteShareGroupStateResponse(ErrorCode.unknown_server_error, str(exc))
                self.writes += 1
                committed = response.error_code == ErrorCode.none
                for write, future in batch:
                    if write.transition is not None:
                        follow_up = share.complete(write.transition, committed)
                        if follow_up is not None:
                            ctx.queue.append((follow_up, None))
                    if future is not None and not future.done():
                        future.set_result((response.error_code, response.error_message))
                if response.error_code in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch):
                    # A newer leader (or a reset of the group's state) exists: this copy is stale.
                    log.warning("share state of %s fenced: %s", ctx.key, response.error_message)
                    self._drop(ctx)
                elif not committed:
                    log.warning("share state write of %s failed: %s", ctx.key, response.error_code.name)
                _notify(ctx)
        finally:
            ctx.sending = False

    # -- views ---------------------------------------------------------------------------------------

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for (group_id, topic, p), ctx in sorted(self.contexts.items()):
            if not ctx.ready.done() or ctx.ready.result()[0] != ErrorCode.none:
                continue
            share = ctx.share
            out.append(
                {
                    "group": group_id,
                    "topic": topic,
                    "partition": p,
                    "start_offset": share.start_offset,
                    "end_offset": share.end_offset,
                    **share.counts(),
                }
            )
        return out


def _notify(ctx: _Context) -> None:
    ctx.available.set()
    ctx.available = asyncio.Event()


def _count(acquired: Sequence[AcquiredRecords]) -> int:
    return sum(a.last_offset - a.first_offset + 1 for a in acquired)


async def _none() -> None:
    return None
