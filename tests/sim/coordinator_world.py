"""The composed coordinator side: share-group members and consumer-protocol members (KIP-848's
ConsumerGroupHeartbeat, tests/sim/consumer_members.py) heartbeating through the gateway's real
clients (CoordinatorClient, the router and its batchers) to real GroupCoordinator bodies leading two
`__consumer_offsets` partitions, which initialize share state on a real ShareCoordinator through
their real Persisters (retries included); the real Reconciler plays the controller, over a
simulated Ray.

Ray is the world's `Network`: every `.remote()` call waits there until the schedule delivers it;
a killed actor fails what was sent to it and what it was running (RayActorError), and may have
applied a call whose answer it never sent. The reconciler (cluster/control/reconciler.py) spawns
the actors through `SimPool`, notices a death through the pool's `watch`, replaces the actor and
moves its partitions at newer epochs (its loads and unloads cross the same Network), and moves a
partition between live actors when the schedule says (an operator's move). The gateway's router
learns of a change by pulling the reconciler's map on NOT_COORDINATOR or a dead actor, as in the
cluster. Clock, timers, disk and blocking work are the harness's (tests/sim/harness.py).

Invariants (checked after every step):
- assigned ⇒ initialized: a partition a member was assigned has share state on the share
  coordinator (Kafka assigns only initialized share partitions; the state is durable before the
  group records it initialized).
- a share state's state epoch never goes back (an initialize below it is fenced).
- one leader: no partition is active on two live actors at once (the reconciler releases first).
- member epochs only grow while a member keeps its id.
- no operation raises (an exception fails the whole batch its call carried: a bug, not an answer).
- consumer groups (tests/sim/consumer_checks.py): a member's epoch never goes back while it exists,
  in the log and in what its client is told; no partition is owned twice, in the durable state
  and in what the clients the coordinator still holds believe they own (each only what the
  coordinator holds for it); a leader at rest holds exactly what its log replays to, and a new
  leader what its predecessor held.
A killed actor is gone whole: its timers, queued operations, a load under way and an append still
waiting on the executor end with it (they run on the world's wakeups and executor, and would
otherwise write to the partition's log under its successor).

Not an invariant, counted instead: an initialize that applies again at the *same* state epoch
after the partition was assigned. Kafka 4.2's ShareCoordinatorShard.initializeState fences only a
lower epoch, and its group coordinator re-sends an initialize still unanswered after
`group.share.initialize.retry.interval.ms` while the first may yet apply (a Persister still
retrying it); ours does the same (SPEC.md: Kafka 4.2 decides). `reinitialized` counts them.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from ray.exceptions import RayActorError

from coordinator.consumer.messages import ConsumerGroupHeartbeatResponse
from coordinator.hashing import group_partition
from coordinator.share.messages import ShareGroupHeartbeatRequest, ShareHeartbeatOutcome
from sharestate.coordinator_shard import SharePartitionKey

from cluster.actors.coordinator_host import Seams
from cluster.actors.group_coordinator import GroupCoordinator
from cluster.actors.share_coordinator import ShareCoordinator
from cluster.calls import ActorKind, CoordinatorOp, Failed, unpack
from cluster.clients.coordinator import CoordinatorClient
from cluster.clients.routing import Router
from cluster.config import Config
from cluster.control.leadership_changes import Cause
from cluster.control.reconciler import Reconciler
from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE, ClusterMetadata, TopicInfo
from cluster.runtime import NotCoordinator, PartitionStatus
from tests.sim import harness
from tests.sim.consumer_checks import ConsumerChecks
from tests.sim.consumer_members import ConsumerMember, Phase, Sent, show
from tests.sim.harness import Harness, Violation

TOPICS = {
    "orders": TopicInfo("orders", uuid.UUID(int=101), 2, False, {}),
    "payments": TopicInfo("payments", uuid.UUID(int=102), 1, False, {}),
    "events": TopicInfo("events", uuid.UUID(int=103), 4, False, {}),
}
TOPIC_NAMES = {t.topic_id: name for name, t in TOPICS.items()}
GROUPS = {"sg-a": ("orders",), "sg-b": ("orders", "payments")}
# Consumer-protocol members: (group, subscribed topic names, regex, server assignor). cg-a lives on
# __consumer_offsets-0, cg-b on -1; cg-b's members subscribe to different topics (one by regex), so
# its assignment is heterogeneous; one member of cg-a prefers the range assignor, the others uniform.
CONSUMERS = (
    ("cg-a", ("orders", "events"), None, None),
    ("cg-a", ("orders", "events"), None, "range"),
    ("cg-a", ("events",), None, None),
    ("cg-b", ("events",), None, None),
    ("cg-b", ("events", "payments"), None, None),
    ("cg-b", None, "^(events|payments)$", None),
)
COORDINATOR_PARTITIONS = ((CONSUMER_OFFSETS, 0), (CONSUMER_OFFSETS, 1), (SHARE_GROUP_STATE, 0))
CONFIG = Config.load([
    "offsets.topic.num.partitions=2",
    "share.coordinator.state.topic.num.partitions=1",
    "group.share.initialize.retry.interval.ms=3000",
    # Short enough that a consumer that stops heartbeating for a while is expired within a seed.
    "group.consumer.session.timeout.ms=20000",
    "raygroups.coordinators=2",
    "raygroups.share.coordinators=1",
    "raygroups.partition.leaders=1",
    "raygroups.load.timeout.ms=5000",
])


# -- Ray, simulated ---------------------------------------------------------------------------------


@dataclass(eq=False)
class Call:
    actor: str
    method: str
    args: tuple
    future: asyncio.Future


# What the controller sends an actor. Ray runs one caller's calls to an actor in the order they were
# submitted, so these are delivered in order per actor; everything else (from gateways and
# coordinators, many callers) may be delivered in any order.
CONTROL_METHODS = frozenset({"load", "unload", "update_leadership"})


class Network:
    """Every remote call waits here until the schedule delivers it to its actor."""

    def __init__(self, world: "CoordinatorWorld") -> None:
        self.world = world
        self.pending: list[Call] = []
        self.running: dict[asyncio.Task, Call] = {}

    def send(self, actor: str, method: str, args: tuple) -> asyncio.Future:
        future = self.world.loop.create_future()
        if actor not in self.world.actors:
            future.set_exception(RayActorError())  # sent to an actor that died: Ray fails it at once
        else:
            self.pending.append(Call(actor, method, args, future))
        return future

    def deliverable(self) -> list[Call]:
        """The calls the schedule may deliver next: the controller's oldest to each actor, and the rest."""
        first: set[str] = set()
        out = []
        for call in self.pending:
            if call.method in CONTROL_METHODS:
                if call.actor in first:
                    continue
                first.add(call.actor)
            out.append(call)
        return out

    def deliver(self, call: Call, lose_answer: bool = False) -> None:
        self.pending.remove(call)
        body = self.world.actors.get(call.actor)
        if body is None:
            if not call.future.done():
                call.future.set_exception(RayActorError())
            return
        task = self.world.loop.create_task(getattr(body, call.method)(*call.args))
        self.running[task] = call
        task.add_done_callback(lambda t: self._answered(t, lose_answer))

    def _answered(self, task: asyncio.Task, lose_answer: bool) -> None:
        call = self.running.pop(task)
        if not task.cancelled():
            task.exception()  # retrieved, whether anybody hears of it or not (a lost answer, a caller gone)
        if call.future.done():
            return
        if lose_answer or task.cancelled():
            call.future.set_exception(RayActorError())
        elif task.exception() is not None:
            call.future.set_exception(task.exception())
        else:
            call.future.set_result(task.result())

    def actor_died(self, actor: str) -> None:
        for call in [c for c in self.pending if c.actor == actor]:
            self.pending.remove(call)
            if not call.future.done():  # (a caller that stopped waiting cancelled it)
                call.future.set_exception(RayActorError())
        for task, call in list(self.running.items()):
            if call.actor == actor:
                task.cancel()


class Method:
    def __init__(self, network: Network, actor: str, name: str) -> None:
        self.network, self.actor, self.name = network, actor, name

    def remote(self, *args: Any) -> asyncio.Future:
        return self.network.send(self.actor, self.name, args)


class Handle:
    """An actor handle as the clients and the pool use one: `handle.method.remote(...)`."""

    def __init__(self, network: Network, actor: str) -> None:
        self.actor = actor
        self._network = network

    def __getattr__(self, name: str) -> Method:
        return Method(self._network, self.actor, name)


class IdleLeader:
    """The partition-leader actor the reconciler insists on (at least one): this world has no
    user-topic partitions for it to lead, so it only takes the map."""

    async def update_leadership(self, leadership: Any) -> None:
        pass

    async def load(self, items: list) -> list[str]:
        return []

    async def unload(self, items: list) -> None:
        pass


class SimPool:
    """cluster/control/actor_pool.py's ActorPool over the simulated Ray: the reconciler's way to
    spawn, watch, kill, load and unload actors, and push the map."""

    def __init__(self, world: "CoordinatorWorld") -> None:
        self.world = world

    def spawn(self, kind: ActorKind, name: str) -> Handle:
        self.world.start(kind, name)
        return Handle(self.world.network, name)

    async def info(self, handle: Handle, timeout: float | None = None) -> dict[str, Any]:
        if handle.actor not in self.world.actors:
            raise RayActorError()
        return {"name": handle.actor, "node_id": None, "pid": 0}

    async def watch(self, handle: Handle) -> None:
        await asyncio.shield(self.world.deaths.setdefault(handle.actor, self.world.loop.create_future()))

    def kill(self, handle: Handle) -> None:
        self.world.kill(handle.actor)

    async def load(self, handle: Handle, items: list[tuple[str, int, int]]) -> list[str]:
        return await handle.load.remote(items)

    async def unload(self, handle: Handle, items: list[tuple[str, int]]) -> None:
        await handle.unload.remote(items)

    async def update_leadership(self, handle: Handle, leadership: Any, timeout: float) -> None:
        await asyncio.wait_for(handle.update_leadership.remote(leadership), timeout)


class Controller:
    """The controller's handle as routers use it: `handle.leadership.remote()`, the reconciler's
    current map, at once."""

    def __init__(self, world: "CoordinatorWorld") -> None:
        self.leadership = self
        self.world = world

    def remote(self) -> asyncio.Future:
        future = self.world.loop.create_future()
        future.set_result(self.world.reconciler.snapshot())
        return future


# -- members ------------------------------------------------------------------------------------


@dataclass
class Member:
    name: str
    group: str
    member_id: str
    epoch: int = 0
    assignment: dict[Any, tuple[int, ...]] = field(default_factory=dict)
    outstanding: asyncio.Task | None = None

    def request(self) -> ShareGroupHeartbeatRequest:
        topics = GROUPS[self.group] if self.epoch == 0 else None
        return ShareGroupHeartbeatRequest(self.group, self.member_id, self.epoch, None, topics)


# -- the world ----------------------------------------------------------------------------------


class CoordinatorWorld(Harness):
    def __init__(self, seed: int, members: int = 4) -> None:
        super().__init__(seed)
        self.network = Network(self)
        self.seams = Seams(executor=self.executor, clock=self.clock, wakeups=self.wakeups, log_opener=self.disk.open)
        self.ids = itertools.count()
        self.actors: dict[str, Any] = {}
        self.deaths: dict[str, asyncio.Future] = {}
        self.meta = ClusterMetadata()
        self.meta.topics.update(TOPICS)
        self.meta.leader_epochs.update({tp: 0 for tp in COORDINATOR_PARTITIONS})
        asyncio.set_event_loop(self.loop)
        self.reconciler = Reconciler(SimPool(self), CONFIG, lambda: self.meta, self._bump_epochs, self._event,
                                     clock=self.loop.time)
        self._run(self._start_cluster())
        self.router = Router(Controller(self), self.reconciler.snapshot())
        self.coordinators = CoordinatorClient(self.router, 2)
        self.members = [
            Member(f"m{i}", sorted(GROUPS)[i % len(GROUPS)], str(uuid.UUID(int=1000 + i))) for i in range(members)
        ]
        self.consumers = [
            ConsumerMember(f"c{i}", group, str(uuid.UUID(int=2000 + i)), topics, regex, assignor)
            for i, (group, topics, regex, assignor) in enumerate(CONSUMERS)
        ]
        self._consumers_by_id = {c.member_id: c for c in self.consumers}
        self.counts: Counter[str] = Counter()
        self.config = CONFIG
        self.consumer_checks = ConsumerChecks(self, COORDINATOR_PARTITIONS[:2])
        # (group, topic id, partition, state epoch) -> the share state's create time when first assigned
        self.assigned_at: dict[tuple[str, Any, int, int], int] = {}
        self.state_epochs: dict[SharePartitionKey, int] = {}
        self.reinitialized: set[tuple[str, Any, int, int]] = set()
        self.violation: Violation | None = None
        self._active: dict[tuple[str, int], Any] = {}
        self.loop.create_task(self.reconciler.run())

    def complete_setup_work(self) -> bool:
        """Set-up delivers every remote call, in order, before it completes I/O."""
        if self.network.pending:
            self.network.deliver(self.network.pending[0])
            return True
        return super().complete_setup_work()

    async def _start_cluster(self) -> None:
        async with self.reconciler.lock:
            await self.reconciler.step("startup")

    async def _bump_epochs(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        for tp in partitions:
            self.meta.leader_epochs[tp] += 1
        return {tp: self.meta.leader_epochs[tp] for tp in partitions}

    def _event(self, kind: str, message: str) -> None:
        if kind in ("actor-died", "failover", "load-failed", "load-retried", "unavailable"):
            # (without the wall-clock figures some messages carry: a seed's trace replays exactly)
            self.trace.append(f"  controller {kind}: {re.sub(r' in [0-9]+ ms', '', message)}")

    # -- the actors ------------------------------------------------------------------------------

    def start(self, kind: ActorKind, name: str) -> None:
        if kind is ActorKind.SHARE_COORDINATOR:
            body: Any = ShareCoordinator(name, CONFIG, "/sim", Controller(self), self.seams)
        elif kind is ActorKind.GROUP_COORDINATOR:
            body = GroupCoordinator(name, CONFIG, "/sim", Controller(self), self.seams,
                                    new_member_id=lambda prefix: f"{prefix}-{next(self.ids)}")
        else:
            body = IdleLeader()
        self.actors[name] = body

    def kill(self, name: str) -> None:
        self.trace.append(f"kill {name}")
        body = self.actors.pop(name)
        self.network.actor_died(name)
        host = getattr(body, "host", None)
        if host is not None:
            # The process is gone: nothing of it runs on. Its timers (on the world's wakeups), a load
            # or a batch still waiting on the executor would otherwise go on, and write to the
            # partition's log under its successor (a session expiry a dead leader fired did).
            for partition in host.runtime.partitions.values():
                if partition.status is not PartitionStatus.CLOSED:
                    partition.move_to(PartitionStatus.CLOSED)
                partition.timers.cancel_all()
                partition.queue.pause()
                gone = NotCoordinator(f"{name} died")
                for pending in partition.queue.take_all():  # (else their callers would wait forever)
                    if pending.future is not None and not pending.future.done():
                        pending.future.set_exception(gone)
                partition.fail_parked(gone)
                if partition.log is not None:
                    partition.log.close()  # an append still queued on the executor writes nothing
            host.runtime.partitions.clear()
        self.deaths.setdefault(name, self.loop.create_future())
        if not self.deaths[name].done():
            self.deaths[name].set_result(None)

    def move(self, tp: tuple[str, int], to: str) -> None:
        self.trace.append(f"move {tp[0]}-{tp[1]} to {to}")

        async def go() -> None:
            async with self.reconciler.lock:
                if self.reconciler.leaders.get(tp) != to and to in self.actors:
                    await self.reconciler.move({tp: to}, reason="operator", cause=Cause.OPERATOR_MOVE)

        self.loop.create_task(go())

    def _coordinators(self, kind: ActorKind) -> list[str]:
        return sorted(n for n, e in self.reconciler.actors.items() if e.kind is kind and e.ready and n in self.actors)

    # -- the schedule ------------------------------------------------------------------------------

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.35:
            member = self.rng.choice(self.members + self.consumers)
            if isinstance(member, ConsumerMember):
                self._consumer_step(member)
            else:
                self._member_step(member)
        elif roll < 0.65 and self.network.pending:
            call = self.rng.choice(self.network.deliverable())
            lose = self.rng.random() < 0.03
            self.trace.append(f"deliver {call.method}{_summary(call)} to {call.actor}{' (answer lost)' if lose else ''}")
            self.network.deliver(call, lose_answer=lose)
        elif roll < 0.82:
            self.trace.append("io")
            self.executor.run_next()
        elif roll < 0.91:
            self.advance(self.rng.choice((self.rng.randint(50, 1000), self.rng.randint(2000, 6000))))
        elif roll < 0.94:
            self.trace.append("fail next append")
            self.disk.fail_appends += 1
        elif roll < 0.97:
            live = self._coordinators(ActorKind.GROUP_COORDINATOR) + self._coordinators(ActorKind.SHARE_COORDINATOR)
            if live:
                self.kill(self.rng.choice(live))
        else:
            tp = (CONSUMER_OFFSETS, self.rng.randrange(2))
            others = [g for g in self._coordinators(ActorKind.GROUP_COORDINATOR) if g != self.reconciler.leaders.get(tp)]
            if others:
                self.move(tp, self.rng.choice(others))
        self.settle()

    def _member_step(self, member: Member) -> None:
        if member.outstanding is not None:
            return
        request = member.request()
        self.trace.append(f"{member.name} heartbeat epoch {request.member_epoch}")
        task = self.loop.create_task(self.coordinators.group(CoordinatorOp.SHARE_HEARTBEAT, member.group, request))
        member.outstanding = task
        task.add_done_callback(lambda t, m=member: self._answered(m, t))

    def _answered(self, member: Member, task: asyncio.Task) -> None:
        member.outstanding = None
        if task.cancelled():
            return
        if task.exception() is not None:  # an operation's own failure is a bug (a batch shares it)
            self._fail(f"{member.name}'s heartbeat raised {task.exception()!r}")
            return
        outcome = task.result()
        if isinstance(outcome, Failed):
            self.trace.append(f"  {member.name}: {outcome.error_code.name}")
            return
        assert isinstance(outcome, ShareHeartbeatOutcome), outcome
        response = outcome.response
        self.trace.append(f"  {member.name}: {response.error_code.name} epoch {response.member_epoch}")
        if response.error_code in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            member.epoch, member.assignment = 0, {}  # rejoin with the same id, as the client does
            return
        if response.error_code != ErrorCode.none:
            return
        if response.member_epoch < member.epoch:
            self._fail(f"{member.name}'s epoch went back from {member.epoch} to {response.member_epoch}")
        member.epoch = response.member_epoch
        if response.assignment is not None:
            member.assignment = dict(response.assignment)
            self._assigned(member)

    # -- consumer-protocol members (consumer_members.py) --------------------------------------------

    def _consumer_step(self, member: ConsumerMember) -> None:
        if member.outstanding is not None:
            return
        now = self.clock.now_ms()
        if member.paused_until > now:
            return
        rng = self.rng
        if member.phase is Phase.LEFT:
            if rng.random() < 0.7:
                return
            member.phase = Phase.JOINING
        if member.phase is Phase.JOINING:
            sent = member.join()
        else:
            roll = rng.random()
            if roll < 0.03:
                sent = member.leave()
            elif roll < 0.06:
                pause = rng.randint(10_000, 40_000)
                member.paused_until = now + pause
                self.trace.append(f"{member.name} stops heartbeating for {pause} ms")
                self.counts["consumer pauses"] += 1
                return
            elif member.target is not None and roll < 0.8:
                doubtful = member.doubtful
                revoked, added = member.reconcile()
                self.trace.append(
                    f"{member.name} reconciles: revokes {show(revoked, TOPIC_NAMES)}, takes {show(added, TOPIC_NAMES)}"
                    f"{' (unconfirmed: a heartbeat since was not answered)' if doubtful and added else ''}"
                )
                if revoked:
                    self.counts["consumer revocations"] += 1
                sent = member.heartbeat()
            elif member.epoch >= 1 and roll > 0.99:
                sent = member.heartbeat(stale=True)
                self.trace.append(f"{member.name} lost track of its epoch")
            else:
                if member.target is not None:
                    self.trace.append(f"{member.name} is still reconciling")
                sent = member.heartbeat()
        lose = sent.kind != "leave" and rng.random() < 0.06
        self.trace.append(
            f"{member.name} {sent.kind} epoch {sent.request.member_epoch} owned {show(sent.owned, TOPIC_NAMES)}"
            f"{' (full)' if sent.request.rebalance_timeout_ms != -1 and sent.kind != 'join' else ''}"
            f"{' (its answer will be lost)' if lose else ''}"
        )
        task = self.loop.create_task(self.coordinators.group(CoordinatorOp.CONSUMER_HEARTBEAT, member.group, sent.request))
        member.outstanding = task
        task.add_done_callback(lambda t, m=member, s=sent, lost=lose: self._consumer_answered(m, s, lost, t))

    def _consumer_answered(self, member: ConsumerMember, sent: Sent, lost: bool, task: asyncio.Task) -> None:
        member.outstanding = None
        if task.cancelled():
            return
        if task.exception() is not None:
            member.on_failure(sent)
            self._fail(f"{member.name}'s {sent.kind} raised {task.exception()!r}")
            return
        outcome = task.result()
        if isinstance(outcome, Failed):
            self.trace.append(f"  {member.name}: {outcome.error_code.name}")
            member.on_failure(sent)
            return
        assert isinstance(outcome, ConsumerGroupHeartbeatResponse), outcome
        if lost:
            self.trace.append(f"  {member.name}: answer lost ({outcome.error_code.name} epoch {outcome.member_epoch})")
            self.counts["consumer answers lost"] += 1
            member.on_failure(sent)
            return
        told = None if outcome.assignment is None else frozenset((t, p) for t, ps in outcome.assignment for p in ps)
        self.trace.append(
            f"  {member.name}: {outcome.error_code.name} epoch {outcome.member_epoch}"
            f"{'' if told is None else ' assignment ' + show(told, TOPIC_NAMES)}"
        )
        problem = member.on_answer(sent, outcome)
        if problem is not None:
            self._fail(problem)

    def consumer(self, member_id: str) -> ConsumerMember | None:
        return self._consumers_by_id.get(member_id)

    def consumer_name(self, member_id: str) -> str:
        client = self._consumers_by_id.get(member_id)
        return member_id if client is None else client.name

    def partition_of(self, group_id: str) -> tuple[str, int]:
        return (CONSUMER_OFFSETS, group_partition(group_id, 2))

    def active_partition(self, tp: tuple[str, int]) -> Any:
        return self._active.get(tp)

    def show(self, partitions: frozenset) -> str:
        return show(partitions, TOPIC_NAMES)

    def show_tp(self, partition: tuple[Any, int]) -> str:
        return show(frozenset((partition,)), TOPIC_NAMES)

    def coverage(self) -> Counter[str]:
        """What this seed reached, by name (the coverage test and the soak's summary count them)."""
        out = Counter(self.counts)
        out.update(self.consumer_checks.counts)
        for client in self.consumers:
            out.update({f"consumer {what}": n for what, n in client.counts.items()})
        return out

    def _assigned(self, member: Member) -> None:
        """assigned ⇒ initialized, now; remember each newly assigned partition's share state."""
        shard = self._share_shard()
        for topic_id, partitions in member.assignment.items():
            for p in partitions:
                state = None if shard is None else shard.states.get(SharePartitionKey(member.group, topic_id, p))
                if shard is not None and state is None:
                    self._fail(f"{member.name} was assigned {topic_id}-{p} of {member.group}, which has no share state")
                    continue
                if state is not None:
                    self.assigned_at.setdefault((member.group, topic_id, p, state.state_epoch), state.create_timestamp)

    def _share_shard(self) -> Any:
        body = self.actors.get(self.reconciler.leaders.get((SHARE_GROUP_STATE, 0), ""))
        partition = None if body is None else body.host.runtime.partitions.get((SHARE_GROUP_STATE, 0))
        if partition is None or partition.status.value != "active":
            return None
        return partition.shard

    def _fail(self, message: str) -> None:
        if self.violation is None:
            self.violation = Violation(message)

    def check(self) -> None:
        if self.violation is not None:
            raise self.violation
        active: dict[tuple[str, int], str] = {}
        self._active = {}
        for name, body in self.actors.items():
            host = getattr(body, "host", None)
            for tp, partition in ({} if host is None else host.runtime.partitions).items():
                if partition.status.value == "active":
                    if tp in active:
                        raise Violation(f"{tp[0]}-{tp[1]} is active on {active[tp]} and {name} at once")
                    active[tp] = name
                    self._active[tp] = partition
        self.consumer_checks.check()
        shard = self._share_shard()
        if shard is None or shard.touched.open:  # judge the durable state, not a batch being written
            return
        for key, state in shard.states.items():
            if state.state_epoch < self.state_epochs.get(key, state.state_epoch):
                raise Violation(f"share state of {key} went back from state epoch {self.state_epochs[key]} to {state.state_epoch}")
            self.state_epochs[key] = state.state_epoch
        for (group, topic_id, p, state_epoch), created in self.assigned_at.items():
            state = shard.states.get(SharePartitionKey(group, topic_id, p))
            if state is not None and state.state_epoch == state_epoch and state.create_timestamp != created:
                self.reinitialized.add((group, topic_id, p, state_epoch))

    def assigned(self) -> int:
        return sum(len(ps) for m in self.members for ps in m.assignment.values())

    def close(self) -> None:
        self.reconciler.stopping = True
        super().close()


def _summary(call: Call) -> str:
    """What a delivered call holds, for the trace: a batch's operations (and share-state keys), the
    partitions of a load or an unload."""
    if call.method in ("load", "unload"):
        return " " + ", ".join("-".join(str(x) for x in item).replace(CONSUMER_OFFSETS, "co").replace(SHARE_GROUP_STATE, "sgs")
                               for item in call.args[0])
    if call.method != "execute" or not call.args:
        return ""
    items = unpack(call.args[0])
    parts = []
    for item in items:
        request = item.request
        key = f" {request.group_id}/{request.topic_id.int}-{request.partition}@{getattr(request, 'state_epoch', '')}" \
            if hasattr(request, "topic_id") else ""
        if item.op is CoordinatorOp.CONSUMER_HEARTBEAT:
            key = f" {request.group_id}/c{uuid.UUID(request.member_id).int - 2000}@{request.member_epoch}"
        parts.append(f"{item.op.name}{key}")
    return f"[{', '.join(parts)}]"


def run(seed: int, steps: int = 400) -> CoordinatorWorld:
    """Run one seed; raise Violation (with the seed and the last steps) on the first broken invariant."""
    return harness.run(lambda: CoordinatorWorld(seed), seed, steps, "coordinator ")
