"""Partition leader: the user-topic partitions one actor leads (Produce, Fetch, ListOffsets), and
the share groups' in-flight records on them (ShareFetch, ShareAcknowledge: cluster/share/).

Loading a partition opens its log and rebuilds its idempotent producers' state from the stored
batch headers, before the partition serves.

`PartitionLeader` is the plain object (tests drive it directly); `PartitionLeaderActor` is the
Ray shell. Every call names the leader epoch the gateway routed with: a partition this actor
does not lead at that epoch answers NOT_LEADER_OR_FOLLOWER, and the gateway refreshes its map.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from kio.schema.errors import ErrorCode

from cluster.calls import FetchItem, ListOffsetsItem, LogEnd, ProduceItem
from cluster.calls.kinds import ActorKind

from cluster.actors.common import ChannelHost, identity, node_storage, setup_process, wait_forever
from cluster.config import Config
from cluster.leadership import Leadership, empty_leadership
from cluster.log import FlushPolicy, LogConfig, PartitionLog
from cluster.metrics import registry as metrics_registry
from cluster.partition import FetchOutcome, ProduceOutcome, UserPartition, check_client_epoch
from cluster.clients.controller import ControllerClient
from cluster.clients.replica_links import ReplicaLinks
from cluster.clients.persister import Persister
from cluster.replicated_partition import ReplicatedPartition
from cluster.replication.host import ReplicaHost
from cluster.replication.log_replica import ReplicaFetch, ReplicaFetched
from cluster.replication.manager import ControllerLink, LeaderLink, ReplicaManager
from cluster.replication.push import ReplicaPush
from cluster.producer_state import ProducerStateManager
from cluster.clients.routing import Router
from cluster.runtime import LoopWakeups, SystemClock
from cluster.delayed_fetch import delayed_fetch
from cluster.share.manager import SharePartitionManager
from cluster.share.requests import ShareFetchCall, ShareOutcome

TP = tuple[str, int]


def user_log_config(config: Config) -> LogConfig:
    return LogConfig(
        segment_bytes=config["raygroups.log.segment.bytes"],
        flush=FlushPolicy(config["raygroups.log.flush"]),
        sync_filesystem=config["raygroups.log.sync"] == "filesystem",
    )


class PartitionLeader:
    def __init__(
        self,
        name: str,
        config: Config,
        data_dir: Path,
        log_opener: Callable[[Path, LogConfig], PartitionLog] = PartitionLog.open,
        persister: Any = None,
        clock: Any = None,
        wakeups: Any = None,
    ) -> None:
        self.name = name
        self.directory_id: uuid.UUID | None = None  # its data directory's, once the Ray shell has read it
        self._open_log = log_opener
        self.config = config
        self.data_dir = Path(data_dir)
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"{name}-io")
        self.partitions: dict[TP, UserPartition] = {}
        # Opens under way: the controller retries a load that timed out, and the retry must join the
        # open in progress rather than open the same log directory a second time.
        self._opening: dict[TP, asyncio.Task] = {}
        self._log_config = user_log_config(config)
        clock = self.clock = clock or SystemClock()
        self.shares = SharePartitionManager(config, persister, clock, wakeups or LoopWakeups(clock), self._leading)
        # The replicated partitions' replicas kept here, from the controller's first push.
        self.host = ReplicaHost(name, config, self.data_dir, self._log_config, clock, self._serve_if_leading)

    @property
    def replicas(self) -> ReplicaManager | None:
        return self.host.manager

    # -- leadership -----------------------------------------------------------------------------

    async def load(self, items: list[tuple[str, int, int]]) -> list[str]:
        """Open the partitions' logs; returns what recovery cut, one line per partition that needed it."""

        async def load_one(topic: str, p: int, epoch: int) -> str | None:
            current = self.partitions.get((topic, p))
            if current is not None:
                if epoch > current.epoch:
                    current.epoch = epoch  # re-elected here: the log is already open
                    # Someone else may have led in between: share partitions re-read their state.
                    self.shares.drop_partition(topic, p)
                # The same epoch is the controller retrying a load that answered late: nobody led
                # in between, and re-reading the durable state would forget what members hold.
                return None
            opening = self._opening.get((topic, p))
            if opening is None:
                opening = self._opening[(topic, p)] = asyncio.ensure_future(self._open(topic, p, epoch))
                opening.add_done_callback(lambda _t, tp=(topic, p): self._opening.pop(tp, None))
            # Shielded: a caller that stops waiting (the load timed out) must not cancel the open.
            cut = await asyncio.shield(opening)
            self.partitions[(topic, p)].epoch = max(self.partitions[(topic, p)].epoch, epoch)
            return cut

        return [r for r in await asyncio.gather(*(load_one(*item) for item in items)) if r]

    async def _open(self, topic: str, p: int, epoch: int) -> str | None:
        started = time.monotonic()
        path = self.data_dir / f"{topic}-{p}"
        log = await self._run(self._open_log, path, self._log_config)
        # Idempotent producers' last batches, so that a retry reaching this new leader after a
        # failover is still recognised as a duplicate (headers only; see producer_state.py).
        producer_state = await self._run(_rebuild_producer_state, log)
        self.partitions[(topic, p)] = UserPartition(
            topic, p, epoch, log, self.executor, self.config["message.max.bytes"], producer_state
        )
        metrics_registry.observe("partition_load_time_ms", (time.monotonic() - started) * 1000)
        return f"{topic}-{p}: {log.recovery.reason}" if log.recovery.truncated else None

    async def unload(self, items: list[TP]) -> None:
        await asyncio.gather(*(self._close(tp) for tp in items))

    async def delete(self, items: list[TP]) -> None:
        """Close and remove the partitions' logs (DeleteTopics); also for partitions not loaded here."""
        await self.unload(items)
        await self.host.delete(items)
        for topic, p in items:
            await self._run(shutil.rmtree, self.data_dir / f"{topic}-{p}", True)

    # -- replicated partitions (issue 25) --------------------------------------------------------

    async def apply_replicas(self, push: ReplicaPush, leader_link: Callable[[int], LeaderLink],
                             controller: ControllerLink) -> None:
        """The controller's registrations of the replicas this actor keeps (ReplicaHost.apply): a
        partition whose replica here leads is served (produce, fetch, share groups) at its leader
        epoch; one that stopped leading here closes its serving side, its log stays a follower's."""
        await self.host.apply(push, leader_link, controller)

    async def _serve_if_leading(self, tp: TP) -> None:
        assert self.replicas is not None
        replica = self.replicas.replicas.get(tp)
        leader = replica.leader if replica is not None else None
        current = self.partitions.get(tp)
        if current is not None and not isinstance(current, ReplicatedPartition):
            return  # kept in one copy, loaded by the controller: not this path's
        if leader is not None and current is not None and current.replica is replica and not current.closed:
            # Still the leader (a new epoch from a registration that kept it leading, as when a
            # follower left): serve on, waiting acks=all writes too, as Kafka keeps a delayed
            # produce across such a bump; only the epoch requests must name changes.
            current.epoch = leader.leader_epoch
            return
        if current is not None:
            self.shares.drop_partition(*tp)  # its share state is re-read by whoever serves it next
            self.partitions.pop(tp, None)
            await current.close()
        if leader is None:
            return
        producer_state = await self._run(_rebuild_producer_state, replica.log)
        self.partitions[tp] = ReplicatedPartition(
            tp[0], tp[1], leader.leader_epoch, self.replicas, replica, self.executor,
            self.config["message.max.bytes"], producer_state,
        )

    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]:
        return await self.host.replica_fetch(items, max_wait_ms)

    async def _close(self, tp: TP) -> None:
        self.shares.drop_partition(*tp)
        partition = self.partitions.pop(tp, None)
        if partition is not None:
            await partition.close()

    def led(self) -> list[dict[str, Any]]:
        return [
            {"topic": t, "partition": p, "epoch": part.epoch, "status": "active", "end_offset": part.log.end_offset}
            for (t, p), part in sorted(self.partitions.items())
        ]

    # -- requests --------------------------------------------------------------------------------

    def _leading(self, topic: str, p: int, epoch: int) -> UserPartition | None:
        partition = self.partitions.get((topic, p))
        if partition is None or partition.closed or partition.epoch != epoch:
            return None
        return partition

    async def produce(self, items: list[ProduceItem]) -> list[ProduceOutcome]:
        # Every request is checked and queued before the first wait, in order (UserPartition.submit),
        # so all of one call join the same appends, as they did as one task each.
        submitted: list[ProduceOutcome | asyncio.Future] = []
        for item in items:
            partition = self._leading(item.topic, item.partition, item.epoch)
            if partition is None:
                submitted.append(ProduceOutcome(
                    ErrorCode.not_leader_or_follower, message=f"{self.name} does not lead {item.topic}-{item.partition}"
                ))
            else:
                submitted.append(partition.submit(item.records, item.acks_all, item.timeout_ms))
        return [s if type(s) is ProduceOutcome else await s for s in submitted]

    async def fetch(
        self,
        items: list[FetchItem],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
    ) -> list[FetchOutcome]:
        """Returns as soon as min_bytes are available, an error is found, or max_wait_ms passes.
        """
        last: list[tuple[list[FetchOutcome], list[asyncio.Event]]] = []

        def try_complete() -> bool:
            last[:] = [self._read_all(items, max_bytes)]
            outcomes = last[0][0]
            failed = any(o.error_code != ErrorCode.none for o in outcomes)
            return failed or sum(len(o.records) for o in outcomes) >= min_bytes

        await delayed_fetch(max_wait_ms, try_complete, lambda: last[0][1])
        return last[0][0]

    def _read_all(self, items: list[FetchItem], max_bytes: int):
        outcomes: list[FetchOutcome] = []
        waiting_on: list[asyncio.Event] = []
        budget = max_bytes
        for item in items:
            partition = self._leading(item.topic, item.partition, item.epoch)
            if partition is None:
                outcomes.append(FetchOutcome(ErrorCode.not_leader_or_follower))
                continue
            fenced = check_client_epoch(item.client_epoch, partition.epoch)
            if fenced is not None:
                outcomes.append(FetchOutcome(fenced))
                continue
            # KIP-74: a read returns at least one whole batch, so the response may exceed max_bytes
            # by the first batch; once the budget is spent, partitions report positions only.
            outcome = partition.read(item.offset, min(item.max_bytes, budget) if budget > 0 else 0)
            budget -= len(outcome.records)
            outcomes.append(outcome)
            if outcome.error_code == ErrorCode.none:
                # Any partition's new records may be what brings the fetch to min_bytes (Kafka's
                # DelayedFetch counts the bytes of every partition, not just of the empty ones).
                waiting_on.append(partition.data_appended)
        return outcomes, waiting_on

    async def list_offsets(self, items: list[ListOffsetsItem]) -> list[LogEnd]:
        out = []
        for item in items:
            partition = self._leading(item.topic, item.partition, item.epoch)
            if partition is None:
                out.append(LogEnd(ErrorCode.not_leader_or_follower))
                continue
            fenced = check_client_epoch(item.client_epoch, partition.epoch)
            if fenced is not None:
                out.append(LogEnd(fenced))
                continue
            if isinstance(partition, ReplicatedPartition) and partition.high_watermark() is None \
                    and item.timestamp not in (-2, -4):
                out.append(LogEnd(ErrorCode.offset_not_available))  # KIP-207: a new leader not caught up
                continue
            offset, ts = partition.offset_for(item.timestamp)
            out.append(LogEnd(ErrorCode.none, offset, ts, partition.epoch if offset >= 0 else -1))
        return out

    # -- share groups ------------------------------------------------------------------------------

    async def share_fetch(self, call: ShareFetchCall) -> list[ShareOutcome]:
        return await self.shares.share_fetch(call)

    def share_wake(self, keys: list[str]) -> None:
        self.shares.wake(keys)

    def share_release(self, group_id: str, member_id: str, items: list[TP]) -> int:
        return self.shares.release(group_id, member_id, items)

    def share_evict(self, group_id: str, items: list[TP], gateway: int = 0) -> None:
        self.shares.evict(group_id, items, gateway)

    async def shutdown(self) -> None:
        await self.unload(list(self.partitions))
        await self.host.close()
        self.executor.shutdown(wait=True)

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


def _rebuild_producer_state(log: PartitionLog) -> ProducerStateManager:
    return ProducerStateManager.rebuild(log.batch_headers())


@ray.remote
class PartitionLeaderActor(ChannelHost):
    def __init__(self, name: str, config: Config, data_dir: str, controller: Any = None) -> None:
        setup_process()
        self.router = Router(controller, empty_leadership())
        persister = Persister(self.router, config["share.coordinator.state.topic.num.partitions"])
        root, directory = node_storage(data_dir)
        self.leader = PartitionLeader(name, config, root, persister=persister)
        self.leader.directory_id = directory
        self._controller = ControllerClient(controller)
        self._links = ReplicaLinks()

    async def update_leadership(self, leadership: Leadership) -> None:
        self.router.update(leadership)
        # The groups' share settings ride the map (cluster/group_configs.py): those of the newest map
        # the router holds, which a pull may have brought before this push.
        self.leader.shares.set_group_configs(self.router.leadership.group_configs)

    async def ping(self) -> bool:
        return True

    async def wait_forever(self) -> None:
        await wait_forever()

    async def info(self) -> dict[str, Any]:
        return {
            **identity(self.leader.name, ActorKind.PARTITION_LEADER, self.leader.directory_id),
            "partitions": self.leader.led(),
            "share_partitions": self.leader.shares.describe(),
        }

    async def load(self, items: list[tuple[str, int, int]]) -> list[str]:
        return await self.leader.load(items)

    async def apply_replicas(self, push: ReplicaPush) -> None:
        self._links.learn(push)
        await self.leader.apply_replicas(push, self._links.leader_link, self._controller)

    async def replica_fetch(self, items: list[tuple[TP, ReplicaFetch]], max_wait_ms: int) -> list[ReplicaFetched]:
        return await self.leader.replica_fetch(items, max_wait_ms)

    async def unload(self, items: list[TP]) -> None:
        await self.leader.unload(items)

    async def delete(self, items: list[TP]) -> None:
        await self.leader.delete(items)

    async def produce(self, items: list[ProduceItem]) -> list[ProduceOutcome]:
        return await self.leader.produce(items)

    async def fetch(self, items: list[FetchItem], max_wait_ms: int, min_bytes: int, max_bytes: int) -> list[FetchOutcome]:
        return await self.leader.fetch(items, max_wait_ms, min_bytes, max_bytes)

    async def list_offsets(self, items: list[ListOffsetsItem]) -> list[LogEnd]:
        return await self.leader.list_offsets(items)

    async def share_fetch(self, call: ShareFetchCall) -> list[ShareOutcome]:
        metrics_registry.inc("share_fetches")
        return await self.leader.share_fetch(call)

    async def metrics(self) -> dict[str, Any]:
        """Counters, and each share partition's records in flight and oldest lock (counted now)."""
        shares = self.leader.shares
        now = shares.clock.now_ms()
        return metrics_registry.snapshot([g for host in list(shares.hosts.values()) if host.active for g in host.gauges(now)])

    async def share_wake(self, keys: list[str]) -> None:
        self.leader.share_wake(keys)

    async def share_release(self, group_id: str, member_id: str, items: list[TP]) -> int:
        return self.leader.share_release(group_id, member_id, items)

    async def share_evict(self, group_id: str, items: list[TP], gateway: int = 0) -> None:
        self.leader.share_evict(group_id, items, gateway)

    async def shutdown(self) -> None:
        await self.leader.shutdown()

