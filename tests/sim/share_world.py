"""One simulated share group over two topic-partitions: the real SharePartitionManager (hosts,
write queues, acquisition locks) writing its state through the real ShareCoordinatorShard on the
real CoordinatorRuntime over a memory disk.

The seed decides everything that could interleave in production: member ShareFetches (with
acknowledgements, some duplicated, some below the start offset, some of records not held),
session closes, produced records, retention, clock jumps past acquisition locks, completed and
failed appends, crash-and-reload of the share coordinator partition, and the failover of a
share partition's leader (its host dropped, the next one initialized from the durable state at
a newer leader epoch). The invariants are in tests/sim/share_checks.py.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.config import Config
from cluster.log import LogConfig
from cluster.runtime import CoordinatorRuntime, RuntimeConfig
from cluster.share.manager import SharePartitionManager
from cluster.share.requests import ShareFetchCall, ShareItem
from sharestate import messages as m
from sharestate.config import ShareCoordinatorConfig
from sharestate.coordinator_shard import ShareCoordinatorShard
from sharestate.inflight import AcknowledgeType as A
from sharestate.records import CODEC
from tests.sim import harness, share_checks
from tests.sim.harness import Harness, Violation
from tests.sim.share_log import SimUserPartition
from tests.sim.share_members import Hold, Ledger, ShareMember, odd_ack, ranges_of
from tests.sim.share_persister import SimPersister

GROUP = "share-group"
STATE_TP = ("__share_group_state", 0)
TOPICS = (("orders", 0, uuid.UUID(int=1)), ("orders", 1, uuid.UUID(int=2)))
LOCK_MS = 5_000
DELIVERY_LIMIT = 3


class ShareWorld(Harness):
    def __init__(self, seed: int, members: int = 3, retention: bool = False) -> None:
        super().__init__(seed)
        # Retention moving the log start past the share partition is off by default; half of the
        # seeds of test_share_sim.py turn it on.
        self.retention = retention
        self.epoch = 1
        self.reloading: asyncio.Task | None = None
        self.violation: Violation | None = None  # raised in a callback: reported by check()
        self.members = [ShareMember(f"s{i}") for i in range(members)]
        self.ledger = Ledger(len(TOPICS), LOCK_MS)
        self.shard_config = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=self.rng.randint(0, 4))
        self.runtime = CoordinatorRuntime(
            codec=CODEC,
            shard_factory=functools.partial(ShareCoordinatorShard, config=self.shard_config),
            config=RuntimeConfig(data_dir=Path("/sim"), log_config=LogConfig(), compaction_records=10**9),
            executor=self.executor,
            clock=self.clock,
            wakeups=self.wakeups,
            log_opener=self.disk.open,
        )
        self.persister = SimPersister(self.runtime, STATE_TP, lambda: self.epoch)
        self.partitions = [SimUserPartition(topic, p, 1) for topic, p, _ in TOPICS]
        config = Config.load([
            "share.auto.offset.reset=earliest",
            f"group.share.record.lock.duration.ms={LOCK_MS}",
            f"group.share.delivery.count.limit={DELIVERY_LIMIT}",
            f"group.share.partition.max.record.locks={self.rng.choice((8, 2000))}",
        ])
        self.manager = SharePartitionManager(config, self.persister, self.clock, self.wakeups, self._leading)
        self.checks = share_checks.State(self)
        self._run(self.runtime.load(STATE_TP, self.epoch))
        for topic, p, topic_id in TOPICS:
            answer = self._run(self.persister.initialize(m.InitializeShareGroupStateRequest(GROUP, topic_id, p, 0)))
            assert answer.error_code == ErrorCode.none, answer

    def _leading(self, topic: str, partition: int, epoch: int) -> SimUserPartition | None:
        for part in self.partitions:
            if (part.topic, part.partition) == (topic, partition):
                return part if part.epoch == epoch else None
        return None

    def key(self, tpi: int) -> tuple[str, str, int]:
        return (GROUP, TOPICS[tpi][0], TOPICS[tpi][1])

    def host(self, tpi: int) -> Any:
        return self.manager.hosts.get(self.key(tpi))

    # -- the schedule ----------------------------------------------------------------------------

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.40:
            self._member_step(self.rng.choice(self.members))
        elif roll < 0.50:
            tpi = self.rng.randrange(len(TOPICS))
            n = self.rng.randint(1, 3)
            first, last = self.partitions[tpi].produce(n)
            self.trace.append(f"produce p{tpi} {first}-{last}")
        elif roll < 0.60:
            self.advance(self.rng.choice((self.rng.randint(50, 2000), self.rng.randint(LOCK_MS // 2, LOCK_MS + 500))))
        elif roll < 0.87:
            self.trace.append("io")
            self.executor.run_next()
        elif roll < 0.92:
            self.trace.append("fail next append")
            self.disk.fail_appends += 1
        elif roll < 0.95:
            if self.reloading is None or self.reloading.done():
                self.trace.append("share coordinator crash and reload")
                self.epoch += 1
                self.reloading = self.loop.create_task(self._reload(self.epoch))
        elif roll < 0.98:
            tpi = self.rng.randrange(len(TOPICS))
            part = self.partitions[tpi]
            part.epoch += 1  # a new leader: it reads the durable state at a newer leader epoch
            self.trace.append(f"leader of p{tpi} fails over (epoch {part.epoch})")
            self._in_loop(self.manager.drop_partition, part.topic, part.partition)
        else:
            tpi = self.rng.randrange(len(TOPICS))
            part = self.partitions[tpi]
            if part.batches and self.retention:
                start = part.retain_from(self.rng.randrange(len(part.batches)))
                self.trace.append(f"retention p{tpi}: log starts at {start}")
        self.settle()

    async def _reload(self, epoch: int) -> None:
        await self.runtime.unload(STATE_TP)
        await self.runtime.load(STATE_TP, epoch)

    def _member_step(self, member: ShareMember) -> None:
        if member.outstanding is not None:
            return
        if member.session_open and self.rng.random() < 0.08:
            self._close(member)
            return
        now = self.clock.now_ms()
        chosen = self.rng.sample(range(len(TOPICS)), self.rng.randint(1, len(TOPICS)))
        items, sent = [], []
        for tpi in sorted(chosen):
            host = self.host(tpi)
            start = host.share.start_offset if host is not None and host.active else None
            end = host.share.end_offset if host is not None and host.active else None
            if self.rng.random() < 0.15:
                acks = odd_ack(member, tpi, start, end, self.ledger.held_by(member.name, tpi, host, now), self.rng)
            else:
                acks = ranges_of(self.ledger.held_by(member.name, tpi, host, now), self.rng)
            member.sent.setdefault(tpi, []).extend(acks)
            acking = self._set_aside(member, tpi, acks)
            # The start offset when the acknowledgements are applied (the next loop turn): offsets
            # below it are skipped, without a write, so only those at or above it become done.
            below = bool(acks) and start is not None and all(a.last_offset < start for a in acks)
            fetch = not acks or self.rng.random() < 0.8
            topic, p, topic_id = TOPICS[tpi]
            items.append(ShareItem(topic, p, self.partitions[tpi].epoch, topic_id, tuple(acks), fetch))
            sent.append((tpi, start, below, acking, _not_in_flight(host, acks), self.partitions[tpi].log.log_start_offset))
        call = ShareFetchCall(GROUP, member.name, tuple(items), max_wait_ms=0, max_records=self.rng.randint(1, 6))
        member.session_open = True
        self.trace.append(f"{member.name} share-fetch {[(i.partition, i.acknowledgements, i.fetch) for i in items]}")
        task = self.loop.create_task(self.manager.share_fetch(call))
        member.outstanding = task
        self.loop.run_until_complete(asyncio.sleep(0))  # its first step picks (or creates) the hosts
        serving = [(tpi, self.host(tpi), *rest) for tpi, *rest in sent]
        if not all(host is not None and host.active for _, host, *_ in serving):
            # Acknowledgements wait until every partition of the call is ready, and the start
            # offset may move meanwhile: what they made done is then not known here.
            serving = [(tpi, host, None, *rest) for tpi, host, _, *rest in serving]
        task.add_done_callback(lambda t: self._guarded(self._answered, member, call, serving, now, t))

    def _guarded(self, fn, *args) -> None:
        try:
            fn(*args)
        except Violation as exc:
            self.violation = self.violation or exc

    def _answered(self, member: ShareMember, call: ShareFetchCall, serving: list, since: int, task: asyncio.Task) -> None:
        member.outstanding = None
        if task.cancelled():
            return
        outcomes = task.result()
        now = self.clock.now_ms()
        self.trace.append(f"{member.name} <- {[(o.error_code.name, o.acknowledge_error_code.name, o.acquired) for o in outcomes]}")
        first_fetch = next((i for i, item in enumerate(call.items) if item.fetch), None)
        for n, (item, out, (tpi, host, start, below, acking, unfetched, log_start)) in enumerate(zip(call.items, outcomes, serving)):
            if item.acknowledgements:
                self._acknowledged(member, tpi, host, start, below, acking, unfetched, item, out, now, since)
            if n == first_fetch and out.error_code == ErrorCode.none and host is self.host(tpi) and host.active:
                # The first partition of a fetch is always acquired from, after archiving what the
                # log no longer holds: from then on the next fetch offset is in the log.
                next_offset = host.share.next_fetch_offset()
                if log_start == self.partitions[tpi].log.log_start_offset and next_offset < log_start:
                    raise Violation(
                        f"p{tpi}: the share partition fetches next at {next_offset}, below the log start {log_start}: "
                        f"it can deliver nothing more (start {host.share.start_offset}, end {host.share.end_offset})"
                    )
            if out.error_code != ErrorCode.none or not out.acquired:
                continue
            if not (host is self.host(tpi) and host is not None and host.active and now < since + LOCK_MS):
                continue  # handed out by a host that is gone, or under a lock that may have expired
            for run in out.acquired:
                if run.delivery_count > DELIVERY_LIMIT:
                    raise Violation(f"p{tpi} {run} delivered more than {DELIVERY_LIMIT} times")
                for offset in range(run.first_offset, run.last_offset + 1):
                    if offset in self.ledger.done[tpi]:
                        raise Violation(f"p{tpi} offset {offset} was acknowledged durably and is delivered again to {member.name}")
                    other = self.ledger.holds.get((tpi, offset))
                    if other is not None and other.member != member.name and self.ledger.valid(other, host, now):
                        raise Violation(f"p{tpi} offset {offset} acquired by {member.name} while {other.member} holds it")
                    self.ledger.holds[(tpi, offset)] = Hold(member.name, host, since, run.delivery_count)

    def _set_aside(self, member: ShareMember, tpi: int, acks) -> dict:
        """Holds being acknowledged: a RELEASE may make them another member's before the answer
        (which also waits for the call's other writes), so they are not holds until it fails."""
        aside = {}
        for ack in acks:
            for offset in range(ack.first_offset, ack.last_offset + 1):
                hold = self.ledger.holds.get((tpi, offset))
                if hold is not None and hold.member == member.name:
                    aside[(tpi, offset)] = self.ledger.holds.pop((tpi, offset))
        return aside

    def _acknowledged(self, member, tpi, host, start, below, acking, unfetched, item, out, now, since) -> None:
        code = out.acknowledge_error_code
        if below and code == ErrorCode.invalid_record_state:
            raise Violation(f"p{tpi} acknowledgement {item.acknowledgements} below the start offset failed: {code.name}")
        if code != ErrorCode.none:
            for key, hold in acking.items():  # nothing changed: they are still the member's
                self.ledger.holds.setdefault(key, hold)
            return
        if start is None:
            return
        for ack in item.acknowledgements:
            for offset in range(max(ack.first_offset, start), ack.last_offset + 1):
                if offset in unfetched:
                    continue  # between in-flight batches: skipped, not acknowledged (Kafka)
                hold = self.ledger.holds.get((tpi, offset))
                # Not a hold taken after this was sent: a RELEASE may free a record before its answer.
                if hold is not None and hold.member != member.name and hold.since < since and self.ledger.valid(hold, host, now):
                    raise Violation(f"p{tpi} offset {offset} held by {hold.member} was acknowledged by {member.name}")
                if hold is not None and hold.member == member.name:
                    del self.ledger.holds[(tpi, offset)]
                if ack.acknowledge_types[0] in (A.ACCEPT, A.REJECT):
                    self.ledger.done[tpi].add(offset)

    def _in_loop(self, fn, *args):
        """Call fn as the gateway does, inside the running loop: the writes it queues are tasks of
        this world's loop (outside it, asyncio would put them on another loop that never runs)."""

        async def call():
            return fn(*args)

        return self.loop.run_until_complete(call())

    def _close(self, member: ShareMember) -> None:
        """The member's share session closes: the gateway releases what it holds everywhere."""
        self.trace.append(f"{member.name} closes its session")
        before = {tpi: share_checks.held_states(self.host(tpi), member.name) for tpi in range(len(TOPICS))}
        self._in_loop(self.manager.release, GROUP, member.name, [(t, p) for t, p, _ in TOPICS])
        for tpi, held in before.items():
            share_checks.released_with_delivery_given_back(self.host(tpi), tpi, held)
        self.ledger.drop_member(member.name)
        member.session_open = False

    # -- invariants ------------------------------------------------------------------------------

    def quiescent(self) -> bool:
        partition = self.runtime.partitions.get(STATE_TP)
        return (
            not self.executor.jobs
            and (self.reloading is None or self.reloading.done())
            and partition is not None
            and partition.status.value == "active"
            and len(partition.queue) == 0
            and all(mb.outstanding is None for mb in self.members)
        )

    def check(self) -> None:
        if self.violation is not None:
            raise self.violation
        if self.quiescent():
            self.checks.at_rest()

def run(seed: int, steps: int = 300, retention: bool = False) -> ShareWorld:
    """Run one seed; raise Violation (with the seed and the last steps) on the first broken invariant."""
    return harness.run(lambda: ShareWorld(seed, retention=retention), seed, steps, "share ")


def _not_in_flight(host: Any, acks: list) -> set[int]:
    """Offsets the acknowledgements name that no in-flight batch holds when they are sent (a gap
    never fetched since recovery): a successful acknowledgement skips them, so it makes them
    nothing. Were another member to fetch them before it is applied, it would fail instead."""
    if host is None or not host.active:
        return set()
    sp = host.share
    return {o for a in acks for o in range(max(a.first_offset, sp.start_offset), a.last_offset + 1) if sp.batch_at(o) is None}
