"""The shared body of the group and share coordinator actors: a runtime over their partitions."""

from __future__ import annotations

import uuid

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kernel.codec import RecordCodec

from cluster.actors.common import ChannelHost, identity, wait_forever
from cluster.calls import CoordinatorItem, Failed, FetchItem, ListOffsetsItem, LogEnd
from cluster.calls.kinds import ActorKind
from cluster.config import Config
from cluster.delayed_fetch import delayed_fetch
from cluster.log import LogError, coordinator_log_config
from cluster.metrics.registry import REGISTRY
from cluster.partition import FetchOutcome, UserPartition, check_client_epoch
from cluster.replicated_partition import ReplicatedPartition, below_high_watermark
from cluster.replication.coordinator_writer import ReplicaWriter
from cluster.replication.host import ReplicaHost
from cluster.replication.log_replica import LogReplica, ReplicaFetch, ReplicaFetched
from cluster.replication.manager import ControllerLink, LeaderLink
from cluster.replication.push import ReplicaPush
from cluster.runtime import (
    CoordinatorRuntime,
    RUNTIME_ERRORS,
    LoadInProgress,
    NotCoordinator,
    PartitionStatus,
    RuntimeConfig,
    ShardFactory,
)


log = logging.getLogger(__name__)

TP = tuple[str, int]


class _ReplicaReads:
    """A replicated coordinator partition read as a replicated user partition is: below its high
    watermark (ReplicatedPartition's read and the same bound on ListOffsets)."""

    read = ReplicatedPartition.read
    high_watermark = ReplicatedPartition.high_watermark

    def __init__(self, replica: LogReplica) -> None:
        self.replica = replica
        self.log = replica.log

    def offset_for(self, timestamp: int) -> tuple[int, int]:
        return below_high_watermark(timestamp, UserPartition.offset_for(self, timestamp), self.high_watermark())


class _LogReads:
    """A coordinator partition's log read as a user partition's is: UserPartition's read and
    offset_for use nothing of it but `.log`, so the one read path serves internal topics too."""

    read = UserPartition.read
    offset_for = UserPartition.offset_for

    def __init__(self, log: Any) -> None:
        self.log = log




def _as_error(exc: Exception) -> Failed:
    """Kafka's CoordinatorOperationExceptionHelper: a lost leadership is NOT_COORDINATOR; a storage
    failure, too few in-sync replicas and a write timeout are COORDINATOR_NOT_AVAILABLE, so the
    client finds the coordinator again and retries."""
    if isinstance(exc, NotCoordinator):
        return Failed(ErrorCode.not_coordinator, str(exc))
    if isinstance(exc, LoadInProgress):
        return Failed(ErrorCode.coordinator_load_in_progress, str(exc))
    return Failed(ErrorCode.coordinator_not_available, str(exc))


# Kafka's setting for how long a coordinator's write may wait to commit, per kind.
_WRITE_TIMEOUT = {
    ActorKind.GROUP_COORDINATOR: "offsets.commit.timeout.ms",
    ActorKind.SHARE_COORDINATOR: "share.coordinator.write.timeout.ms",
}


@dataclass(frozen=True, slots=True)
class Seams:
    """What a simulation puts in place of the real I/O under a coordinator (tests/sim/): the
    executor that runs blocking work, the clock, the wakeups that fire timers, and what opens a
    partition's log. None: the real one."""

    executor: Any = None
    clock: Any = None
    wakeups: Any = None
    log_opener: Any = None


class CoordinatorHost:
    def __init__(
        self,
        name: str,
        kind: ActorKind,
        codec: RecordCodec,
        shard_factory: ShardFactory,
        config: Config,
        data_dir: Path,
        seams: Seams = Seams(),
    ) -> None:
        self.name = name
        self.kind = kind
        self.config = config
        self.directory_id: uuid.UUID | None = None  # its data directory's, once the Ray shell has read it
        self.executor = seams.executor or ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"{name}-io")
        self.runtime = CoordinatorRuntime(
            codec=codec,
            shard_factory=shard_factory,
            config=RuntimeConfig(
                data_dir=Path(data_dir),
                log_config=coordinator_log_config(config),
                compaction_records=config["raygroups.coordinator.compaction.records"],
                shared_sync=True,
                write_timeout_ms=config[_WRITE_TIMEOUT[kind]],
            ),
            executor=self.executor,
            clock=seams.clock,
            wakeups=seams.wakeups,
            log_opener=seams.log_opener,
        )
        # Replicated internal partitions (issue 25): the replicas kept here, led or followed as the
        # controller's pushes say; a partition whose replica leads here is loaded from that
        # replica's log and commits at its high watermark (cluster/replication/coordinator_writer.py).
        self.replicas = ReplicaHost(name, config, Path(data_dir), coordinator_log_config(config),
                                    self.runtime.clock, self._on_role, self._on_demote)
        self.writer = ReplicaWriter(self.replicas, self.runtime.writer, self.runtime.committed)
        self.runtime.use_writer(self.writer)
        # What the body does around a load (the group coordinator: the cluster's topics first,
        # then the share state to initialize), for the controller's loads and a replica's alike.
        self.before_load: Callable[[], Awaitable[None]] | None = None
        self.after_load: Callable[[list[tuple[str, int]]], Awaitable[None]] | None = None
        self._loads: dict[tuple[str, int], asyncio.Task] = {}  # a led replica's load, in the background

    async def load(self, items: list[tuple[str, int, int]]) -> list[str]:
        """Load partitions; returns what log recovery cut, one line per partition that needed it."""
        if self.before_load is not None:
            await self.before_load()
        reports = await asyncio.gather(*(self._timed_load((topic, p), epoch) for topic, p, epoch in items))
        if self.after_load is not None:
            await self.after_load([(t, p) for t, p, _ in items if (t, p) in self.runtime.partitions])
        return [f"{t}-{p}: {r}" for (t, p, _), r in zip(items, reports) if r]

    async def _timed_load(self, tp: tuple[str, int], epoch: int) -> str | None:
        started = time.monotonic()
        report = await self.runtime.load(tp, epoch)
        REGISTRY.observe("partition_load_time_ms", (time.monotonic() - started) * 1000)
        return report

    async def unload(self, items: list[tuple[str, int]]) -> None:
        await asyncio.gather(*(self.runtime.unload(tp) for tp in items))

    # -- replicated internal partitions (issue 25) -------------------------------------------------

    async def apply_replicas(self, push: ReplicaPush, leader_link: Callable[[int], LeaderLink],
                             controller: ControllerLink) -> None:
        await self.replicas.apply(push, leader_link, controller)

    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]:
        return await self.replicas.replica_fetch(items, max_wait_ms)

    def _leading_epoch(self, tp: TP) -> int | None:
        manager = self.replicas.manager
        replica = manager.replicas.get(tp) if manager is not None else None
        return replica.leader.leader_epoch if replica is not None and replica.leader is not None else None

    async def _on_role(self, tp: TP) -> None:
        """A push named tp: serve it from the replica here while that leads (a new leader loads
        its own log to its end, as Kafka's loader does), stop serving it otherwise."""
        epoch = self._leading_epoch(tp)
        if epoch is None:
            load = self._loads.pop(tp, None)
            if load is not None:
                load.cancel()
            if tp in self.runtime.partitions:
                await self.runtime.unload(tp)
            return
        if tp in self._loads:
            return  # the load under way takes the newest epoch when it is done
        current = self.runtime.partitions.get(tp)
        if current is not None and current.source is not None:
            # Still leading (the on_demote hook unloads a replica that stops): the controller's
            # newer leader epoch, as Kafka's scheduleLoadOperation raises an active one's.
            self.runtime.raise_epoch(tp, epoch)
            return
        if current is not None:
            await self.runtime.unload(tp)  # it was kept in one copy: from now on the replica's log
        task = self._loads[tp] = asyncio.ensure_future(self._load_while_leading(tp))
        task.add_done_callback(lambda t, tp=tp: self._loads.pop(tp, None) if self._loads.get(tp) is t else None)

    async def _load_while_leading(self, tp: TP) -> None:
        """In the background: the push that made this replica leader must not wait for a replay
        (the controller's pushes time out). A failed load is tried again while it still leads."""
        while True:
            if self.before_load is not None:
                await self.before_load()
            epoch = self._leading_epoch(tp)  # read after any wait: a push may have raised it
            if epoch is None:
                return
            try:
                await self._timed_load(tp, epoch)
            except Exception:
                log.exception("%s: loading %s-%s from its replica failed; trying again", self.name, *tp)
                await asyncio.sleep(1)
                continue
            latest = self._leading_epoch(tp)
            if latest is not None:
                self.runtime.raise_epoch(tp, latest)  # a push during the load raised it
            if self.after_load is not None and tp in self.runtime.partitions:
                await self.after_load([tp])
            return

    async def _on_demote(self, tp: TP) -> None:
        """Before the replica here stops leading: nothing may append to (or answer from) a log a
        follower's truncation may cut; what waits for its commit answers NOT_COORDINATOR."""
        load = self._loads.pop(tp, None)
        if load is not None:
            load.cancel()
        await self.runtime.unload(tp)

    async def execute(self, topic: str, item: CoordinatorItem) -> Any:
        """Run one operation on its partition's shard, in order; runtime failures become error codes.

        A storage failure answers COORDINATOR_NOT_AVAILABLE (SPEC §4): the client finds the
        coordinator again and retries, while the partition reverts to its last durable state.
        """
        try:
            return await self._submit(topic, item)
        except RUNTIME_ERRORS as exc:
            return _as_error(exc)

    def _submit(self, topic: str, item: CoordinatorItem) -> asyncio.Future:
        started = self.start(topic, item)
        if isinstance(started, Failed):
            future = asyncio.get_running_loop().create_future()
            future.set_result(started)
            return future
        return started

    def start(self, topic: str, item: CoordinatorItem) -> asyncio.Future | Failed:
        """Queue one operation: its future (read it with `outcome`), or why it could not start."""
        tp = (topic, item.partition)
        run, request, runtime = item.op.run, item.request, self.runtime
        try:
            return runtime.submit(tp, item.epoch, lambda token: run(runtime.shard(tp), request, token), item.op.reads)
        except RUNTIME_ERRORS as exc:
            return _as_error(exc)

    @staticmethod
    def outcome(future: asyncio.Future) -> Any:
        """A finished operation's answer as `execute` gives it; an operation's own failure is the
        exception itself, for the caller to raise."""
        if future.cancelled():
            return Failed(ErrorCode.coordinator_not_available, "cancelled")
        exc = future.exception()
        if exc is None:
            return future.result()
        return _as_error(exc) if isinstance(exc, RUNTIME_ERRORS) else exc

    async def execute_within(self, topic: str, items: list[CoordinatorItem], within_s: float | None) -> list[Any]:
        """The outcomes of a batch of operations, queued at once and in order (no task per
        operation: a heartbeat's whole work is smaller than a task's). One not finished within
        `within_s` (None: no limit) comes back as its future (it waits for a commit the replicas
        have not made yet): the caller answers it on its own, and the rest of the batch is not
        held behind it. An operation's own failure fails the call, as it did one by one."""
        futures = [self._submit(topic, item) for item in items]
        pending = [f for f in futures if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=within_s)
        outcomes: list[Any] = []
        for future in futures:
            if not future.done():
                outcomes.append(future)
                continue
            outcome = self.outcome(future)
            if isinstance(outcome, BaseException):
                raise outcome
            outcomes.append(outcome)
        return outcomes

    async def execute_all(self, topic: str, items: list[CoordinatorItem]) -> list[Any]:
        """Every operation's outcome, however long it waits for its commit."""
        return await self.execute_within(topic, items, None)

    # -- Fetch and ListOffsets of the internal partitions: the stored batches, as Kafka serves them ---

    def _readable(self, topic: str, p: int, epoch: int, client_epoch: int) -> tuple[Any, ErrorCode]:
        """The partition's log reads, or why not: moved, at another epoch or loading is
        NOT_LEADER_OR_FOLLOWER (the client looks the leader up again and retries)."""
        partition = self.runtime.partitions.get((topic, p))
        if partition is None or partition.epoch != epoch or partition.status is not PartitionStatus.ACTIVE:
            return None, ErrorCode.not_leader_or_follower
        if partition.log is None:
            return None, ErrorCode.not_leader_or_follower
        fenced = check_client_epoch(client_epoch, partition.epoch)
        if fenced is not None:
            return None, fenced
        if partition.source is not None:  # below its high watermark, as consumers read
            return _ReplicaReads(partition.source.replica), ErrorCode.none
        return _LogReads(partition.log), ErrorCode.none

    def _read_all(self, items: list[FetchItem], max_bytes: int) -> list[FetchOutcome]:
        outcomes: list[FetchOutcome] = []
        budget = max_bytes
        for item in items:
            reads, error = self._readable(item.topic, item.partition, item.epoch, item.client_epoch)
            if reads is None:
                outcomes.append(FetchOutcome(error))
                continue
            try:
                outcome = reads.read(item.offset, min(item.max_bytes, budget) if budget > 0 else 0)
            except (LogError, OSError, ValueError) as exc:
                # A compaction may swap segments under a read; the client retries.
                outcomes.append(FetchOutcome(ErrorCode.kafka_storage_error))
                log.warning("read of %s-%d at %d failed: %s", item.topic, item.partition, item.offset, exc)
                continue
            budget -= len(outcome.records)
            outcomes.append(outcome)
        return outcomes

    async def fetch(
        self, items: list[FetchItem], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> list[FetchOutcome]:
        """Items as the partition leader takes them. With too little to read it waits out max_wait_ms
        and reads again: no event marks a coordinator's appends, and a gateway whose other leaders
        answer first cancels the wait, so user partitions fetched alongside are not held back."""
        last: list[list[FetchOutcome]] = []
        never = asyncio.Event()

        def try_complete() -> bool:
            last[:] = [self._read_all(items, max_bytes)]
            outcomes = last[0]
            return any(o.error_code != ErrorCode.none for o in outcomes) or sum(len(o.records) for o in outcomes) >= min_bytes

        await delayed_fetch(max_wait_ms, try_complete, lambda: [never])
        return last[0]

    def list_offsets(self, items: list[ListOffsetsItem]) -> list[LogEnd]:
        """As the partition leader answers."""
        out = []
        for item in items:
            reads, error = self._readable(item.topic, item.partition, item.epoch, item.client_epoch)
            if reads is None:
                out.append(LogEnd(error))
                continue
            try:
                offset, ts = reads.offset_for(item.timestamp)
            except (LogError, OSError, ValueError) as exc:
                out.append(LogEnd(ErrorCode.kafka_storage_error))
                log.warning("ListOffsets of %s-%d failed: %s", item.topic, item.partition, exc)
                continue
            out.append(LogEnd(ErrorCode.none, offset, ts, item.epoch if offset >= 0 else -1))
        return out

    def led(self) -> list[dict[str, Any]]:
        return [
            {"topic": tp[0], "partition": tp[1], "epoch": epoch, "status": status}
            for tp, (epoch, status) in sorted(self.runtime.led().items())
        ]

    async def shutdown(self) -> None:
        for task in list(self._loads.values()):
            task.cancel()
        await self.runtime.close()
        await self.replicas.close()
        self.executor.shutdown(wait=True)


class CoordinatorActorBody(ChannelHost):
    """What the group and share coordinator actors have in common (their Ray shells subclass it)."""

    host: CoordinatorHost
    # The Ray shells' ways to the other replicas' hosts and to the controller (replicate_through).
    replica_links: Any = None
    replica_controller: Any = None

    def replicate_through(self, links: Any, controller: ControllerLink) -> None:
        self.replica_links, self.replica_controller = links, controller

    async def apply_replicas(self, push: ReplicaPush) -> None:
        """The controller's registrations of the internal partitions' replicas kept here."""
        self.replica_links.learn(push)
        await self.host.apply_replicas(push, self.replica_links.leader_link, self.replica_controller)

    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]:
        return await self.host.replica_fetch(items, max_wait_ms)

    async def ping(self) -> bool:
        return True

    async def wait_forever(self) -> None:
        await wait_forever()

    async def info(self) -> dict[str, Any]:
        return {**identity(self.host.name, self.host.kind, self.host.directory_id), "partitions": self.host.led()}

    async def load(self, items: list[tuple[str, int, int]]) -> list[str]:
        return await self.host.load(items)

    async def metrics(self) -> dict[str, Any]:
        return REGISTRY.snapshot()

    async def unload(self, items: list[tuple[str, int]]) -> None:
        await self.host.unload(items)

    async def fetch(self, items: list[FetchItem], max_wait_ms: int, min_bytes: int, max_bytes: int) -> list[FetchOutcome]:
        return await self.host.fetch(items, max_wait_ms, min_bytes, max_bytes)

    async def list_offsets(self, items: list[ListOffsetsItem]) -> list[LogEnd]:
        return self.host.list_offsets(items)

    async def shutdown(self) -> None:
        await self.host.shutdown()
