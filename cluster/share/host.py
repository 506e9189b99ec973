"""SharePartitionHost: one share partition on this partition leader (Kafka's SharePartition, the
broker side of it): the pure `SharePartition` with its acquisition-lock timer, its write queue,
its initialization from the durable state, and reading the log for what it acquires.

Its lifecycle is the share partition's (sharestate/partition_state.py): INITIALIZING while the
durable state is read (with this leader's epoch, which fences any older leader), then ACTIVE;
FAILED, FENCED or DROPPED end it, and the manager forgets it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kernel.timer import arm
from sharestate import messages as m
from sharestate.inflight import RecordState
from sharestate.partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    SharePartition,
    SharePartitionConfig,
    SharePartitionState,
)

from cluster.metrics.registry import REGISTRY
from cluster.partition import UserPartition
from cluster.recordbatch import iter_batches
from cluster.runtime import WakeupTimer
from cluster.share.requests import ShareOutcome, persister_error
from cluster.share.write_queue import ShareStateWriteQueue

log = logging.getLogger(__name__)

ShareKey = tuple[str, str, int]  # (group id, topic, partition)
Readiness = tuple[ErrorCode, str | None]  # the durable state was read, or why not


@dataclass(eq=False)
class SharePartitionHost:
    key: ShareKey
    leader_epoch: int
    share: SharePartition
    timer: WakeupTimer
    writes: ShareStateWriteQueue
    ready: asyncio.Future  # -> Readiness
    available: asyncio.Event = field(default_factory=asyncio.Event)
    gateways: set[int] = field(default_factory=set)  # those with a session of the group fetching here

    @classmethod
    def create(
        cls, key: ShareKey, topic_id: Any, leader_epoch: int, persister: Any, clock: Any, wakeups: Any,
        config: SharePartitionConfig, on_end: Callable[["SharePartitionHost"], None],
    ) -> "SharePartitionHost":
        share = SharePartition(key[0], topic_id, key[2], clock=clock, config=config)
        # An expired lock's operation returns the write that releases its records.
        timer = WakeupTimer(clock, wakeups, lambda operation: writes.submit(operation()))

        def fenced() -> None:
            host.end(SharePartitionState.FENCED)
            on_end(host)

        writes = ShareStateWriteQueue(share, persister, leader_epoch, lambda: host.notify(), fenced)
        host = cls(key, leader_epoch, share, timer, writes, asyncio.get_running_loop().create_future())
        return host

    def _arm_locks(self) -> None:
        """Arm the acquisition locks the last operation handed out (SharePartition.take_timers)."""
        if self.share.timers:
            arm(self.timer, self.share.take_timers(), self.share)

    @property
    def state(self) -> SharePartitionState:
        return self.share.state

    @property
    def active(self) -> bool:
        return self.share.state is SharePartitionState.ACTIVE

    # -- lifecycle ------------------------------------------------------------------------------------

    async def initialize(self, persister: Any, reset_offset: Callable[[], int]) -> None:
        """Read the durable state; `ready` tells the fetches waiting on it how that went."""
        share = self.share
        try:
            response = await persister.read(
                m.ReadShareGroupStateRequest(share.group_id, share.topic_id, share.partition, leader_epoch=self.leader_epoch)
            )
        except Exception as exc:  # never leave fetches waiting on a future nobody completes
            log.exception("reading share state of %s failed", self.key)
            response = m.ReadShareGroupStateResponse(ErrorCode.unknown_server_error, str(exc))
        if share.state is not SharePartitionState.INITIALIZING:  # dropped meanwhile
            self.ready.set_result((ErrorCode.not_leader_or_follower, None))
        elif response.error_code != ErrorCode.none:
            self.end(SharePartitionState.FAILED)  # the next fetch tries again
            self.ready.set_result((persister_error(response.error_code), response.error_message))
        else:
            share.initialize(response.start_offset, response.state_epoch, response.state_batches, reset_offset())
            self.ready.set_result((ErrorCode.none, None))

    def end(self, state: SharePartitionState) -> None:
        """Its locks die with it; fetches waiting on it look again and find it gone."""
        self.share.end(state)
        self.timer.cancel_all()
        self.notify()

    def notify(self) -> None:
        """Wake the long polls watching this share partition."""
        self.available.set()
        self.available = asyncio.Event()

    # -- serving ------------------------------------------------------------------------------------

    def acquire(
        self, partition: UserPartition, member_id: str, max_records: int, max_bytes: int, record_limit: bool = False
    ) -> tuple[bytes, list[AcquiredRecords]]:
        """Read the log at the next fetch offset and acquire what is available there."""
        share = self.share
        log_start = partition.log.log_start_offset
        if log_start > share.start_offset:
            self.writes.submit(share.archive_before(log_start))
        if not share.can_acquire_records():
            return b"", []
        offset = share.next_fetch_offset()
        # The read goes no further than the fetch can acquire: max_records offsets past the
        # in-flight window, each of whose offsets may be unavailable. Acquiring stops within them
        # (whole batches), so a longer read only adds headers to parse: with one-record batches,
        # a read to the 64 KiB floor parsed hundreds of headers for one record, most of a
        # ShareFetch's time. This counts offsets, so it assumes a log without offset gaps between
        # batches: user topics are never compacted (cleanup.policy is delete); a compacted one
        # would get fewer records per fetch, never wrong ones.
        up_to = max(offset, share.end_offset + 1) + max_records - 1
        read = partition.read(offset, max_bytes, up_to)
        if read.error_code != ErrorCode.none or not read.records:
            return b"", []
        spans = [(pos, header) for pos, header in iter_batches(read.records)]
        acquired = share.acquire(
            member_id, max_records, offset, [(h.base_offset, h.last_offset) for _, h in spans], record_limit
        )
        self._arm_locks()
        if not acquired:
            return b"", []
        REGISTRY.inc("share_records_acquired", (), sum(a.last_offset - a.first_offset + 1 for a in acquired))
        # Whole batches that hold an acquired offset; the client skips records outside the
        # acquired ranges (they belong to someone else or are done).
        view = memoryview(read.records)
        parts, i = [], 0
        for pos, header in spans:
            while i < len(acquired) and acquired[i].last_offset < header.base_offset:
                i += 1
            if i < len(acquired) and acquired[i].first_offset <= header.last_offset:
                parts.append(view[pos : pos + header.size])
        last_pos, last = spans[-1]
        if len(parts) == len(spans) and last_pos + last.size == len(read.records):
            return read.records, acquired  # the common case: every batch read is served, no copy
        return b"".join(parts), acquired

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], out: ShareOutcome) -> Awaitable[None]:
        """Apply the acknowledgements now; the returned awaitable ends when their write is answered."""
        outcome = self.share.acknowledge(member_id, batches)
        self._arm_locks()  # RENEW hands out fresh locks
        if outcome.error_code != ErrorCode.none:
            out.acknowledge_error_code, out.acknowledge_error_message = outcome.error_code, outcome.message or None
            return _nothing()
        _count_acknowledgements(batches)
        if outcome.write is None:
            return _nothing()  # RENEW only, or nothing left in flight: nothing to store
        answer = self.writes.submit(outcome.write, answer=True)
        assert answer is not None
        return _answered(answer, out)

    def release(self, member_id: str) -> bool:
        """The member's session closed: what it holds is available again. True if it held any."""
        if not self.active:
            return False
        write = self.share.release_member(member_id)
        self.writes.submit(write)
        return write is not None

    def gauges(self, now_ms: int) -> list[tuple[str, dict[str, str], float]]:
        """Records in flight by state, and the age of the oldest acquisition lock still holding
        records (lock ids grow, so the smallest one held is the oldest), for a scrape."""
        group_id, topic, p = self.key
        labels = {"group": group_id, "topic": topic, "partition": str(p)}
        share = self.share
        out = [("share_partition_records_in_flight", {**labels, "state": state}, float(n)) for state, n in share.counts().items()]
        held = [s.lock_id for first in share.firsts for _, _, s in share.cached_state[first].states()
                if s.lock_id is not None and s.state is RecordState.ACQUIRED]
        armed = self.timer.armed_at(("lock", group_id, share.topic_id, p, min(held))) if held else None
        out.append(("share_partition_oldest_lock_age_ms", labels, float(max(0, now_ms - armed)) if armed is not None else 0.0))
        return out

    def describe(self) -> dict[str, Any]:
        group_id, topic, p = self.key
        share = self.share
        return {
            "group": group_id,
            "topic": topic,
            "partition": p,
            "start_offset": share.start_offset,
            "end_offset": share.end_offset,
            **share.counts(),
        }


_ACK_TYPES = {1: (("type", "accept"),), 2: (("type", "release"),), 3: (("type", "reject"),), 4: (("type", "renew"),)}


def _count_acknowledgements(batches: Sequence[AcknowledgementBatch]) -> None:
    """Records acknowledged, by type (Kafka's RecordAcknowledgementsPerSec; gaps are not records)."""
    for batch in batches:
        types = batch.acknowledge_types
        if len(types) == 1:
            labels = _ACK_TYPES.get(types[0])
            if labels is not None:
                REGISTRY.inc("share_acknowledgements", labels, batch.last_offset - batch.first_offset + 1)
            continue
        for ack_type in types:
            labels = _ACK_TYPES.get(ack_type)
            if labels is not None:
                REGISTRY.inc("share_acknowledgements", labels)


async def _answered(answer: asyncio.Future, out: ShareOutcome) -> None:
    code, message = await answer
    if code != ErrorCode.none:
        out.acknowledge_error_code, out.acknowledge_error_message = persister_error(code), message


async def _nothing() -> None:
    return None
