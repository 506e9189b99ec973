"""The controller: starts the actors, owns the leadership map, and fails partitions over.

It is a named Ray actor holding:
- the cluster metadata (topics, leader epochs, producer ids handed out) on its own log, through
  the coordinator runtime;
- the leadership map: which actor leads each partition of `__consumer_offsets`,
  `__share_group_state` and every user topic, at which leader epoch;
- the gateways (the brokers clients see), which it keeps informed of every map change.

It notices a dead actor through Ray (a call on it that never returns until the actor dies), moves
the actor's partitions to live actors of the same kind with bumped epochs, and starts a
replacement. Changes of leadership are serialised by one lock so that epochs and the map move
together. Which actor leads what is not durable: after a restart every partition is placed anew.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError
from kio.schema.errors import ErrorCode

from cluster.actors.common import ACTOR_OPTIONS, ActorKind, kind_for_topic, setup_logging
from cluster.actors.coordinator_host import coordinator_log_config
from cluster.config import Config
from cluster.leadership import GatewayAddress, Leadership
from cluster.metadata import (
    CODEC,
    CONSUMER_OFFSETS,
    METADATA_TOPIC,
    SHARE_GROUP_STATE,
    ClusterMetadata,
    ProducerIdBlock,
    TopicOutcome,
    TopicSpec,
)
from cluster.runtime import CoordinatorRuntime, RuntimeConfig

log = logging.getLogger(__name__)

METADATA_TP = (METADATA_TOPIC, 0)
# Actors that route calls to other actors and so follow the leadership map.
_LEADERSHIP_FOLLOWERS = frozenset({ActorKind.GATEWAY, ActorKind.PARTITION_LEADER, ActorKind.GROUP_COORDINATOR})
_KIND_COUNT_SETTING = {
    ActorKind.GROUP_COORDINATOR: "raygroups.coordinators",
    ActorKind.SHARE_COORDINATOR: "raygroups.share.coordinators",
    ActorKind.PARTITION_LEADER: "raygroups.partition.leaders",
}


@dataclass(slots=True)
class ActorEntry:
    name: str
    kind: ActorKind
    handle: Any
    alive: bool = True
    ready: bool = False
    started_at: float = field(default_factory=time.time)
    died_at: float | None = None
    node_id: str | None = None
    pid: int | None = None
    # gateways only
    gateway: GatewayAddress | None = None


class Controller:
    def __init__(self, config: Config, data_dir: Path, host: str, port: int, namespace: str) -> None:
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
        self.actors: dict[str, ActorEntry] = {}
        self.leaders: dict[tuple[str, int], str] = {}
        self.version = 0
        self.events: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()
        self._watchers: dict[str, asyncio.Task] = {}
        self._next_index: Counter[ActorKind | str] = Counter()
        self._stopping = False

    # -- start and stop ---------------------------------------------------------------------------

    async def start(self) -> list[str]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cut = await self.metadata.load(METADATA_TP, 0)
        if cut:
            self._event("log-recovered", f"{METADATA_TOPIC}-0: {cut}")
        await self._ensure_internal_topics()
        spawned = [
            self._spawn(kind)
            for kind, setting in _KIND_COUNT_SETTING.items()
            for _ in range(self.config[setting])
        ]
        await asyncio.gather(*(self._await_ready(entry) for entry in spawned))
        async with self._lock:
            placement = self._place(list(self._meta().leader_epochs))
            await self._move(placement, reason="startup")
        gateways = [self._spawn_gateway(node_id) for node_id in range(self.config["raygroups.gateways"])]
        await asyncio.gather(*(self._start_gateway(entry) for entry in gateways))
        self._event("ready", f"{len(self.actors)} actors, {len(self.leaders)} partitions led")
        return [f"{e.gateway.host}:{e.gateway.port}" for e in gateways if e.gateway]

    async def shutdown(self) -> None:
        self._stopping = True
        for task in self._watchers.values():
            task.cancel()
        live = [e for e in self.actors.values() if e.alive]
        results = await asyncio.gather(
            *(_with_timeout(e.handle.shutdown.remote(), 30) for e in live), return_exceptions=True
        )
        for entry, result in zip(live, results):
            if isinstance(result, BaseException):
                log.warning("%s did not shut down cleanly: %s", entry.name, result)
            ray.kill(entry.handle, no_restart=True)
        await self.metadata.close()

    async def _ensure_internal_topics(self) -> None:
        wanted = {
            CONSUMER_OFFSETS: self.config["offsets.topic.num.partitions"],
            SHARE_GROUP_STATE: self.config["share.coordinator.state.topic.num.partitions"],
        }
        meta = self._meta()
        for name, partitions in wanted.items():
            existing = meta.topics.get(name)
            if existing is not None and existing.partitions != partitions:
                raise RuntimeError(
                    f"{name} has {existing.partitions} partitions in this data directory; "
                    f"it cannot change to {partitions} (a group would move to another partition)"
                )
        missing = [TopicSpec(name, n) for name, n in wanted.items() if name not in meta.topics]
        if missing:
            await self.metadata.write(METADATA_TP, None, lambda _t: self._meta().create_topics(missing))

    def _meta(self) -> ClusterMetadata:
        return self.metadata.shard(METADATA_TP)

    # -- actors -----------------------------------------------------------------------------------

    def _spawn(self, kind: ActorKind) -> ActorEntry:
        from cluster.actors.group_coordinator import GroupCoordinatorActor
        from cluster.actors.partition_leader import PartitionLeaderActor
        from cluster.actors.share_coordinator import ShareCoordinatorActor

        cls = {
            ActorKind.GROUP_COORDINATOR: GroupCoordinatorActor,
            ActorKind.SHARE_COORDINATOR: ShareCoordinatorActor,
            ActorKind.PARTITION_LEADER: PartitionLeaderActor,
        }[kind]
        index = self._next_index[kind]
        self._next_index[kind] += 1
        name = f"{kind.value}-{index}"
        args: tuple[Any, ...] = (name, self.config, str(self.data_dir))
        if kind in _LEADERSHIP_FOLLOWERS:
            args += (ray.get_runtime_context().current_actor,)
        handle = cls.options(
            name=name, namespace=self.namespace, scheduling_strategy="SPREAD", **ACTOR_OPTIONS
        ).remote(*args)
        entry = ActorEntry(name, kind, handle)
        self.actors[name] = entry
        return entry

    async def _await_ready(self, entry: ActorEntry) -> None:
        info = await entry.handle.info.remote()
        entry.node_id = info["node_id"]
        entry.pid = info.get("pid")
        entry.ready = True
        self._watchers[entry.name] = asyncio.get_running_loop().create_task(self._watch(entry))

    def _spawn_gateway(self, node_id: int, port: int | None = None) -> ActorEntry:
        """A gateway; a restarted one takes the port of the one it replaces (clients know it)."""
        from cluster.actors.gateway import GatewayActor

        if port is None:
            port = self.base_port + node_id if self.base_port else 0
        name = f"gateway-{node_id}"
        # Each incarnation under its own Ray name: after a death Ray did not order (SIGKILL, OOM)
        # it keeps the old name registered for a while, and re-using it fails the restart.
        incarnation = self._next_index[name]
        self._next_index[name] += 1
        ray_name = name if incarnation == 0 else f"{name}.{incarnation}"
        handle = GatewayActor.options(name=ray_name, namespace=self.namespace, **ACTOR_OPTIONS).remote(
            node_id, self.host, port, self.config, ray.get_runtime_context().current_actor
        )
        entry = ActorEntry(name, ActorKind.GATEWAY, handle, gateway=GatewayAddress(node_id, self.host, port))
        self.actors[name] = entry
        return entry

    async def _start_gateway(self, entry: ActorEntry) -> None:
        host, port = await entry.handle.start.remote(self.snapshot())
        entry.gateway = GatewayAddress(entry.gateway.node_id, host, port)
        await self._await_ready(entry)
        await self._publish()

    async def _watch(self, entry: ActorEntry) -> None:
        try:
            await entry.handle.wait_forever.remote()
        except asyncio.CancelledError:
            return
        except RayActorError:
            pass
        except Exception:  # any other failure of the call also means the actor is gone
            log.exception("watch of %s failed", entry.name)
        if not self._stopping:
            await self._on_death(entry)

    async def _on_death(self, entry: ActorEntry) -> None:
        entry.alive = False
        entry.died_at = time.time()
        self._watchers.pop(entry.name, None)
        self._event("actor-died", f"{entry.name} died")
        if entry.kind is ActorKind.GATEWAY:
            # A broker restart as clients see it: same node id, same port.
            del self.actors[entry.name]
            replacement = self._spawn_gateway(entry.gateway.node_id, entry.gateway.port)
            await self._start_gateway(replacement)
            self._event("gateway-restarted", f"{replacement.name} listening again on {replacement.gateway.host}:{replacement.gateway.port}")
            return
        started = time.time()
        replacement = self._spawn(entry.kind) if self.config["raygroups.actor.replace"] else None
        async with self._lock:
            orphans = [tp for tp, name in self.leaders.items() if name == entry.name]
            live = self._live(entry.kind)
            if not live and replacement is not None:
                await self._await_ready(replacement)
                live = [replacement]
            if not live:
                self._event("unavailable", f"no live {entry.kind.value} actor for {len(orphans)} partitions")
                for tp in orphans:
                    del self.leaders[tp]
                await self._publish()
                return
            placement = self._place(orphans, among=live)
            await self._move(placement, reason=f"failover from {entry.name}")
        self._event(
            "failover",
            f"{len(orphans)} partitions of {entry.name} moved in {(time.time() - started) * 1000:.0f} ms",
        )
        if replacement is not None and not replacement.ready:
            await self._await_ready(replacement)

    def _live(self, kind: ActorKind) -> list[ActorEntry]:
        return [e for e in self.actors.values() if e.kind is kind and e.alive and e.ready]

    # -- placement --------------------------------------------------------------------------------

    def _place(
        self, partitions: list[tuple[str, int]], among: list[ActorEntry] | None = None
    ) -> dict[tuple[str, int], str]:
        """Spread partitions over live actors of their kind, least loaded first."""
        placement: dict[tuple[str, int], str] = {}
        load = Counter(self.leaders.values())
        for tp in sorted(partitions):
            kind = kind_for_topic(tp[0])
            candidates = [e for e in (among or self._live(kind)) if e.kind is kind]
            if not candidates:
                continue
            chosen = min(candidates, key=lambda e: (load[e.name], e.name))
            placement[tp] = chosen.name
            load[chosen.name] += 1
        return placement

    async def _move(self, placement: dict[tuple[str, int], str], reason: str) -> None:
        """Give each partition its new leader at a bumped epoch (caller holds the lock)."""
        if not placement:
            return
        # Release first: two live actors must never append to one log.
        releases: dict[str, list[tuple[str, int]]] = {}
        for tp, new in placement.items():
            old = self.leaders.get(tp)
            if old is not None and old != new and self.actors.get(old) and self.actors[old].alive:
                releases.setdefault(old, []).append(tp)
        epochs = await self.metadata.write(
            METADATA_TP, None, lambda _t: self._meta().bump_epochs(list(placement))
        )
        for tp, name in placement.items():
            self.leaders[tp] = name
        await self._publish()
        await asyncio.gather(
            *(self.actors[name].handle.unload.remote(tps) for name, tps in releases.items()),
            return_exceptions=True,
        )
        loads: dict[str, list[tuple[str, int, int]]] = {}
        for tp, name in placement.items():
            loads.setdefault(name, []).append((tp[0], tp[1], epochs[tp]))
        results = await asyncio.gather(
            *(self.actors[name].handle.load.remote(items) for name, items in loads.items()),
            return_exceptions=True,
        )
        for name, result in zip(loads, results):
            if isinstance(result, BaseException):
                log.error("%s failed to load its partitions: %s", name, result)
                self._event("load-failed", f"{name} could not load its partitions: {result}")
            else:
                for line in result or ():
                    self._event("log-recovered", line)
        self._event("leadership", f"{len(placement)} partitions placed ({reason})")

    # -- the map as gateways see it ------------------------------------------------------------------

    def snapshot(self) -> Leadership:
        meta = self._meta()
        return Leadership(
            version=self.version,
            cluster_id=self.config["raygroups.cluster.id"],
            gateways=sorted(
                (e.gateway for e in self.actors.values() if e.kind is ActorKind.GATEWAY and e.gateway and e.ready),
                key=lambda g: g.node_id,
            ),
            topics=dict(meta.topics),
            leaders={tp: (name, meta.leader_epochs.get(tp, 0)) for tp, name in self.leaders.items()},
            handles={e.name: e.handle for e in self.actors.values() if e.alive and e.kind is not ActorKind.GATEWAY},
        )

    async def _publish(self) -> None:
        """Push the map to everyone who routes: gateways, and the actors that call share coordinators."""
        self.version += 1
        snapshot = self.snapshot()
        followers = [e for e in self.actors.values() if e.kind in _LEADERSHIP_FOLLOWERS and e.alive and e.ready]
        await asyncio.gather(
            *(_with_timeout(e.handle.update_leadership.remote(snapshot), 5) for e in followers),
            return_exceptions=True,
        )

    # -- topics -----------------------------------------------------------------------------------

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False) -> list[TopicOutcome]:
        async with self._lock:
            outcomes: list[TopicOutcome] = await self.metadata.write(
                METADATA_TP, None, lambda _t: self._meta().create_topics(specs, validate_only)
            )
            if not validate_only:
                created = [(o.name, p) for o in outcomes if o.error_code == ErrorCode.none for p in range(o.partitions)]
                await self._move(self._place(created), reason="topics created")
        return outcomes

    async def delete_topics(self, names: list[str]) -> list[TopicOutcome]:
        async with self._lock:
            if not self.config["delete.topic.enable"]:
                return [TopicOutcome(n, ErrorCode.topic_deletion_disabled, "delete.topic.enable is false") for n in names]
            outcomes: list[TopicOutcome] = await self.metadata.write(
                METADATA_TP, None, lambda _t: self._meta().delete_topics(names)
            )
            deletes: dict[str, list[tuple[str, int]]] = {}
            for o in outcomes:
                if o.error_code != ErrorCode.none:
                    continue
                for p in range(o.partitions):
                    leader = self.leaders.pop((o.name, p), None)
                    if leader is not None:
                        deletes.setdefault(leader, []).append((o.name, p))
            await self._publish()
            await asyncio.gather(
                *(self.actors[n].handle.delete.remote(tps) for n, tps in deletes.items()), return_exceptions=True
            )
        return outcomes

    async def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicOutcome:
        async with self._lock:
            before = self._meta().topics.get(name)
            outcome: TopicOutcome = await self.metadata.write(
                METADATA_TP, None, lambda _t: self._meta().create_partitions(name, total, validate_only)
            )
            if outcome.error_code == ErrorCode.none and not validate_only and before is not None:
                added = [(name, p) for p in range(before.partitions, total)]
                await self._move(self._place(added), reason="partitions created")
        return outcome

    # -- producer ids ---------------------------------------------------------------------------------

    async def allocate_producer_ids(self, gateway: str) -> ProducerIdBlock:
        """A new block of producer ids for a gateway, durable before it is handed out."""
        block: ProducerIdBlock = await self.metadata.write(
            METADATA_TP, None, lambda _t: self._meta().allocate_producer_ids(gateway)
        )
        log.info("producer ids %d..%d to %s", block.first_producer_id, block.last_producer_id, gateway)
        return block

    # -- operators ----------------------------------------------------------------------------------

    async def actors_info(self) -> list[dict[str, Any]]:
        entries = list(self.actors.values())

        async def one(entry: ActorEntry) -> dict[str, Any]:
            base = {"name": entry.name, "kind": entry.kind.value, "alive": entry.alive, "node_id": entry.node_id}
            if entry.gateway is not None:
                base["address"] = f"{entry.gateway.host}:{entry.gateway.port}"
            if not entry.alive:
                return {**base, "partitions": []}
            try:
                info = await _with_timeout(entry.handle.info.remote(), 5)
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
        ray.kill(self.actors[name].handle, no_restart=True)
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
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._event("pause", f"{name} paused for {seconds:g} s")
        strategy = NodeAffinitySchedulingStrategy(node_id=entry.node_id, soft=False)
        stopped_at, resumed_at = await _pause_process.options(scheduling_strategy=strategy).remote(entry.pid, seconds)
        self._event("resume", f"{name} runs again")
        return {"actor": name, "pid": entry.pid, "seconds": seconds, "stopped_at": stopped_at, "resumed_at": resumed_at}

    async def move(self, topic: str, partition: int, actor: str) -> int:
        entry = self.actors.get(actor)
        tp = (topic, partition)
        if tp not in self.leaders:
            raise KeyError(f"no partition {topic}-{partition}")
        if entry is None or not entry.alive or not entry.ready:
            raise KeyError(f"no live actor named {actor!r}")
        if entry.kind is not kind_for_topic(topic):
            raise KeyError(f"{actor} is a {entry.kind.value}; {topic} partitions need a {kind_for_topic(topic).value}")
        async with self._lock:
            await self._move({tp: actor}, reason=f"operator move to {actor}")
        return self._meta().leader_epochs[tp]

    def status(self) -> dict[str, Any]:
        meta = self._meta()
        return {
            "version": self.version,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id), "partitions": t.partitions, "internal": t.internal}
                for t in sorted(meta.topics.values(), key=lambda t: t.name)
            ],
            "leaders": [
                {"topic": tp[0], "partition": tp[1], "actor": name, "epoch": meta.leader_epochs.get(tp, 0)}
                for tp, name in sorted(self.leaders.items())
            ],
            "events": self.events[-50:],
        }

    def events_since(self, index: int) -> tuple[int, list[dict[str, Any]]]:
        return len(self.events), self.events[index:]

    def _event(self, kind: str, message: str) -> None:
        log.info("%s: %s", kind, message)
        self.events.append({"time": time.time(), "kind": kind, "message": message})


@ray.remote(num_cpus=0, max_retries=0)
def _pause_process(pid: int, seconds: float) -> tuple[float, float]:
    import os
    import signal

    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.time()
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return stopped_at, time.time()


async def _with_timeout(awaitable: Any, seconds: float) -> Any:
    return await asyncio.wait_for(asyncio.ensure_future(awaitable), seconds)


@ray.remote
class ControllerActor:
    def __init__(self, config: Config, data_dir: str, host: str, port: int, namespace: str) -> None:
        setup_logging()
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

    async def actors_info(self) -> list[dict[str, Any]]:
        return await self.controller.actors_info()

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
