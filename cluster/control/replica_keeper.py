"""The reconciler's replicated partitions (issue 25): who hosts each replica, the registrations
kept in step with who lives, and the controller's answers to AlterPartition.

Kafka's ReplicationControlManager, for a cluster whose brokers are Ray actors. A replica is a data
directory (cluster/log/data_directory.py), so on each node one actor of each kind keeps that
node's replicas of the partitions of its kind, leading some and following the others, as a Kafka
broker does: `hosts` maps (replica id, kind) to that actor. It stays the host while it lives
(its replicas' logs are open in it); when it dies another actor of its kind on a node with that
data directory takes over, with a new incarnation (KIP-903's broker epoch), and the replicas it
took over are fenced and back, as a restarted broker is.

Each pass (under the reconciler's lock, level-triggered like the rest):
- a replica is alive when its (replica id, kind) has a live host; for each partition the replicas
  alive in another incarnation than the one its registration last saw have restarted;
  `reconcile(restarted(...))` (cluster/replication/registration.py) takes the dead out of the ISR
  and elects from the ISR where the leader is gone; the changes are written to the metadata log
  in one batch before anyone hears of them;
- every `leader.imbalance.check.interval.seconds` (with `auto.leader.rebalance.enable`), the
  first replica of each assignment that is alive and in the ISR leads again (Kafka's preferred
  leader election): leaderships a failure moved go back where placement spread them;
- a data directory no live actor has kept for `raygroups.replica.replace.after.ms` (a node lost
  for good, or back with a wiped disk, which makes it a new replica) has its partitions' copies
  moved to live directories by reassignment (KIP-455), restoring the replication factor;
- while every partition is whole and none is moving, a few partitions at a time are reassigned
  to even out the replicas per data directory, so a node that joins gets copies (`_balance`);
- the leadership map names, for each registered partition, the host of its leader replica at
  the registration's leader epoch (a partition without a leader is left out: unavailable);
- every host is pushed the registrations of its replicas when they changed, with the hosts of the
  other replicas of its kind to fetch from (`pool.apply_replicas`).

AlterPartition (the leaders' ISR changes) is answered by `alter_partition`, under the keeper's
own lock rather than the reconciler's, which a pass holds through slow loads: an ISR change
waits for another registration change, never for a load.

Sessions (Kafka's broker heartbeats and `broker.session.timeout.ms`): Ray says when an actor dies,
not when it stops answering (a paused process, a stalled machine). While there are replicated
partitions the keeper pings every host each `broker.heartbeat.interval.ms`; a host that has not
answered for the session timeout is fenced: its replicas count as dead (out of the ISR, their
leaderships elected elsewhere) and it is pushed nothing until it answers again, in the same
incarnation, as Kafka unfences a broker whose heartbeats resume. What a paused leader wrote and
never replicated is cut when it learns it follows (KIP-101/279).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.calls.kinds import ActorKind, kind_for_topic
from cluster.control.actor_state import ActorEntry
from cluster.control.leadership_changes import Cause, LeadershipChange, LeadershipChanges
from cluster.metadata import ClusterMetadata
from cluster.replication.push import ReplicaPush
from cluster.replication.registration import (
    AlterAnswer,
    AlterPartition,
    PartitionRegistration,
    answer_alter_partition,
    change_reassignment,
    elect_preferred,
    reassign,
    reconcile,
    restarted,
)
from cluster.replication.placement import assign_replicas, balance_moves, replacements

log = logging.getLogger(__name__)

TP = tuple[str, int]
HOST_KINDS = (ActorKind.GROUP_COORDINATOR, ActorKind.SHARE_COORDINATOR, ActorKind.PARTITION_LEADER)
# Internal partitions adopted into replication per pass (_adopt): the rest keep serving meanwhile,
# and the next ones wait until these have a copy in sync.
ADOPT_PER_PASS = 10
RELEASE_TIMEOUT_S = 10.0  # the unload of a partition's one copy before its adoption
UNREACHABLE_BROKER_BASE = 1_000_000  # + replica id: the broker id of a replica whose node has no gateway
ONE_COPY = "the partition keeps one copy (one data directory, or a shared one): there is no replica to move"
_REASSIGN_ERRORS = {
    ErrorCode.no_reassignment_in_progress: "no reassignment of the partition is in progress",
    ErrorCode.invalid_replica_assignment: "the replicas must be distinct, and at least one",
}


class KeeperHost(Protocol):
    """What the keeper needs of the reconciler that owns it."""

    pool: Any
    actors: dict[str, ActorEntry]
    leaders: dict[TP, str]
    failed_loads: dict[TP, Any]
    changes: LeadershipChanges
    _lost_with_node: set[str]

    def event(self, kind: str, detail: str) -> None: ...
    async def publish(self) -> None: ...
    def _home(self) -> int | None: ...


def choose_hosts(current: dict[tuple[int, ActorKind], str], actors: list[ActorEntry]) -> dict[tuple[int, ActorKind], str]:
    """One host per (replica id, kind): the current one while it is ready, else the ready actor
    of that kind and data directory that came up first (the lowest serial)."""
    ready = {e.name: e for e in actors if e.ready and e.replica_id is not None and e.kind in HOST_KINDS}
    hosts: dict[tuple[int, ActorKind], str] = {}
    for name, entry in sorted(ready.items(), key=lambda item: item[1].serial):
        key = (entry.replica_id, entry.kind)
        kept = current.get(key)
        if kept in ready and ready[kept].replica_id == key[0]:
            hosts[key] = kept
        else:
            hosts.setdefault(key, name)
    return hosts


class ReplicaKeeper:
    def __init__(
        self,
        host: KeeperHost,
        meta: Callable[[], ClusterMetadata],
        change: Callable[[dict[TP, PartitionRegistration]], Awaitable[None]],
        session_s: float = 9.0,
        heartbeat_s: float = 2.0,
        preferred_every_s: float | None = 300.0,
        replace_after_s: float | None = None,
        balance_moves: int = 0,
        adopt: Callable[[dict[TP, PartitionRegistration]], Awaitable[None]] | None = None,
        internal_factors: dict[ActorKind, int] | None = None,
        min_insync: int = 2,
    ) -> None:
        self.host = host
        self.meta = meta
        self.change = change  # durable: the metadata write of changed registrations
        # Durable too: the first registrations of partitions kept in one copy so far (_adopt), and
        # the replication factor the internal topics of each coordinator kind are adopted at.
        self.adopt = adopt
        self.internal_factors = internal_factors or {}
        self.min_insync = min_insync  # min.insync.replicas
        self.hosts: dict[tuple[int, ActorKind], str] = {}
        # Per partition, the incarnation of each replica's host its registration last saw alive.
        self.seen: dict[TP, dict[int, int]] = {}
        self.answers: dict[TP, AlterAnswer] = {}
        self.lock = asyncio.Lock()
        self._pushed: dict[str, dict[TP, int]] = {}  # host -> partition epochs it was last pushed
        self._broker_of: dict[int, int] = {}  # replica id -> the broker id of the node it was last on
        self._published: dict[TP, int] = {}  # the leader epoch the map was last published with
        self._background: set[asyncio.Task] = set()
        self._pings: dict[str, asyncio.Future] = {}  # host -> its ping in flight (probe)
        self.session_s = session_s
        self.heartbeat_s = heartbeat_s
        self.answered: dict[str, float] = {}  # host -> when it last answered a ping (or became a host)
        # Preferred leader elections (auto.leader.rebalance.enable), every
        # leader.imbalance.check.interval.seconds: None turns them off.
        self.preferred_every_s = preferred_every_s
        self.preferred_at = 0.0
        self.replace_after_s = replace_after_s  # None: replicas gone for good are never replaced
        self.missing_since: dict[int, float] = {}  # replica id -> since when no live actor keeps it
        self.replaced: set[int] = set()  # gone replicas whose replacement was tried
        self.fenced: set[str] = set()
        self.balance_moves = balance_moves  # reassignments per wave that even out replicas; 0: none
        # Set when a host comes up for a data directory holding none of its kind's replicas (a node
        # joins, or is back with a wiped disk; see _joined); cleared once the replicas are even
        # again, and by an operator's reassignment: operators' placements are not undone otherwise.
        self.balance_wanted = False
        # Internal partitions adopted into replication (_adopt) whose preferred replica has not led
        # yet: elected as soon as their move completes, not at the next periodic election. Kafka
        # makes these topics replicated from the start, their leaders spread by placement; an
        # adoption ends the same way instead of leaving the controller's node leading every one
        # for leader.imbalance.check.interval.seconds (a loss of that node would then cost every
        # coordinator, and the others none). Not durable: after a controller restart the periodic
        # election does it.
        self.adopted: set[TP] = set()

    def alive(self, tp: TP, registration: PartitionRegistration) -> dict[int, int]:
        """The replicas of `tp` with a live host, each with its host's incarnation."""
        kind = kind_for_topic(tp[0])
        out: dict[int, int] = {}
        for replica in registration.replicas:
            name = self.hosts.get((replica, kind))
            entry = self.host.actors.get(name) if name is not None else None
            if entry is not None and entry.ready and name not in self.fenced:
                out[replica] = entry.serial
        return out

    def brokers(self, gateway_of_node: dict[str, int]) -> dict[TP, tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """Each registered partition as Metadata names it, in broker ids: a replica is on the
        broker (gateway) of the node its host runs on; one whose node is gone keeps the broker
        id it was last on (Kafka lists a dead broker's replicas, as offline)."""
        self._learn_brokers(gateway_of_node)
        broker = self.broker_id
        out = {}
        for tp, reg in self.meta().registrations.items():
            alive = self.alive(tp, reg)
            leader = self._broker_of.get(reg.leader, -1) if reg.has_leader else -1
            out[tp] = (
                leader,
                tuple(broker(r) for r in reg.replicas),
                tuple(broker(r) for r in reg.isr),
                tuple(broker(r) for r in reg.replicas if r not in alive),
            )
        return out

    def _learn_brokers(self, gateway_of_node: dict[str, int]) -> dict[int, int]:
        """Note the broker (gateway) of each replica's host's node; the replicas found live."""
        live: dict[int, int] = {}
        for (replica, _kind), name in self.hosts.items():
            entry = self.host.actors.get(name)
            broker = gateway_of_node.get(entry.node_id) if entry is not None and entry.node_id else None
            if broker is not None:
                self._broker_of[replica] = live[replica] = broker
        # A broker id a live replica holds now names it alone: a replica last seen there (a gateway
        # restarted under its id on another node) is named by its unreachable id from now on.
        claimed = set(live.values())
        for replica in [r for r, b in self._broker_of.items() if b in claimed and r not in live]:
            del self._broker_of[replica]
        return live

    def broker_id(self, replica: int) -> int:
        """The broker id Metadata names `replica` by: its node's gateway, or the one it was last
        on. A replica on a node without a gateway (a fixed count of gateways, all on other nodes)
        is still named, by an id no gateway has: Kafka lists replicas on brokers a client cannot
        reach too (offline ones), and clients send only to the leader."""
        return self._broker_of.get(replica, UNREACHABLE_BROKER_BASE + replica)

    def replica_ids_of(self, brokers: list[int], gateway_of_node: dict[str, int]) -> tuple[int, ...] | int:
        """The replicas an operator names by broker id (AlterPartitionReassignments), as Metadata
        names them (a replica whose node is away by the broker it was last on, or by its
        unreachable id), or the first broker id that names no replica."""
        self._learn_brokers(gateway_of_node)
        by_broker = {broker: replica for replica, broker in self._broker_of.items()}
        registered = set(self.meta().replica_ids.values())
        out = []
        for broker in brokers:
            replica = by_broker.get(broker)
            if replica is None and broker - UNREACHABLE_BROKER_BASE in registered - set(self._broker_of):
                replica = broker - UNREACHABLE_BROKER_BASE
            if replica is None:
                return broker
            out.append(replica)
        return tuple(out)

    async def reassign_partitions(
        self, targets: dict[TP, tuple[int, ...] | None], allow_replication_factor_change: bool = True
    ) -> dict[TP, tuple[ErrorCode, str | None]]:
        """Operators' reassignments (Kafka's AlterPartitionReassignments), in replica ids: each
        target starts (or replaces) a move, None cancels one; durable before the answer, the
        hosts told and the map published after it, as for an ISR change. A replica may be one
        whose node is away (Kafka accepts a fenced broker): it joins when it is back. The
        operator takes over from the balancer until the next node joins."""
        answers: dict[TP, tuple[ErrorCode, str | None]] = {}
        async with self.lock:
            registrations = self.meta().registrations
            registered = set(self.meta().replica_ids.values())
            changes: dict[TP, PartitionRegistration] = {}
            for tp, target in targets.items():
                reg = registrations.get(tp)
                if reg is None:
                    answers[tp] = (ErrorCode.invalid_replica_assignment, ONE_COPY)
                    continue
                unknown = [r for r in target or () if r not in registered]
                if unknown:
                    answers[tp] = (ErrorCode.invalid_replica_assignment, f"replica {unknown[0]} is no data directory")
                    continue
                if target is not None and not allow_replication_factor_change and len(target) != len(reg.target_replicas):
                    # Kafka's validatePartitionReplicationFactorUnchanged: against the set the
                    # partition is heading for (a move in progress included).
                    answers[tp] = (ErrorCode.invalid_replication_factor, "The replication factor is changed from "
                                   f"{len(reg.target_replicas)} to {len(target)}")
                    continue
                new, error = change_reassignment(reg, target, self.alive(tp, reg))
                if error is ErrorCode.invalid_replica_assignment and target is None:
                    message: str | None = (f"Unable to revert partition assignment for {tp[0]}:{tp[1]} because it "
                                           "would require an unclean leader election.")
                else:
                    message = None if error is ErrorCode.none else _REASSIGN_ERRORS.get(error)
                answers[tp] = (error, message)
                if error is ErrorCode.none and new != reg:
                    changes[tp] = new
            if changes:
                await self.change(changes)
                self.balance_wanted = False
                self.host.event("reassign", f"{len(changes)} partitions reassigned by an operator")
        if changes:
            self._background_change()
        return answers

    def reassignments(self) -> dict[TP, PartitionRegistration]:
        """The registrations of the partitions being moved (ListPartitionReassignments)."""
        return {tp: reg for tp, reg in self.meta().registrations.items() if reg.reassigning}

    async def step(self) -> None:
        """One pass: hosts, registrations in step with them, the map, the pushes."""
        before = set(self.hosts)
        self.hosts = choose_hosts(self.hosts, list(self.host.actors.values()))
        self._joined(set(self.hosts) - before)
        now = self.host.clock()
        for name in self.hosts.values():
            self.answered.setdefault(name, now)  # a new host's session starts now
        preferred = self.preferred_every_s is not None and now >= self.preferred_at
        balanced = False  # a preferred replica elected (periodically, or at an adoption's end)
        settled: set[TP] = set()  # adopted partitions led by their preferred replica, once written
        began = time.time()
        async with self.lock:
            registrations = dict(self.meta().registrations)
            changes: dict[TP, PartitionRegistration] = {}
            seen: dict[TP, dict[int, int]] = {}
            for tp, reg in registrations.items():
                alive = self.alive(tp, reg)
                before = self.seen.get(tp, {})
                back = [r for r, incarnation in alive.items() if before.get(r) != incarnation]
                new = reconcile(restarted(reg, back, alive), alive)
                if (preferred or tp in self.adopted) and not back:  # one just back is not in the ISR yet
                    chosen = elect_preferred(new, alive)
                    balanced = balanced or chosen.leader != new.leader
                    new = chosen
                if tp in self.adopted and not new.reassigning and new.leader == new.replicas[0]:
                    settled.add(tp)
                seen[tp] = alive
                if new != reg:
                    changes[tp] = new
            if preferred:
                self.preferred_at = now + self.preferred_every_s
            changes.update(self._replace_gone(now, {**registrations, **changes}))
            # Copies an internal topic's factor asks for first: they also fill a joining node, and
            # balancing waits for every move to complete.
            changes.update(self._grow({**registrations, **changes}, set(changes)))
            changes.update(self._balance({**registrations, **changes}))
            if changes:
                await self.change(changes)
                elected = sum(1 for tp, new in changes.items() if new.leader != registrations[tp].leader)
                self.host.event("isr", f"{len(changes)} replicated partitions changed with who lives "
                                       f"({elected} new leaders)")
            # Only once durable: a pass whose write failed sees the same difference next time.
            self.seen = seen
            self.adopted -= settled
            self.answers = {tp: a for tp, a in self.answers.items() if tp in registrations}
            adopted = await self._adopt()
        # The hosts first: a gateway routed by the new map finds its leader already leading.
        await self.push()
        await self._lead(changed=bool(changes) or adopted, began=began, preferred=preferred or balanced)

    async def _lead(self, changed: bool = False, began: float | None = None, preferred: bool = False) -> None:
        """The leadership map's registered partitions: the host of each one's leader replica, at
        its leader epoch; published when either changed (the gateways route with both) or when
        `changed` says a registration did (Metadata names the replicas and the ISR). Each change
        of leader is recorded with its cause (cluster/control/leadership_changes.py): `began` when
        the pass decided it, released at once (the old host is dead, fenced, or was told it follows
        before the map moved), loaded now (the new host was pushed its registration first)."""
        registrations = self.meta().registrations
        now = time.time()
        began = now if began is None else began
        for tp, reg in registrations.items():
            name = self.hosts.get((reg.leader, kind_for_topic(tp[0]))) if reg.has_leader else None
            if name in self.fenced:
                name = None
            old = self.host.leaders.get(tp)
            if old != name or (name is not None and self._published.get(tp) != reg.leader_epoch):
                changed = True
                if name is None:
                    self.host.leaders.pop(tp, None)
                    self._published.pop(tp, None)
                else:
                    self.host.leaders[tp] = name
                    self._published[tp] = reg.leader_epoch
                if old != name:
                    cause = self._cause(old, name, preferred)
                    gone = now if old in self.host._lost_with_node else began
                    self.host.changes.record(LeadershipChange(
                        tp[0], tp[1], reg.leader_epoch, name, old, cause, began, gone, now if name else None))
        if changed:
            await self.host.publish()

    def _cause(self, old: str | None, new: str | None, preferred: bool) -> Cause:
        if new is None:
            return Cause.UNAVAILABLE
        if old is None:
            return Cause.CREATED
        entry = self.host.actors.get(old)
        if old in self.host._lost_with_node:
            return Cause.NODE_LOSS
        if entry is None or not entry.alive or old in self.fenced:
            return Cause.FAILOVER
        return Cause.BALANCE if preferred else Cause.PLACEMENT

    async def push(self) -> None:
        """Tell each host the registrations of its replicas that changed since its last push."""
        registrations = self.meta().registrations
        sources: dict[ActorKind, dict[int, Any]] = {}
        for (replica, kind), name in self.hosts.items():
            sources.setdefault(kind, {})[replica] = self.host.actors[name].handle
        pushes: list[tuple[str, ReplicaPush]] = []
        for (replica, kind), name in self.hosts.items():
            if name in self.fenced:
                continue  # it does not answer: pushed once it does again
            before = self._pushed.get(name, {})
            # A partition this host keeps, or kept at the last push and has since left (a
            # completed reassignment): the registration without it tells it to remove its copy.
            mine = {
                tp: reg for tp, reg in registrations.items()
                if kind_for_topic(tp[0]) is kind
                and (replica in reg.replicas or before.get(tp, reg.partition_epoch) != reg.partition_epoch)
            }
            epochs = {tp: reg.partition_epoch for tp, reg in mine.items()}
            if before == epochs:
                continue  # nothing new (nothing at all, where one data directory keeps one copy)
            entry = self.host.actors[name]
            topics = self.meta().topics
            ids = {t: topics[t].topic_id for t, _ in mine if t in topics}
            pushes.append((name, ReplicaPush(replica, entry.serial, mine, sources[kind], ids)))
        results = await asyncio.gather(
            *(self.host.pool.apply_replicas(self.host.actors[name].handle, push) for name, push in pushes),
            return_exceptions=True,
        )
        for (name, push), result in zip(pushes, results):
            if isinstance(result, BaseException):
                log.warning("%s did not take its replicas: %s", name, result)
                # The next pass pushes again, everything it was told of (-1 matches no epoch), so a
                # partition it has since left is still sent, telling it to let go.
                told = {**self._pushed.get(name, {}), **{tp: -1 for tp in push.registrations}}
                self._pushed[name] = {tp: -1 for tp in told}
            else:
                self._pushed[name] = {tp: reg.partition_epoch for tp, reg in push.registrations.items()}

    def next_due(self) -> float | None:
        """When a pass is next due for the keeper's own timers (the reconciler's loop waits for
        it): the preferred leader election, and the replacement of a replica gone long enough."""
        if not self.meta().registrations:
            return None
        times = []
        if self.preferred_every_s is not None:
            times.append(self.preferred_at)
        if self.replace_after_s is not None:
            times += [since + self.replace_after_s for r, since in self.missing_since.items() if r not in self.replaced]
        return min(times) if times else None

    def _replace_gone(self, now: float, registrations: dict[TP, PartitionRegistration]) -> dict[TP, PartitionRegistration]:
        """Reassignments that copy a replica gone for good back elsewhere: a data directory
        with no live actor for `replace_after_s` (its node lost, or back with a wiped disk, which
        makes it a new replica) has its partitions' copies moved to live directories, as KIP-455
        moves a partition: the target joins, catches up, enters the ISR, and the gone replica
        leaves the assignment in that change (registration.py). Kafka leaves this to an operator
        or a balancer; raygroups does it itself after the wait, or never (-1)."""
        present = {e.replica_id for e in self.host.actors.values() if e.ready and e.replica_id is not None}
        for replica in self.meta().replica_ids.values():
            if replica in present:
                self.missing_since.pop(replica, None)
                self.replaced.discard(replica)
            else:
                self.missing_since.setdefault(replica, now)
        if self.replace_after_s is None:
            return {}
        gone = {r for r, since in self.missing_since.items() if now - since >= self.replace_after_s}
        if not gone:
            return {}
        # Its timer has fired: later passes (a node joining brings some) still try, none is woken for it.
        self.replaced |= gone
        live_of = {kind: {r for (r, k), name in self.hosts.items()
                          if k is kind and name not in self.fenced and self.host.actors[name].ready}
                   for kind in HOST_KINDS}
        out: dict[TP, PartitionRegistration] = {}
        for tp, reg in registrations.items():
            if set(reg.adding) & gone:
                # A move to a replica gone for good never completes: cancelled (the next pass
                # replaces what else is gone), or it would hold the partition, and balancing, forever.
                cancelled, error = change_reassignment(reg, None, self.alive(tp, reg))
                if error is ErrorCode.none:
                    out[tp] = cancelled
        if out:
            self.host.event("reassign", f"{len(out)} moves to replicas {sorted(gone)}, gone for "
                                        f"{self.replace_after_s:g} s, cancelled")
            return out
        affected = {tp: reg for tp, reg in registrations.items() if not reg.reassigning and set(reg.replicas) & gone}
        if not affected:
            return {}
        # Per kind: a partition's copy goes to a directory with a live host of the kind that keeps it.
        targets: dict[TP, tuple[int, ...]] = {}
        for kind, live in live_of.items():
            mine = {tp: reg.replicas for tp, reg in registrations.items() if kind_for_topic(tp[0]) is kind}
            if mine and live:
                targets.update(replacements(mine, gone, live))
        for tp, reg in affected.items():
            target = targets.get(tp)
            if target is None or len(target) < len(reg.target_replicas) or set(target) == set(reg.replicas):
                continue  # no live directory to copy it to yet: never shrink the replication factor
            moved, error = reassign(reg, target, self.alive(tp, reg))
            if error is ErrorCode.none and moved != reg:
                out[tp] = moved
        if out:
            self.host.event("reassign", f"{len(out)} partitions copied from replicas {sorted(gone)}, gone for "
                                        f"{self.replace_after_s:g} s, to live data directories")
        return out

    async def _adopt(self) -> bool:
        """Internal partitions kept in one copy (created while one data directory had a
        coordinator, as on a first start before the other nodes' actors are up) become replicated
        once enough directories have a host of their kind: each is unloaded from its one leader,
        then registered in one metadata write at a leader epoch above every one it had, leading
        in its directory (its log is there), and reassigned at once to its full replica set
        (KIP-455: the new copies fetch from it, join the ISR, then the move completes). Until a
        copy is in sync, the ISR is below min.insync.replicas and its writes are refused
        (COORDINATOR_NOT_AVAILABLE, as during a Kafka reassignment). ADOPT_PER_PASS partitions a
        pass, the next ones once these have a copy in sync: the rest keep serving meanwhile, and
        at most ADOPT_PER_PASS refuse writes at a time. True if any was adopted."""
        if self.adopt is None:
            return False
        meta, home = self.meta(), self.host._home()
        if home is None or home < 0:
            return False
        adopted: dict[TP, PartitionRegistration] = {}
        for kind in sorted(self.internal_factors, key=lambda k: k.value):
            live = sorted(self._coordinator_directories(kind))
            factor = self._internal_factor(kind, len(live))
            if factor < 2 or home not in live:
                continue
            if any(kind_for_topic(tp[0]) is kind and meta.topics.get(tp[0]) is not None and meta.topics[tp[0]].internal
                   and reg.reassigning and len(reg.isr) < self.min_insync for tp, reg in meta.registrations.items()):
                continue  # the partitions adopted last refuse writes until a copy is in sync: those first
            candidates = sorted(
                tp for tp in meta.leader_epochs
                if tp not in meta.registrations and kind_for_topic(tp[0]) is kind
                and tp[0] in meta.topics and meta.topics[tp[0]].internal
            )
            existing = {tp: reg.replicas for tp, reg in meta.registrations.items() if kind_for_topic(tp[0]) is kind}
            for tp in candidates[:ADOPT_PER_PASS - len(adopted)]:
                if not await self._release(tp):
                    continue
                home_host = self.host.actors[self.hosts[(home, kind)]]
                start = PartitionRegistration((home,), (home,), home, meta.leader_epochs[tp] + 1, 0)
                target = assign_replicas([tp], tuple(live), factor, existing)[tp]
                existing[tp] = target
                moving, error = reassign(start, target, {home: home_host.serial})
                adopted[tp] = moving if error is ErrorCode.none else start
        if not adopted:
            return False
        await self.adopt(adopted)
        self.adopted.update(adopted)
        for tp in adopted:
            # Its one replica seen alive as it was registered: not taken for one that restarted.
            self.seen[tp] = {home: self.host.actors[self.hosts[(home, kind_for_topic(tp[0]))]].serial}
        self.host.event("reassign", f"{len(adopted)} internal partitions kept in one copy now replicated "
                                    f"(their copies catch up from data directory {home})")
        return True

    def _grow(self, registrations: dict[TP, PartitionRegistration], changing: set[TP]) -> dict[TP, PartitionRegistration]:
        """Internal partitions with fewer replicas than their factor asks (adopted, or replaced,
        while fewer data directories had a coordinator of their kind) get the missing copies by
        reassignment once more directories do: `offsets.topic.replication.factor` (and its share
        twin) stays what the cluster keeps wherever it can, as the issue's defaults ask. Only
        whole partitions (every replica alive and in the ISR), ADOPT_PER_PASS a pass."""
        out: dict[TP, PartitionRegistration] = {}
        for kind in sorted(self.internal_factors, key=lambda k: k.value):
            live = self._coordinator_directories(kind)
            wanted = self._internal_factor(kind, len(live))
            mine = {tp: reg for tp, reg in registrations.items()
                    if kind_for_topic(tp[0]) is kind and self.meta().topics.get(tp[0]) is not None
                    and self.meta().topics[tp[0]].internal}
            load = {r: sum(r in reg.replicas for reg in mine.values()) for r in live}
            for tp, reg in sorted(mine.items()):
                if len(out) >= ADOPT_PER_PASS:
                    return out
                if tp in changing or reg.reassigning or len(reg.replicas) >= wanted:
                    continue
                alive = self.alive(tp, reg)
                if set(alive) != set(reg.replicas) or set(reg.isr) != set(reg.replicas):
                    continue  # degraded: waited for, or replaced, first
                spare = sorted(live - set(reg.replicas), key=lambda r: (load[r], r))
                target = (*reg.replicas, *spare[:wanted - len(reg.replicas)])
                grown, error = reassign(reg, target, alive)
                if error is ErrorCode.none and grown != reg:
                    out[tp] = grown
                    for r in target[len(reg.replicas):]:
                        load[r] += 1
        if out:
            self.host.event("reassign", f"{len(out)} internal partitions given the copies their replication "
                                        f"factor asks, now that enough data directories have coordinators")
        return out

    def _coordinator_directories(self, kind: ActorKind) -> set[int]:
        return {r for (r, k), name in self.hosts.items()
                if k is kind and name not in self.fenced and self.host.actors[name].ready}

    def _internal_factor(self, kind: ActorKind, directories: int) -> int:
        """The replicas an internal partition of `kind` is kept in with `directories` data
        directories that have a coordinator of its kind: its factor, capped at them; but 1 (one
        copy, in the controller's directory) where the capped factor would stop every group at
        the loss of any one node, that is no more than min.insync.replicas (two nodes with the
        defaults: factor 2, min.insync.replicas 2), unless the factor is the one asked for. With
        the controller's node a single point of failure anyway (its metadata), replicating there
        would only add a second."""
        factor = self.internal_factors.get(kind, 1)
        capped = min(factor, directories)
        if capped < 2 or (capped < factor and capped <= self.min_insync):
            return 1
        return capped

    async def _release(self, tp: TP) -> bool:
        """Unload `tp` from the actor leading its one copy (so that its log is closed before the
        replica host opens it); False if that actor lives but did not let go (tried next pass)."""
        name = self.host.leaders.get(tp)
        entry = self.host.actors.get(name) if name is not None else None
        if entry is not None and entry.alive:
            if name in self.fenced:
                return False  # paused: it might serve the copy again once it runs
            try:
                # Bounded: the keeper's lock is held, and AlterPartition waits for it.
                await asyncio.wait_for(self.host.pool.unload(entry.handle, [tp]), RELEASE_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - the next pass tries again
                log.warning("%s did not unload %s-%s for its adoption", name, *tp, exc_info=True)
                return False
        self.host.leaders.pop(tp, None)
        self.host.failed_loads.pop(tp, None)
        return True

    def _joined(self, new_hosts: set[tuple[int, ActorKind]]) -> None:
        """A host that came up for a data directory holding no replica of its kind is a node that
        joined (or is back with a wiped disk, or a controller that restarted mid-balance): the
        replicas are evened out again."""
        registrations = self.meta().registrations
        for replica, kind in new_hosts:
            if not any(replica in reg.replicas for tp, reg in registrations.items() if kind_for_topic(tp[0]) is kind):
                self.balance_wanted = True

    def _balance(self, registrations: dict[TP, PartitionRegistration]) -> dict[TP, PartitionRegistration]:
        """Reassignments that even out the replicas per data directory (placement's
        `balance_moves`), `balance_moves` partitions a wave: a node that joins gets copies of
        existing partitions (and, through the preferred leader's place, its share of leaderships)
        without a shared disk. Only after a data directory was registered, until even again (an
        operator's reassignments are not undone), and only while every partition is whole (each
        replica alive and in the ISR) and none is moving: a node away is waited for or replaced
        first, never balanced around, and one wave completes before the next starts."""
        if self.balance_moves <= 0 or not self.balance_wanted or not registrations:
            return {}
        alive: dict[TP, dict[int, int]] = {}
        for tp, reg in registrations.items():
            alive[tp] = self.alive(tp, reg)
            if reg.reassigning or set(reg.isr) != set(reg.replicas) or set(alive[tp]) != set(reg.replicas):
                return {}
        out: dict[TP, PartitionRegistration] = {}
        for kind in {kind_for_topic(t) for t, _ in registrations}:
            live = {r for (r, k), name in self.hosts.items()
                    if k is kind and name not in self.fenced and self.host.actors[name].ready}
            mine = {tp: reg.replicas for tp, reg in registrations.items() if kind_for_topic(tp[0]) is kind}
            for tp, target in balance_moves(mine, live, self.balance_moves).items():
                moved, error = reassign(registrations[tp], target, alive[tp])
                if error is ErrorCode.none and moved != registrations[tp]:
                    out[tp] = moved
        if out:
            self.host.event("reassign", f"{len(out)} partitions moved to even out the replicas per data directory")
        else:
            self.balance_wanted = False  # even: until the next data directory joins
        return out

    # -- sessions ------------------------------------------------------------------------------

    async def probe(self) -> bool:
        """Ping every host that has no ping in flight, wait a heartbeat for the answers, fence
        those whose last answer is older than the session and unfence those that answered. True
        when that changed who is fenced.

        A ping has the whole session to answer and counts when its answer comes, as Kafka's
        controller counts a broker's heartbeat when it arrives however long it took: a host slow
        to answer (a loaded machine, a node starting beside it) is alive, and only one silent for
        the session is fenced. Pings cut at the heartbeat interval fenced every host of a machine
        starved for half a second at a time, leaving every partition without a leader for as
        long as the load lasted."""
        names = sorted(set(self.hosts.values()))
        for name in set(self._pings) - set(names):
            self._pings.pop(name).cancel()
        if not self.meta().registrations or not names:
            return False
        for name in names:
            if name not in self._pings or self._pings[name].done():
                self._pings[name] = asyncio.ensure_future(self._ping(name))
        await asyncio.wait([self._pings[name] for name in names], timeout=self.heartbeat_s)
        now = self.host.clock()
        fenced = {n for n in names if now - self.answered.get(n, now) > self.session_s}
        for name in fenced - self.fenced:
            self.host.event("fenced", f"{name} has not answered for {self.session_s:g} s: its replicas count as gone")
        for name in self.fenced - fenced:
            self.host.event("unfenced", f"{name} answers again")
        changed = fenced != self.fenced
        self.fenced = fenced
        return changed

    async def _ping(self, name: str) -> None:
        try:
            if await self.host.pool.ping(self.host.actors[name].handle, self.session_s) is True:
                self.answered[name] = self.host.clock()
        except Exception:  # noqa: BLE001 - no answer: its session runs on
            pass

    async def run_sessions(self, stopping: Callable[[], bool], wake: Callable[[], None]) -> None:
        """Probe every heartbeat, and wake the reconciler when a host was fenced or unfenced."""
        while not stopping():
            await asyncio.sleep(self.heartbeat_s)
            try:
                if await self.probe():
                    wake()
            except Exception:  # noqa: BLE001 - the next heartbeat tries again
                log.exception("probing the replica hosts failed")

    async def alter_partition(self, tp: TP, request: AlterPartition) -> tuple[ErrorCode, PartitionRegistration | None]:
        """A leader's ISR change (Kafka's AlterPartition for one partition): applied and durable
        before the answer, which carries the registration that holds now."""
        async with self.lock:
            reg = self.meta().registrations.get(tp)
            if reg is None:
                return ErrorCode.unknown_topic_or_partition, None
            new, answer = answer_alter_partition(reg, request, self.alive(tp, reg), self.answers.get(tp))
            if new != reg:
                await self.change({tp: new})
            self.answers[tp] = answer
        if new != reg:
            # The other replicas learn the new registration (the leader has it in this answer), and
            # Metadata the ISR, published with every change as Kafka's brokers learn each
            # PartitionChangeRecord (a completed reassignment may have a new leader too). Not
            # awaited: a slow host must not hold the leader's answer.
            self._background_change()
        return answer.error, answer.registration

    def _background_change(self) -> None:
        task = asyncio.ensure_future(self._after_alter())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def idle(self) -> None:
        """Until what AlterPartition answers left to do is done (tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def _after_alter(self) -> None:
        try:
            await self.push()
            await self._lead(changed=True)
        except Exception:  # noqa: BLE001 - the next pass pushes and publishes again
            log.exception("telling the hosts and the gateways of an ISR change failed")
