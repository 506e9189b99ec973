"""The controller: the cluster's metadata, its operator API, and the reconcile loop that keeps
every partition led by a live actor.

It is a named Ray actor holding:
- the cluster metadata (topics, leader epochs, producer ids handed out) on its own log, through
  the coordinator runtime;
- a `Reconciler` (cluster/control/reconciler.py), which owns the actors and the leadership map (which actor
  leads each partition of `__consumer_offsets`, `__share_group_state` and every user topic, at which
  leader epoch) and drives that map towards what `cluster/control/placement.py` wants, through the actor
  pool (cluster/control/actor_pool.py), the only code here that talks to Ray.

Changes of leadership are serialised by the reconciler's lock so that epochs and the map move
together. Which actor leads what is not durable: after a restart every partition is placed anew.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from kio.schema.errors import ErrorCode

from cluster.control.actor_pool import ActorPool, RayActorPool
from cluster.control.actor_state import ActorEntry
from cluster.calls.kinds import ActorKind, kind_for_topic
from cluster.actors.common import setup_process
from cluster.log import coordinator_log_config
from cluster.config import Config
from cluster.group_configs import AlterOp, Refusal, apply
from cluster.leadership import Leadership
from cluster.control.leadership_changes import Cause
from cluster.metadata import (
    CODEC,
    CONSUMER_OFFSETS,
    METADATA_TOPIC,
    SHARE_GROUP_STATE,
    ClusterMetadata,
    PartitionLimits,
    ProducerIdBlock,
    Replication,
    TopicOutcome,
    TopicSpec,
)
from cluster.control.reconciler import KIND_COUNT_SETTING, Reconciler
from cluster.control.replica_keeper import ONE_COPY
from cluster.replication.registration import AlterPartition, PartitionRegistration
from cluster.runtime import CoordinatorRuntime, RuntimeConfig

log = logging.getLogger(__name__)

METADATA_TP = (METADATA_TOPIC, 0)
_UNREGISTERED = PartitionRegistration((), (), -1, 0, 0)  # no replicas to delete

__all__ = ["METADATA_TP", "ActorEntry", "Controller", "ControllerActor"]


class Controller:
    def __init__(
        self,
        config: Config,
        data_dir: Path,
        host: str,
        port: int,
        namespace: str,
        pool: ActorPool | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.config = config
        self.data_dir = Path(data_dir)
        self.host = host
        self.base_port = port
        self.namespace = namespace
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="controller-io")
        self.metadata = CoordinatorRuntime(
            codec=CODEC,
            shard_factory=ClusterMetadata,
            config=RuntimeConfig(data_dir=self.data_dir, log_config=coordinator_log_config(config)),
            executor=self.executor,
        )
        self.pool: ActorPool = pool if pool is not None else RayActorPool(config, self.data_dir, namespace)
        self.events: list[dict[str, Any]] = []
        self.reconciler = Reconciler(
            self.pool, config, self._meta, self._bump_epochs, self._event, clock, self._register_directory,
            self._change_registrations, self._adopt_registrations,
        )
        self._loop_task: asyncio.Task | None = None

    @property
    def actors(self) -> dict[str, ActorEntry]:
        return self.reconciler.actors

    @property
    def leaders(self) -> dict[tuple[str, int], str]:
        return self.reconciler.leaders

    @property
    def version(self) -> int:
        return self.reconciler.version

    # -- start and stop ---------------------------------------------------------------------------

    async def start(self) -> list[str]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cut = await self.metadata.load(METADATA_TP, 0)
        if cut:
            self._event("log-recovered", f"{METADATA_TOPIC}-0: {cut}")
        self._check_internal_topics()
        rec = self.reconciler
        spawned = [rec.spawn(kind) for kind, setting in KIND_COUNT_SETTING.items() for _ in range(self.config[setting])]
        await asyncio.gather(*(rec.bring_up(entry) for entry in spawned))
        async with rec.lock:
            await rec.step(reason="startup")  # an actor of each kind on every node, up
            # Only now: the actors have said which data directories there are, which decides
            # whether the internal topics are created replicated, and where.
            if await self._ensure_internal_topics():
                await rec.step(reason="startup")
        own_node = getattr(self.pool, "own_node", lambda: None)()
        gateways = rec.gateways.plan_start(self.host, self.base_port, own_node)
        # A gateway that cannot listen (its port is taken) fails the start: the operator asked for it.
        await asyncio.gather(*(rec.gateways.start(entry) for entry in gateways))
        self._event("ready", f"{len(self.actors)} actors, {len(self.leaders)} partitions led")
        self._loop_task = asyncio.get_running_loop().create_task(rec.run())
        return [f"{e.gateway.host}:{e.gateway.port}" for e in gateways if e.gateway]

    async def shutdown(self) -> None:
        await self.reconciler.stop()
        if self._loop_task is not None:
            self._loop_task.cancel()
        live = [e for e in self.actors.values() if e.alive]
        results = await asyncio.gather(*(self.pool.shutdown(e.handle, 30) for e in live), return_exceptions=True)
        for entry, result in zip(live, results):
            if isinstance(result, BaseException):
                log.warning("%s did not shut down cleanly: %s", entry.name, result)
            self.pool.kill(entry.handle)
        await self.metadata.close()

    def _internal_topics(self) -> dict[str, int]:
        """Each internal topic's partitions as configured."""
        return {
            CONSUMER_OFFSETS: self.config["offsets.topic.num.partitions"],
            SHARE_GROUP_STATE: self.config["share.coordinator.state.topic.num.partitions"],
        }

    def _check_internal_topics(self) -> None:
        meta = self._meta()
        for name, partitions in self._internal_topics().items():
            existing = meta.topics.get(name)
            if existing is not None and existing.partitions != partitions:
                raise RuntimeError(
                    f"{name} has {existing.partitions} partitions in this data directory; "
                    f"it cannot change to {partitions} (a group would move to another partition)"
                )

    async def _ensure_internal_topics(self) -> bool:
        """Create the internal topics on the first start, in one copy in the controller's data
        directory (the other nodes' coordinators are not up yet): the keeper adopts them into
        replication once enough data directories have a coordinator (ReplicaKeeper._adopt)."""
        created = False
        for name, partitions in self._internal_topics().items():
            if name in self._meta().topics:
                continue
            await self.metadata.write(
                METADATA_TP, None, lambda _t, n=name, p=partitions: self._meta().create_topics([TopicSpec(n, p)])
            )
            created = True
        return created

    def _replication(self) -> Replication | None:
        """Where new partitions' replicas go: the replica ids of the data directories live actors
        keep logs in; None where there is one (one node, or nodes sharing a directory), whose
        partitions keep one copy unregistered, as before replication."""
        # The data directories whose user-topic host (a partition leader) is up: a replica placed
        # where none is would start out of the ISR, its leadership elected elsewhere.
        ids = sorted({
            e.replica_id for e in self.actors.values()
            if e.ready and e.replica_id is not None and e.kind is ActorKind.PARTITION_LEADER
        })
        if len(ids) < 2:
            return None
        return Replication(tuple(ids), self.config["default.replication.factor"])

    def _meta(self) -> ClusterMetadata:
        return self.metadata.shard(METADATA_TP)

    async def _bump_epochs(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return await self.metadata.write(METADATA_TP, None, lambda _t: self._meta().bump_epochs(partitions))

    async def _change_registrations(self, changes: dict[tuple[str, int], PartitionRegistration]) -> None:
        await self.metadata.write(METADATA_TP, None, lambda _t: self._meta().change_partitions(changes))

    async def _adopt_registrations(self, adopted: dict[tuple[str, int], PartitionRegistration]) -> None:
        await self.metadata.write(METADATA_TP, None, lambda _t: self._meta().adopt_partitions(adopted))

    async def _register_directory(self, directory: uuid.UUID) -> int:
        return await self.metadata.write(METADATA_TP, None, lambda _t: self._meta().register_directory(directory))

    def snapshot(self) -> Leadership:
        return self.reconciler.snapshot()

    # -- topics -----------------------------------------------------------------------------------

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False) -> list[TopicOutcome]:
        # The gateways check the limits against their own views; only this check, on the one
        # metadata, stops two of them from passing the cluster limit together.
        limits = PartitionLimits.from_config(self.config)
        async with self.reconciler.lock:
            outcomes: list[TopicOutcome] = await self.metadata.write(
                METADATA_TP, None,
                lambda _t: self._meta().create_topics(specs, validate_only, limits=limits, replication=self._replication()),
            )
            if not validate_only and any(o.error_code == ErrorCode.none for o in outcomes):
                await self.reconciler.step(reason="topics created")
        return outcomes

    async def delete_topics(self, names: list[str]) -> list[TopicOutcome]:
        async with self.reconciler.lock:
            if not self.config["delete.topic.enable"]:
                return [TopicOutcome(n, ErrorCode.topic_deletion_disabled, "delete.topic.enable is false") for n in names]
            registered = dict(self._meta().registrations)
            outcomes: list[TopicOutcome] = await self.metadata.write(
                METADATA_TP, None, lambda _t: self._meta().delete_topics(names)
            )
            deletes: dict[str, list[tuple[str, int]]] = {}
            hosts = self.reconciler.replicas.hosts
            for o in outcomes:
                if o.error_code != ErrorCode.none:
                    continue
                kind = kind_for_topic(o.name)
                for p in range(o.partitions):
                    leader = self.leaders.pop((o.name, p), None)
                    self.reconciler.failed_loads.pop((o.name, p), None)
                    if leader is not None:
                        deletes.setdefault(leader, []).append((o.name, p))
                    # A replicated partition's copies go too, wherever they are kept.
                    for replica in registered.get((o.name, p), _UNREGISTERED).replicas:
                        host = hosts.get((replica, kind))
                        if host is not None and host != leader:
                            deletes.setdefault(host, []).append((o.name, p))
            await self.reconciler.publish()
            await asyncio.gather(
                *(self.pool.delete(self.actors[n].handle, tps) for n, tps in deletes.items()), return_exceptions=True
            )
        return outcomes

    async def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicOutcome:
        limits = PartitionLimits.from_config(self.config)
        async with self.reconciler.lock:
            outcome: TopicOutcome = await self.metadata.write(
                METADATA_TP, None,
                lambda _t: self._meta().create_partitions(name, total, validate_only, limits, self._replication()),
            )
            if outcome.error_code == ErrorCode.none and not validate_only:
                await self.reconciler.step(reason="partitions created")
        return outcome

    # -- producer ids ---------------------------------------------------------------------------------

    async def alter_partition(
        self, tp: tuple[str, int], request: AlterPartition
    ) -> tuple[ErrorCode, PartitionRegistration | None]:
        """A replicated partition's leader changes its ISR (cluster/control/replica_keeper.py)."""
        return await self.reconciler.replicas.alter_partition(tp, request)

    async def alter_partition_reassignments(
        self, items: list[tuple[str, int, list[int] | None]], allow_replication_factor_change: bool = True
    ) -> list[tuple[int, str | None]]:
        """Operators move replicas (Kafka's AlterPartitionReassignments): for each (topic,
        partition, broker ids or None to cancel), its (error code, message). Broker ids are as
        Metadata names replicas: the gateway of the node whose data directory keeps it."""
        meta, keeper = self._meta(), self.reconciler.replicas
        gateway_of_node = self.reconciler.gateway_of_node()
        answers: dict[int, tuple[ErrorCode, str | None]] = {}
        targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
        at: dict[tuple[str, int], int] = {}
        for i, (topic, p, brokers) in enumerate(items):
            info = meta.topics.get(topic)
            if info is None or not 0 <= p < info.partitions:
                answers[i] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            if (topic, p) in at:
                answers[i] = (ErrorCode.invalid_replica_assignment, "the partition is named twice")
                continue
            reg = meta.registrations.get((topic, p))
            if reg is None:
                answers[i] = (ErrorCode.invalid_replica_assignment, ONE_COPY)
                continue
            target: tuple[int, ...] | None = None
            if brokers is not None:
                found = keeper.replica_ids_of(list(brokers), gateway_of_node)
                if isinstance(found, int):
                    answers[i] = (ErrorCode.invalid_replica_assignment,
                                  f"broker {found} keeps no replica: no node with a data directory of its own has it")
                    continue
                target = found
            targets[(topic, p)] = target
            at[(topic, p)] = i
        if targets:
            for tp, answer in (await keeper.reassign_partitions(targets, allow_replication_factor_change)).items():
                answers[at[tp]] = answer
        return [(answers[i][0].value, answers[i][1]) for i in range(len(items))]

    def list_partition_reassignments(
        self, wanted: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """The moves in progress (Kafka's ListPartitionReassignments), of every partition or of
        those asked for (a topic with no partitions named: none of it), in broker ids: (topic,
        partition, replicas, adding, removing)."""
        keeper = self.reconciler.replicas
        keeper._learn_brokers(self.reconciler.gateway_of_node())
        moving = keeper.reassignments()
        if wanted is not None:
            asked = {(topic, p) for topic, partitions in wanted for p in partitions}
            moving = {tp: reg for tp, reg in moving.items() if tp in asked}
        ids = keeper.broker_id
        return [
            (t, p, [ids(r) for r in reg.replicas], [ids(r) for r in reg.adding], [ids(r) for r in reg.removing])
            for (t, p), reg in sorted(moving.items())
        ]

    async def allocate_producer_ids(self, gateway: str) -> ProducerIdBlock:
        """A new block of producer ids for a gateway, durable before it is handed out."""
        block: ProducerIdBlock = await self.metadata.write(
            METADATA_TP, None, lambda _t: self._meta().allocate_producer_ids(gateway)
        )
        log.info("producer ids %d..%d to %s", block.first_producer_id, block.last_producer_id, gateway)
        return block

    # -- group configs -----------------------------------------------------------------------------

    async def alter_group_configs(
        self, changes: list[tuple[str, list[AlterOp]]], validate_only: bool = False
    ) -> list[tuple[int, str | None]]:
        """IncrementalAlterConfigs of GROUP resources: (error code, message) per group, in order.
        Durable, then pushed to every gateway and partition leader before the answer."""
        answers: list[tuple[int, str | None]] = []
        async with self.reconciler.lock:
            changed = False
            try:
                for group_id, ops in changes:
                    outcome = apply(self.config, self._meta().group_configs.get(group_id, {}), ops)
                    if isinstance(outcome, Refusal):
                        answers.append((outcome.error_code.value, outcome.message))
                        continue
                    answers.append((ErrorCode.none.value, None))
                    if not validate_only and outcome != self._meta().group_configs.get(group_id, {}):
                        await self.metadata.write(
                            METADATA_TP, None, lambda _t, g=group_id, c=outcome: self._meta().set_group_configs(g, c)
                        )
                        changed = True
            finally:
                # Groups already written apply even when a later write failed.
                if changed:
                    await self.reconciler.publish()
        return answers

    # -- operators ----------------------------------------------------------------------------------

    async def actors_info(self) -> list[dict[str, Any]]:
        entries = list(self.actors.values())

        async def one(entry: ActorEntry) -> dict[str, Any]:
            base = {"name": entry.name, "kind": entry.kind.value, "alive": entry.alive, "node_id": entry.node_id}
            if entry.replica_id is not None:
                base["replica_id"] = entry.replica_id
            if entry.gateway is not None:
                base["address"] = f"{entry.gateway.host}:{entry.gateway.port}"
            if not entry.alive:
                return {**base, "partitions": []}
            try:
                info = await self.pool.info(entry.handle, 5)
                return {**base, **info, "alive": True}
            except Exception as exc:
                return {**base, "error": str(exc), "partitions": []}

        return list(await asyncio.gather(*(one(e) for e in entries)))

    async def check_kill(self, name: str) -> str:
        """Raise the error kill(name) would raise, kill nothing."""
        entry = self.actors.get(name)
        if entry is None:
            raise KeyError(f"no actor named {name!r}; `raygroups actors` lists them")
        if not entry.alive:
            raise KeyError(f"{name} is already dead")
        return name

    async def kill(self, name: str) -> str:
        await self.check_kill(name)
        self._event("kill", f"{name} killed by operator")
        self.pool.kill(self.actors[name].handle)
        return name

    async def pause(self, name: str, seconds: float) -> dict[str, Any]:
        """Stop an actor's process (SIGSTOP) for `seconds`, then let it go on (SIGCONT): a GC pause
        or a frozen VM, for experiments. Signals come from a task on the actor's own node, so it
        works wherever the actor runs. Returns once the actor runs again."""
        entry = self.actors.get(name)
        if entry is None:
            raise KeyError(f"no actor named {name!r}; `raygroups actors` lists them")
        if not entry.alive or entry.pid is None or entry.node_id is None:
            raise KeyError(f"{name} is not running")
        if not 0 < seconds <= 600:
            raise KeyError(f"a pause lasts more than 0 and at most 600 seconds, not {seconds}")
        self._event("pause", f"{name} paused for {seconds:g} s")
        stopped_at, resumed_at = await self.pool.pause(entry.node_id, entry.pid, seconds)
        self._event("resume", f"{name} runs again")
        return {"actor": name, "pid": entry.pid, "seconds": seconds, "stopped_at": stopped_at, "resumed_at": resumed_at}

    async def move(self, topic: str, partition: int, actor: str) -> int:
        tp = (topic, partition)
        # Checked under the reconciler's lock: a pass may adopt the partition into replication
        # (ReplicaKeeper._adopt) while the move waits for it, and a replicated partition loaded
        # by an operator's move would serve its one old copy beside its replicas.
        async with self.reconciler.lock:
            entry = self.actors.get(actor)
            if tp not in self.leaders:
                raise KeyError(f"no partition {topic}-{partition}")
            if tp in self._meta().registrations:
                raise KeyError(f"{topic}-{partition} is replicated: it is led by the host of its leader replica, "
                               "elected by the controller, and moves only by reassignment")
            if entry is None or not entry.alive or not entry.ready:
                raise KeyError(f"no live actor named {actor!r}")
            if entry.kind is not kind_for_topic(topic):
                raise KeyError(f"{actor} is a {entry.kind.value}; {topic} partitions need a "
                               f"{kind_for_topic(topic).value}")
            await self.reconciler.move({tp: actor}, reason=f"operator move to {actor}", cause=Cause.OPERATOR_MOVE)
        return self._meta().leader_epochs[tp]

    def status(self) -> dict[str, Any]:
        meta = self._meta()
        leadership = self.snapshot()
        return {
            "version": self.version,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id), "partitions": t.partitions, "internal": t.internal}
                for t in sorted(meta.topics.values(), key=lambda t: t.name)
            ],
            "leaders": [
                {"topic": tp[0], "partition": tp[1], "actor": name, "epoch": leadership.leaders[tp][1]}
                for tp, name in sorted(self.leaders.items())
            ],
            "replicas": self._replicas(),
            "events": self.events[-50:],
        }

    def _replicas(self) -> list[dict[str, Any]]:
        """Each data directory the controller knows, as the replica it is, and the nodes whose live
        actors keep logs in it now (one per node; several with a shared data directory; none for
        a node that left or a directory that was wiped)."""
        nodes: dict[int, set[str]] = {}
        for e in self.actors.values():
            if e.alive and e.replica_id is not None and e.node_id is not None:
                nodes.setdefault(e.replica_id, set()).add(e.node_id)
        return [
            {"replica_id": rid, "directory_id": str(d), "nodes": sorted(nodes.get(rid, ()))}
            for d, rid in sorted(self._meta().replica_ids.items(), key=lambda item: item[1])
        ]

    def events_since(self, index: int) -> tuple[int, list[dict[str, Any]]]:
        return len(self.events), self.events[index:]

    def leadership_changes(self, index: int) -> dict[str, Any]:
        """Every leadership change from `index` on (cluster/control/leadership_changes.py), for the
        experiments' run directories."""
        return self.reconciler.changes.since(index)

    async def metrics(self, timeout: float) -> list[dict[str, Any]]:
        """Its own and every live actor's metrics snapshot (issue 13), asked at once; an actor that
        does not answer within `timeout` is reported with its error, not waited for."""
        from cluster.metrics.gather import gather_snapshots

        own_node = getattr(self.pool, "own_node", lambda: None)()
        partitions = list(self._meta().leader_epochs)
        led = sum(1 for tp in partitions if tp in self.leaders and self.actors[self.leaders[tp]].alive)
        gauges = [("partitions", {}, float(len(partitions))), ("offline_partitions", {}, float(len(partitions) - led))]
        return await gather_snapshots(self.actors.values(), self.pool, timeout, own_node, gauges)

    def _event(self, kind: str, message: str) -> None:
        log.info("%s: %s", kind, message)
        self.events.append({"time": time.time(), "kind": kind, "message": message})


@ray.remote
class ControllerActor:
    def __init__(self, config: Config, data_dir: str, host: str, port: int, namespace: str) -> None:
        setup_process()
        self.controller = Controller(config, Path(data_dir), host, port, namespace)

    async def start(self) -> list[str]:
        return await self.controller.start()

    async def shutdown(self) -> None:
        await self.controller.shutdown()

    async def leadership(self) -> Leadership:
        return self.controller.snapshot()

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False) -> list[TopicOutcome]:
        return await self.controller.create_topics(specs, validate_only)

    async def delete_topics(self, names: list[str]) -> list[TopicOutcome]:
        return await self.controller.delete_topics(names)

    async def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicOutcome:
        return await self.controller.create_partitions(name, total, validate_only)

    async def allocate_producer_ids(self, gateway: str) -> ProducerIdBlock:
        return await self.controller.allocate_producer_ids(gateway)

    async def alter_partition_reassignments(
        self, items: list[tuple[str, int, list[int] | None]], allow_replication_factor_change: bool = True
    ) -> list[tuple[int, str | None]]:
        return await self.controller.alter_partition_reassignments(items, allow_replication_factor_change)

    async def list_partition_reassignments(
        self, wanted: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        return self.controller.list_partition_reassignments(wanted)

    async def alter_partition(
        self, tp: tuple[str, int], request: AlterPartition
    ) -> tuple[ErrorCode, PartitionRegistration | None]:
        return await self.controller.alter_partition(tp, request)

    async def actors_info(self) -> list[dict[str, Any]]:
        return await self.controller.actors_info()

    async def alter_group_configs(self, changes: list, validate_only: bool = False) -> list[tuple[int, str | None]]:
        return await self.controller.alter_group_configs(changes, validate_only)

    async def check_kill(self, name: str) -> str:
        return await self.controller.check_kill(name)

    async def kill(self, name: str) -> str:
        return await self.controller.kill(name)

    async def move(self, topic: str, partition: int, actor: str) -> int:
        return await self.controller.move(topic, partition, actor)

    async def pause(self, name: str, seconds: float) -> dict[str, Any]:
        return await self.controller.pause(name, seconds)

    async def status(self) -> dict[str, Any]:
        return self.controller.status()

    async def events_since(self, index: int) -> tuple[int, list[dict[str, Any]]]:
        return self.controller.events_since(index)

    async def leadership_changes(self, index: int) -> dict[str, Any]:
        return self.controller.leadership_changes(index)

    async def metrics(self, timeout: float) -> list[dict[str, Any]]:
        return await self.controller.metrics(timeout)
