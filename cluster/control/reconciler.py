"""The reconcile loop: drives the actual leadership map to the desired one, level-triggered.

Ray Serve's controller is the model. Rather than reacting once to each event (a death, a failed
load) and forgetting it when the reaction fails, every pass compares what is (the actors and their
states, who was told to lead what, which loads failed) with what should be (`placement`), and does
the difference. A failure leaves a difference behind, which a later pass tries again after a backoff:
a gateway that could not restart, a partition whose load failed (a full disk, a corrupt log) or
did not answer within `raygroups.load.timeout.ms` (a stuck disk read, an actor that never replies:
the pass holds the lock while it waits, so without a bound one hung load would stop every later
pass). Events only wake the loop early.

With a pool that knows Ray's nodes (`NodeAwarePool`), the node set is one more thing that is: it is
polled every `raygroups.node.poll.ms`; a node that joins gets an actor of each kind and then a fair share
of partitions, a bounded number a pass (`placement.rebalance`); the actors of a node that left are
taken as dead at once rather than when Ray notices each of them. An actor that came up within the
balance cooldown (a replacement too) is fresh: it takes its fair share at once, on one node as well.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cluster.control.actor_pool import LEADERSHIP_FOLLOWERS, ActorPool, NodeAwarePool, NodeMembership
from cluster.control.actor_state import ActorEntry, ActorState
from cluster.calls.kinds import ActorKind, kind_for_topic
from cluster.config import Config
from cluster.control.gateway_slots import GatewayKeeper
from cluster.control.replica_keeper import ReplicaKeeper
from cluster.leadership import Leadership
from cluster.control.leadership_changes import Cause, LeadershipChange, LeadershipChanges
from cluster.metrics.registry import REGISTRY
from cluster.metadata import ClusterMetadata
from cluster.replication.registration import PartitionRegistration
from cluster.control.placement import LiveActor, RebalancePolicy, actors_by_node, desired_leadership, missing_actors
from cluster.control.placement import rebalance, rebalance_due, retry_delay

log = logging.getLogger(__name__)

TP = tuple[str, int]
KIND_COUNT_SETTING = {
    ActorKind.GROUP_COORDINATOR: "raygroups.coordinators",
    ActorKind.SHARE_COORDINATOR: "raygroups.share.coordinators",
    ActorKind.PARTITION_LEADER: "raygroups.partition.leaders",
}


# The cause of the changes a pass makes, by the reason it was run for (the rest is `placement`).
REASON_CAUSES = {"startup": Cause.STARTUP, "topics created": Cause.CREATED, "partitions created": Cause.CREATED}


def _epoch(meta: ClusterMetadata, tp: TP) -> int:
    """A partition's leader epoch: its registration's if it is replicated."""
    registration = meta.registrations.get(tp)
    return registration.leader_epoch if registration is not None else meta.leader_epochs.get(tp, 0)


async def _no_registrations(changes: dict[TP, PartitionRegistration]) -> None:
    raise RuntimeError("this controller keeps no replicated partitions")


class LoadTimeout(Exception):
    """An actor did not answer a load in time: a failed load like any other, retried with backoff."""


@dataclass(slots=True)
class FailedLoad:
    failures: int
    retry_at: float
    error: str


class Reconciler:
    def __init__(
        self,
        pool: ActorPool,
        config: Config,
        meta: Callable[[], ClusterMetadata],
        bump_epochs: Callable[[list[TP]], Awaitable[dict[TP, int]]],
        event: Callable[[str, str], None],
        clock: Callable[[], float] = time.monotonic,
        register_directory: Callable[[uuid.UUID], Awaitable[int]] | None = None,
        change_registrations: Callable[[dict[TP, PartitionRegistration]], Awaitable[None]] | None = None,
        adopt_registrations: Callable[[dict[TP, PartitionRegistration]], Awaitable[None]] | None = None,
    ) -> None:
        self.pool = pool
        self.config = config
        self.meta = meta
        self.bump_epochs = bump_epochs
        self.register_directory = register_directory
        self.event = event
        self.clock = clock
        self.actors: dict[str, ActorEntry] = {}
        self.leaders: dict[TP, str] = {}  # who was told to lead each partition
        self.failed_loads: dict[TP, FailedLoad] = {}
        self.version = 0
        self.lock = asyncio.Lock()
        self.stopping = False
        self._wake = asyncio.Event()
        self._watchers: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self._next_index: Counter[ActorKind] = Counter()
        # Failed starts in a row and when the next may be tried, per kind and node (None: wherever
        # Ray puts it): a node that cannot take actors (listed, yet going) delays only its own.
        self._spawn_failures: Counter[tuple[ActorKind, str | None]] = Counter()
        self._spawn_at: dict[tuple[ActorKind, str | None], float] = {}
        self._failed_passes = 0
        self._pass_at = 0.0
        self.membership = (
            NodeMembership(pool, config["raygroups.node.poll.ms"] / 1000) if isinstance(pool, NodeAwarePool) else None
        )
        self.moved_at: dict[TP, float] = {}  # when each partition last changed leader (clock)
        self._ready_at: dict[str, float] = {}  # when each actor came up (clock): fresh actors take a share at once
        self.rebalance_policy = RebalancePolicy(
            max_moves=config["raygroups.balance.max.moves"], cooldown=config["raygroups.balance.cooldown.ms"] / 1000
        )
        self._rebalance_at: float | None = None
        self.gateways = GatewayKeeper(self)
        self.changes = LeadershipChanges()
        self._lost_with_node: set[str] = set()  # actors taken as dead because their node left
        self._registering: set[uuid.UUID] = set()  # data directories whose registration was asked
        self._serial = 0
        self.replicas = ReplicaKeeper(
            self, meta, change_registrations or _no_registrations,
            session_s=config["broker.session.timeout.ms"] / 1000, heartbeat_s=config["broker.heartbeat.interval.ms"] / 1000,
            preferred_every_s=config["leader.imbalance.check.interval.seconds"]
            if config["auto.leader.rebalance.enable"] else None,
            replace_after_s=config["raygroups.replica.replace.after.ms"] / 1000
            if config["raygroups.replica.replace.after.ms"] >= 0 else None,
            balance_moves=config["raygroups.replica.balance.max.moves"],
            adopt=adopt_registrations,
            internal_factors={
                ActorKind.GROUP_COORDINATOR: config["offsets.topic.replication.factor"],
                ActorKind.SHARE_COORDINATOR: config["share.coordinator.state.topic.replication.factor"],
            },
            min_insync=config["min.insync.replicas"],
        )
        self._sessions: asyncio.Task | None = None

    # -- the loop ---------------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        self._sessions = asyncio.ensure_future(self.replicas.run_sessions(lambda: self.stopping, self.wake))
        while not self.stopping:
            due = self._next_due()
            try:
                await asyncio.wait_for(self._wake.wait(), None if due is None else max(0.0, due - self.clock()))
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if self.stopping:
                return
            try:
                async with self.lock:
                    await self.step()
                self._failed_passes = 0
            except Exception:
                self._failed_passes += 1
                self._pass_at = self.clock() + retry_delay(self._failed_passes)
                log.exception("reconcile pass failed; the next one tries again")

    def _next_due(self) -> float | None:
        times = [f.retry_at for f in self.failed_loads.values()]
        times += self.gateways.restart_times()
        times += [self._spawn_at[(k, n)] for k, per_node in self._missing().items() for n in per_node
                  if (k, n) in self._spawn_at]
        if self.membership is not None:
            times.append(self.membership.next_poll)
        if self._rebalance_at is not None:
            times.append(self._rebalance_at)
        keeper = self.replicas.next_due()
        if keeper is not None:
            times.append(keeper)
        due = min(times) if times else None
        if self._failed_passes:  # a pass that raised is not retried before its backoff
            due = max(due or 0.0, self._pass_at)
        return due

    async def step(self, reason: str = "placement") -> None:
        """One pass (the caller holds the lock): restart, replace, place, retry."""
        now = self.clock()
        await self._poll_nodes(now)
        if not self.stopping:
            await self.gateways.step(now)
            for kind, per_node in self._missing().items():
                for node, count in per_node.items():
                    if self._spawn_at.get((kind, node), 0.0) <= now:
                        for _ in range(count):
                            self._track(self.bring_up(self.spawn(kind, node)))
            if reason == "startup":
                await self.idle()  # so that the first placement spreads over every node's actors
        await self._place(reason)
        await self.replicas.step()
        await self._retry_loads(now)

    def _missing(self) -> dict[ActorKind, Counter[str | None]]:
        """How many actors of each kind to start, on which node (None: wherever Ray puts it)."""
        if not self.config["raygroups.actor.replace"]:
            return {}
        wanted = {kind: self.config[setting] for kind, setting in KIND_COUNT_SETTING.items()}
        alive = [(e.kind, e.node_id) for e in self.actors.values() if e.alive]
        if not self.nodes:
            counts = missing_actors(wanted, Counter(kind for kind, _ in alive))
            return {kind: Counter({None: n}) for kind, n in counts.items()}
        return actors_by_node(wanted, alive, self.nodes)

    @property
    def nodes(self) -> list[str] | None:
        return self.membership.nodes if self.membership is not None else None

    async def _poll_nodes(self, now: float) -> None:
        """Learn the node set; a node gone takes its actors with it, at once."""
        change = None if self.membership is None or self.stopping else await self.membership.poll(now)
        if change is None:
            return
        for message in change.messages():
            self.event("nodes", message)
        for entry in list(self.actors.values()):
            if entry.ready and entry.node_id is not None and entry.node_id not in change.nodes:
                try:
                    self.pool.kill(entry.handle)
                except Exception:
                    pass  # its node is gone: nothing left to kill
                self._lost_with_node.add(entry.name)
                self.died(entry, entry.handle)

    async def _place(self, reason: str) -> None:
        now, cooldown = self.clock(), self.rebalance_policy.cooldown
        home = self._home()
        live = [
            LiveActor(e.name, e.kind, e.node_id, fresh=now - self._ready_at.get(e.name, float("-inf")) < cooldown)
            for e in self.actors.values()
            if e.ready and e.kind is not ActorKind.GATEWAY and (home is None or e.replica_id == home)
        ]
        # Replicated partitions are led where their registrations say (self.replicas), not here.
        registered = self.meta().registrations
        single = [tp for tp in self.meta().leader_epochs if tp not in registered]
        desired = desired_leadership(single, self._single_leaders(), live)
        starting = {e.kind for e in self.actors.values() if e.state is ActorState.STARTING}
        # Partitions whose leader is gone and no actor of their kind lives or is on its way.
        lost = [tp for tp in self._single_leaders() if tp not in desired and kind_for_topic(tp[0]) not in starting]
        if lost:
            for kind, count in Counter(kind_for_topic(tp[0]) for tp in lost).items():
                self.event("unavailable", f"no live {kind.value} actor for {count} partitions")
            now = time.time()
            epochs = self.meta().leader_epochs
            for tp in lost:
                self.changes.record(LeadershipChange(
                    tp[0], tp[1], epochs.get(tp, 0), None, self.leaders[tp], Cause.UNAVAILABLE, now, now, None))
                del self.leaders[tp]
                self.failed_loads.pop(tp, None)
            await self.publish()
        by_origin: dict[str | None, dict[TP, str]] = {}
        for tp, name in desired.items():
            if self.leaders.get(tp) != name:
                by_origin.setdefault(self.leaders.get(tp), {})[tp] = name
        for origin, placement in sorted(by_origin.items(), key=lambda item: item[0] or ""):
            dead = self.actors.get(origin) if origin is not None else None
            if dead is None or dead.alive:
                await self.move(placement, reason=reason, cause=REASON_CAUSES.get(reason, Cause.PLACEMENT))
                continue
            cause = Cause.NODE_LOSS if origin in self._lost_with_node else Cause.FAILOVER
            await self.move(placement, reason=f"failover from {origin}", cause=cause)
            REGISTRY.inc("failovers")
            REGISTRY.inc("failover_partitions", (), len(placement))
            took = (time.time() - (dead.died_at or time.time())) * 1000
            self.event("failover", f"{len(placement)} partitions of {origin} moved in {took:.0f} ms")
        await self._rebalance(live)

    async def _rebalance(self, live: list[LiveActor]) -> None:
        """A fair share to nodes that joined, a bounded number a pass; the next pass goes on."""
        now, policy = self.clock(), self.rebalance_policy
        self.moved_at = {tp: t for tp, t in self.moved_at.items() if now - t < policy.cooldown and tp in self.leaders}
        moves = rebalance(self._single_leaders(), live, self.moved_at, now, policy)
        if moves:
            await self.move(moves, reason="node balance", cause=Cause.BALANCE)
            if len(moves) >= policy.max_moves:
                self.wake()
        self._rebalance_at = rebalance_due(self._single_leaders(), live, self.moved_at, self.clock(), policy)

    def _home(self) -> int | None:
        """Where nodes keep their logs in data directories of their own, the one directory (replica
        id) the partitions kept in one copy live in: the controller's own node's. They move only
        between actors of that directory, so no move leaves a log behind on another disk (the
        internal topics until they are adopted into replication, and any topic created while the
        cluster had one directory). -1 while the controller's node has no actor up yet (nothing
        can be placed then); None where there is one directory (anywhere will do)."""
        # The directories the metadata knows, not those with live actors now: while a node's
        # actors are down (or not yet up) the single copies must still stay home.
        if len(self.meta().replica_ids) < 2:
            return None
        own = getattr(self.pool, "own_node", lambda: None)()
        mine = {e.replica_id for e in self.actors.values() if e.ready and e.node_id == own and e.replica_id is not None}
        return min(mine) if mine else -1

    def _single_leaders(self) -> dict[TP, str]:
        """The leaders of the partitions kept in one copy, which this reconciler places and moves."""
        registered = self.meta().registrations
        return {tp: name for tp, name in self.leaders.items() if tp not in registered}

    async def move(self, placement: dict[TP, str], reason: str, cause: Cause) -> None:
        """Give each partition its new leader at a bumped epoch (the caller holds the lock), and
        record each change with its cause and instants (cluster/control/leadership_changes.py)."""
        if not placement:
            return
        # Release first: two live actors must never append to one log.
        releases: dict[str, list[TP]] = {}
        previous = {tp: self.leaders.get(tp) for tp in placement}
        for tp, new in placement.items():
            old = previous[tp]
            if old is not None and old != new and old in self.actors and self.actors[old].alive:
                releases.setdefault(old, []).append(tp)
        began = time.time()
        epochs = await self.bump_epochs(list(placement))
        now = self.clock()
        for tp, name in placement.items():
            self.leaders[tp] = name
            self.failed_loads.pop(tp, None)
            self.moved_at[tp] = now
        await self.publish()
        await asyncio.gather(
            *(self.pool.unload(self.actors[name].handle, tps) for name, tps in releases.items()), return_exceptions=True
        )
        released = time.time() if releases else began
        loads: dict[str, list[tuple[str, int, int]]] = {}
        for tp, name in placement.items():
            if tp in epochs:
                loads.setdefault(name, []).append((tp[0], tp[1], epochs[tp]))
        results = await asyncio.gather(
            *(self._load(self.actors[name].handle, items) for name, items in loads.items()), return_exceptions=True
        )
        loaded = time.time()
        for (name, items), result in zip(loads.items(), results):
            for topic, p, epoch in items:
                old = previous[(topic, p)]
                # An actor whose node left may answer until its partitions are loaded elsewhere.
                gone = loaded if old in self._lost_with_node else (released if old in releases else began)
                self.changes.record(LeadershipChange(
                    topic, p, epoch, name, old, cause, began, gone,
                    None if isinstance(result, BaseException) else loaded))
            if isinstance(result, BaseException):
                log.error("%s failed to load its partitions: %s", name, result)
                self.event("load-failed", f"{name} could not load its partitions: {result}")
                retry_at = self.clock() + retry_delay(1)
                for topic, p, _ in items:
                    self.failed_loads[(topic, p)] = FailedLoad(1, retry_at, str(result))
                self.wake()
            else:
                for line in result or ():
                    self.event("log-recovered", line)
        self.event("leadership", f"{len(placement)} partitions placed ({reason})")

    async def _retry_loads(self, now: float) -> None:
        """Load again, one partition a call, what failed to load where it still belongs."""
        due = [tp for tp, failure in self.failed_loads.items() if failure.retry_at <= now]

        async def retry(tp: TP) -> None:
            failure = self.failed_loads[tp]
            entry = self.actors.get(self.leaders.get(tp, ""))
            epoch = self.meta().leader_epochs.get(tp)
            if entry is None or not entry.ready or epoch is None:
                del self.failed_loads[tp]  # moved, deleted or its actor died: placement handles it
                return
            try:
                lines = await self._load(entry.handle, [(tp[0], tp[1], epoch)])
            except Exception as exc:
                failure.failures += 1
                failure.retry_at = self.clock() + retry_delay(failure.failures)
                failure.error = str(exc)
                log.warning("%s-%d still does not load on %s (%d tries): %s", tp[0], tp[1], entry.name, failure.failures, exc)
                return
            del self.failed_loads[tp]
            for line in lines or ():
                self.event("log-recovered", line)
            self.event("load-retried", f"{tp[0]}-{tp[1]} loaded on {entry.name} after {failure.failures + 1} tries")

        await asyncio.gather(*(retry(tp) for tp in due))

    async def _load(self, handle: Any, items: list[tuple[str, int, int]]) -> list[str]:
        """The pool's load, bounded. The actor may go on loading after the timeout; a retry at the
        same epoch then joins that load (the runtime's), so giving up here loses nothing."""
        timeout_ms = self.config["raygroups.load.timeout.ms"]
        try:
            return await asyncio.wait_for(self.pool.load(handle, items), timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise LoadTimeout(f"the load of {len(items)} partitions did not answer within {timeout_ms} ms") from None

    # -- actors -----------------------------------------------------------------------------------

    def spawn(self, kind: ActorKind, node: str | None = None) -> ActorEntry:
        """Start an actor: on `node`, or (with a node-aware pool) on the node running fewest of its kind."""
        name = f"{kind.value}-{self._next_index[kind]}"
        self._next_index[kind] += 1
        self._serial += 1
        if node is None and self.nodes:
            running = Counter(e.node_id for e in self.actors.values() if e.alive and e.kind is kind)
            node = min(self.nodes, key=lambda n: (running[n], n))
        if node is not None and isinstance(self.pool, NodeAwarePool):
            handle = self.pool.spawn_on(kind, name, node)
        else:
            handle = self.pool.spawn(kind, name)
        # Where it was asked to run until it says where it runs: counts it for that node meanwhile.
        entry = ActorEntry(name, kind, handle, node_id=node, serial=self._serial)
        self.actors[name] = entry
        return entry

    async def bring_up(self, entry: ActorEntry) -> None:
        """Wait until a spawned actor answers, then watch it."""
        key = (entry.kind, entry.node_id)  # the node it was asked onto (None: anywhere)
        try:
            await self._await_ready(entry)
        except Exception as exc:
            log.error("%s did not start: %s", entry.name, exc or type(exc).__name__)
            self._spawn_failures[key] += 1
            self._spawn_at[key] = self.clock() + retry_delay(self._spawn_failures[key])
            # Killed whatever the failure: an actor Ray places late would otherwise run beside its
            # replacement, unwatched.
            try:
                self.pool.kill(entry.handle)
            except Exception:  # noqa: BLE001 - already gone (its node, or Ray's own failure)
                pass
            self.died(entry, entry.handle)
            return
        self._spawn_failures[key] = 0
        self.wake()

    async def _await_ready(self, entry: ActorEntry) -> None:
        # Bounded: an actor Ray never places (its node went away, no resources free) would
        # otherwise count as starting for ever, and its kind would be one short on that node.
        info = await self.pool.info(entry.handle, self.config["raygroups.actor.start.timeout.ms"] / 1000)
        entry.node_id = info["node_id"]
        entry.pid = info.get("pid")
        if info.get("directory_id") and self.register_directory is not None:
            # Durable before the actor counts as up: which replica its storage is outlives it.
            directory = entry.directory_id = uuid.UUID(info["directory_id"])
            new = directory not in self.meta().replica_ids and directory not in self._registering
            self._registering.add(directory)  # the actors of one node come up together
            entry.replica_id = await self.register_directory(directory)
            if new:
                self.event("replica", f"data directory {directory} on node {entry.node_id} is replica {entry.replica_id}")
        entry.move_to(ActorState.READY)
        self._ready_at[entry.name] = self.clock()
        handle = entry.handle
        self._watchers[entry.name] = asyncio.get_running_loop().create_task(self._watch(entry, handle))

    async def _watch(self, entry: ActorEntry, handle: Any) -> None:
        await self.pool.watch(handle)
        if not self.stopping:
            self.died(entry, handle)

    def died(self, entry: ActorEntry, handle: Any, quiet: bool = False) -> None:
        """Record a death (of this incarnation only: a restarted gateway has a new handle)."""
        if entry.handle is not handle or entry.state is ActorState.DEAD:
            return
        entry.move_to(ActorState.DEAD)
        entry.died_at = time.time()
        entry.restart_at = self.clock()
        self._watchers.pop(entry.name, None)
        if not quiet:
            self.event("actor-died", f"{entry.name} died")
        self.wake()

    def _track(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        """Until the actors being started or restarted have come up or failed (for tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.replicas.idle()

    async def stop(self) -> None:
        self.stopping = True
        self.wake()
        for task in [*self._watchers.values(), *self._tasks, *([self._sessions] if self._sessions else []),
                     *self.replicas._background, *self.replicas._pings.values()]:
            task.cancel()

    # -- the map as routers see it ----------------------------------------------------------------

    def snapshot(self) -> Leadership:
        meta = self.meta()
        gateways = [e for e in self.actors.values() if e.kind is ActorKind.GATEWAY and e.gateway and e.ready]
        return Leadership(
            version=self.version,
            cluster_id=self.config["raygroups.cluster.id"],
            gateways=sorted((e.gateway for e in gateways if e.gateway), key=lambda g: g.node_id),
            topics=dict(meta.topics),
            leaders={tp: (name, _epoch(meta, tp)) for tp, name in self.leaders.items()},
            handles={e.name: e.handle for e in self.actors.values() if e.alive and e.kind is not ActorKind.GATEWAY},
            group_configs=dict(meta.group_configs),
            replica_brokers=self.replicas.brokers(self.gateway_of_node()) if meta.registrations else {},
        )

    def gateway_of_node(self) -> dict[str, int]:
        """Each node's gateway's broker id (the broker a replica on that node is named by)."""
        return {
            e.node_id: e.gateway.node_id for e in self.actors.values()
            if e.kind is ActorKind.GATEWAY and e.gateway and e.ready and e.node_id
        }

    async def publish(self) -> None:
        """Push the map to everyone who routes: gateways, and the actors that call share coordinators."""
        self.version += 1
        snapshot = self.snapshot()
        followers = [e for e in self.actors.values() if e.kind in LEADERSHIP_FOLLOWERS and e.ready]
        await asyncio.gather(
            *(self.pool.update_leadership(e.handle, snapshot, 5) for e in followers), return_exceptions=True
        )
