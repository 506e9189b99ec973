"""One replicated partition under faults: three replicas on four nodes, a controller and a network,
on fake time.

The replicas run the real state machines (cluster/replication: LeaderState, FollowerState, the
epoch cache) and the controller the real registration changes (reconcile, lost_log,
alter_partition); what is simulated is what hosts them: each replica's log is a list of
(leader epoch, record id) kept by offset, as durable as the log's fsync makes it (a crash loses
nothing; a wiped data directory loses everything), and every message between them travels a
network that delivers in any order, delays, drops and duplicates.

The partition starts on replicas 0, 1 and 2 of four nodes; reassignments move it among them
(KIP-455: the new replicas catch up and join the ISR, then the leaving ones delete their logs).
The seed schedules, one event a step: produces (acks=all) to whichever replica believes it
leads, follower fetches and their answers, ISR changes (AlterPartition) and their answers, the
controller's reaction to replicas it sees come and go, metadata reaching each replica, clock
jumps, crashes and restarts (some with the data directory wiped), pauses (a paused replica keeps
its state and its mail, and the controller fences it once its session lapses: a zombie leader),
and isolations (a replica cut off from the others but not from the controller).

Kafka's invariants, after every step:
- no committed record is lost: what any leader exposed below its high watermark is one log
  (`committed`), every acks=all write answered as written is in it, and every replica of the
  controller's ISR holds all of it;
- the high watermark the registered leader exposes never goes back;
- no two replicas accept writes for one leader epoch;
- a replica's leader epochs never decrease along its log.
At the end (`heal_and_converge`) every fault is undone and the replicas must converge: one leader,
every replica in the ISR holding the same log, every acknowledged write in it once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from cluster.replication.epochs import LeaderEpochCache
from cluster.replication.follower import FetchPosition, FollowerState
from cluster.replication.leader import FetchVerdict, LeaderState
from cluster.replication.registration import (
    NO_LEADER,
    AlterAnswer,
    AlterPartition,
    PartitionRegistration,
    answer_alter_partition,
    change_reassignment,
    reconcile,
    registered_again,
    restarted,
)
from tests.sim import harness
from tests.sim.harness import Harness, Violation
from tests.sim.network import CONTROLLER, Message, Network

NODES = (0, 1, 2, 3)  # where replicas may be: a reassignment moves the partition among them
REPLICAS = (0, 1, 2)  # where it starts
MIN_INSYNC_REPLICAS = 2
LAG_TIME_MAX_MS = 300
SESSION_TIMEOUT_MS = 450
FETCH_RETRY_MS = 100  # a fetch without an answer (dropped, or its leader paused) is sent again
ALTER_RETRY_MS = 100
MAX_FETCH_RECORDS = 8


@dataclass
class Replica:
    id: int
    log: list[tuple[int, int]] = field(default_factory=list)  # by offset: (leader epoch, record id)
    up: bool = True
    paused_since: int | None = None
    isolated_until: int = 0
    directory: int = 0  # changes when the data directory is wiped (KIP-858's directory id)
    incarnation: int = 0  # changes on every restart (Kafka's broker epoch)
    known_partition_epoch: int = -1
    leader: LeaderState | None = None
    follower: FollowerState | None = None
    fetch_sent: tuple[FetchPosition, int] | None = None  # in flight: what and when
    alter_sent_ms: int = 0
    # acks=all writes waiting for the high watermark: (end offset, record ids, leader epoch)
    waiting: list[tuple[int, tuple[int, ...], int]] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.up and self.paused_since is None

    def epochs(self) -> LeaderEpochCache:
        return LeaderEpochCache.from_batches((epoch, offset) for offset, (epoch, _) in enumerate(self.log))

    def high_watermark(self) -> int:
        role = self.leader or self.follower
        return role.high_watermark if role is not None else 0


class ReplicationWorld(Harness):
    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.replicas = {r: Replica(r) for r in NODES}
        self.registration = PartitionRegistration.new(REPLICAS)
        self.controller_alive: dict[int, int] = {r: 0 for r in NODES}  # replica -> its incarnation
        self.directories = {r: 0 for r in NODES}  # what the controller last heard from each
        self.last_alter: AlterAnswer | None = None
        self.network = Network(self.rng)
        self.record_ids = itertools.count()
        self.committed: list[tuple[int, int]] = []
        self.registered_hw = 0  # the most the registered leader has exposed
        self.acked: dict[int, int] = {}  # record id -> the offset its leader answered it at
        self.failed_writes = 0
        self.epoch_writer: dict[int, int] = {}
        self.counts: dict[str, int] = {}
        for replica in self.replicas.values():
            self._apply_metadata(replica)

    def now(self) -> int:
        return self.clock.now_ms()

    def advance(self, ms: int) -> None:
        # No event loop here: every replica's timer is a step the schedule takes (tick, send_fetch).
        self.trace.append(f"clock +{ms}")
        self.clock.advance(ms)

    def note(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # -- the schedule ----------------------------------------------------------------------------

    # Each seed draws its own mix of events around these weights (FoundationDB's "buggify" in
    # small): slow metadata and a lossy network make zombie leaders and answers lost after they
    # took effect common in some seeds, rare in others.
    WEIGHTS = {"produce": 15, "deliver": 35, "fetch": 20, "tick": 6, "clock": 8, "controller": 5,
               "metadata": 7, "drop": 1.5, "duplicate": 1.5, "recover": 1.5, "fault": 1, "reassign": 0.5}
    SPREAD = {"metadata": (0.1, 1.0), "drop": (0.3, 4.0), "duplicate": (0.0, 3.0), "controller": (0.3, 1.5), "fault": (0.5, 2.0),
              "clock": (0.5, 2.0), "reassign": (0.0, 2.0)}

    def _draw_weights(self) -> tuple[list[str], list[float]]:
        weights = dict(self.WEIGHTS)
        for what, (low, high) in self.SPREAD.items():
            weights[what] *= self.rng.uniform(low, high)
        return list(weights), list(weights.values())

    def step(self) -> None:
        if not hasattr(self, "_events"):
            self._events, self._weights = self._draw_weights()
        event = self.rng.choices(self._events, self._weights)[0]
        if event == "produce":
            self.produce(self.rng.choice(NODES))
        elif event == "deliver":
            self.deliver()
        elif event == "fetch":
            self.send_fetch(self.rng.choice(NODES))
        elif event == "tick":
            self.tick(self.rng.choice(NODES))
        elif event == "clock":
            self.advance(self.rng.choice((1, 2, 5, 5, 10, 20, 50, 400)))
        elif event == "controller":
            self.controller_tick()
        elif event == "metadata":
            self.metadata(self.rng.choice(NODES))
        elif event == "drop":
            self.drop()
        elif event == "duplicate":
            self.duplicate()
        elif event == "recover":
            self.recover()
        elif event == "reassign":
            self.reassign()
        else:
            self.fault()
        self.answer_acks()

    def fault(self) -> None:
        """Crash, pause or isolate one replica (at most two down at once)."""
        r = self.replicas[self.rng.choice(NODES)]
        if not r.running:
            return
        roll = self.rng.random()
        down = sum(1 for x in self.replicas.values() if not x.running)
        if roll < 0.35 and down < 2:
            self.crash(r)
        elif roll < 0.7 and down < 2:
            self.trace.append(f"pause {r.id}")
            r.paused_since = self.now()
        elif r.isolated_until <= self.now():
            r.isolated_until = self.now() + self.rng.choice((100, 300, 600))
            self.trace.append(f"isolate {r.id} until +{r.isolated_until - self.now()}")

    def recover(self) -> None:
        """Restart a crashed replica (its data directory wiped, sometimes, when it is out of the
        ISR: wiping the last copy of committed records is a loss no protocol undoes) or resume a
        paused one."""
        down = [r for r in self.replicas.values() if not r.running]
        if not down:
            return
        r = self.rng.choice(down)
        if not r.up:
            self.restart(r, wipe=r.id not in self.registration.isr and self.rng.random() < 0.4)
        else:
            self.trace.append(f"resume {r.id}")
            r.paused_since = None

    # -- replicas --------------------------------------------------------------------------------

    def crash(self, r: Replica) -> None:
        self.trace.append(f"crash {r.id} (log end {len(r.log)})")
        r.up = False
        r.leader = r.follower = None
        self._unanswered(r)  # its producers see the connection drop: not answered, not acknowledged
        r.fetch_sent = None
        r.known_partition_epoch = -1
        self.network.forget(r.id)

    def restart(self, r: Replica, wipe: bool) -> None:
        if wipe:
            r.log = []
            r.directory += 1
            self.note("wiped")
        self.trace.append(f"restart {r.id}{' with its data directory wiped' if wipe else ''} (log end {len(r.log)})")
        r.up = True
        r.paused_since = None
        r.incarnation += 1
        self.controller_register(r)

    def controller_register(self, r: Replica) -> None:
        """A replica that starts registers with the controller before it does anything else (a
        Kafka broker's registration; in raygroups the controller starts the actor): its new
        incarnation, and whether it still has its data directory. Until then the controller
        judges AlterPartition by what it knew, which must not admit the new life on the old
        one's fetches."""
        log_lost = self.directories[r.id] != r.directory
        self.directories[r.id] = r.directory
        self.controller_alive = {**self.controller_alive, r.id: r.incarnation}
        reg = registered_again(self.registration, r.id, self.controller_alive, log_lost)
        self._register(reg, f"{r.id} registers (incarnation {r.incarnation})")

    def produce(self, rid: int) -> None:
        r = self.replicas[rid]
        if not r.running or r.leader is None:
            return
        error = r.leader.check_append(acks_all=True)
        if error is not None:
            self.trace.append(f"produce to {rid}: {error.name}")
            self.failed_writes += 1
            self.note("refused for too small an ISR")
            return
        epoch = r.leader.leader_epoch
        writer = self.epoch_writer.setdefault(epoch, rid)
        if writer != rid:
            raise Violation(f"replicas {writer} and {rid} both accepted writes for leader epoch {epoch}")
        ids = tuple(next(self.record_ids) for _ in range(self.rng.randint(1, 3)))
        r.log.extend((epoch, i) for i in ids)
        r.leader.appended(len(r.log), self.now())
        r.waiting.append((len(r.log), ids, epoch))
        self.trace.append(f"produce {ids} to {rid} (epoch {epoch}) -> log end {len(r.log)}")

    def answer_acks(self) -> None:
        for r in self.replicas.values():
            if not r.running or r.leader is None:
                continue
            still = []
            for end, ids, epoch in r.waiting:
                answer = r.leader.acks_all(end)
                if answer is None:
                    still.append((end, ids, epoch))
                elif answer is ErrorCode.none:
                    for k, i in enumerate(ids):
                        self.acked[i] = end - len(ids) + k
                    self.trace.append(f"ack {ids} from {r.id}")
                    self.note("acknowledged writes")
                else:
                    self.trace.append(f"ack {ids} from {r.id}: {answer.name}")
                    self.note("answered NOT_ENOUGH_REPLICAS_AFTER_APPEND")
            r.waiting = still
            self._observe(r)

    def send_fetch(self, rid: int) -> None:
        r = self.replicas[rid]
        if not r.running or r.follower is None or r.follower.leader == NO_LEADER:
            return
        if r.fetch_sent is not None and self.now() - r.fetch_sent[1] < FETCH_RETRY_MS:
            return
        position = r.follower.start_fetch()
        r.fetch_sent = (position, self.now())
        self.send(Message(rid, r.follower.leader, "fetch", (position, r.incarnation)))

    def tick(self, rid: int) -> None:
        """The leader's ISR timer: drop lagging members, or send the pending change again."""
        r = self.replicas[rid]
        if not r.running or r.leader is None:
            return
        request = r.leader.maybe_shrink_isr(self.now())
        if request is None and r.leader.pending is not None and self.now() - r.alter_sent_ms >= ALTER_RETRY_MS:
            request = r.leader.pending
        self.send_alter(r, request)

    def send_alter(self, r: Replica, request: AlterPartition | None) -> None:
        if request is not None:
            r.alter_sent_ms = self.now()
            self.trace.append(f"{r.id} proposes ISR {request.new_isr} (partition epoch {request.partition_epoch})")
            self.send(Message(r.id, CONTROLLER, "alter", (request,)))

    # -- the network -----------------------------------------------------------------------------

    def send(self, message: Message) -> None:
        self.network.send(message)

    def deliver(self) -> None:
        m = self.network.take(lambda r: self.replicas[r].running)
        if m is None:
            return
        if self.network.cut(m, lambda r: self.replicas[r].isolated_until, self.now()):
            self.trace.append(f"isolation drops {m.kind} {m.src}->{m.dst}")
            return
        if m.dst == CONTROLLER:
            self.controller_alter(m.src, *m.body)
        elif m.kind == "fetch":
            self.leader_fetch(self.replicas[m.dst], m.src, *m.body)
        elif m.kind == "fetched":
            self.follower_fetched(self.replicas[m.dst], m.src, *m.body)
        elif m.kind == "altered":
            r = self.replicas[m.dst]
            if r.leader is not None:
                r.leader.isr_change_answered(*m.body, self.now())

    def drop(self) -> None:
        m = self.network.drop()
        if m is not None:
            self.trace.append(f"drop {m.kind} {m.src}->{m.dst}")

    def duplicate(self) -> None:
        """A message delivered twice (a call retried after its answer was lost, as Ray may)."""
        m = self.network.duplicate()
        if m is not None:
            self.trace.append(f"duplicate {m.kind} {m.src}->{m.dst}")

    def leader_fetch(self, r: Replica, follower: int, position: FetchPosition, incarnation: int) -> None:
        if r.leader is None:
            verdict, records = FetchVerdict(ErrorCode.not_leader_or_follower), []
        else:
            verdict = r.leader.follower_fetch(
                follower, incarnation, position.current_leader_epoch, position.fetch_offset,
                position.last_fetched_epoch, self.now(),
            )
            start = position.fetch_offset
            records = r.log[start:start + MAX_FETCH_RECORDS] if verdict.read else []
        self.send(Message(r.id, follower, "fetched", (position, verdict, records)))
        if verdict.read:
            self.send_alter(r, r.leader.maybe_expand_isr(follower))

    def follower_fetched(self, r: Replica, leader: int, position: FetchPosition, verdict: FetchVerdict, records) -> None:
        f = r.follower
        if f is None or leader != f.leader or not f.take(position):
            return
        r.fetch_sent = None
        if verdict.diverging_epoch is not None:
            cut = f.truncation_offset(*verdict.diverging_epoch)
            self.trace.append(f"{r.id} truncates {len(r.log)} -> {cut} (diverging {verdict.diverging_epoch})")
            del r.log[cut:]
            f.truncated(cut)
            self.note("truncations")
        elif verdict.error is ErrorCode.offset_out_of_range:
            cut = min(f.high_watermark, len(r.log))
            del r.log[cut:]
            f.truncated(cut)
        elif verdict.error is ErrorCode.none:
            start = len(r.log)
            r.log.extend(records)
            f.appended([(epoch, start + k, start + k) for k, (epoch, _) in enumerate(records)], verdict.high_watermark)
        self._check_epochs(r)
        if verdict.error is ErrorCode.none:
            self.send_fetch(r.id)  # the fetcher's loop: the next fetch at once

    # -- the controller --------------------------------------------------------------------------

    def controller_alter(self, leader: int, request: AlterPartition) -> None:
        reg, answer = answer_alter_partition(self.registration, request, self.controller_alive, self.last_alter)
        self.last_alter = answer
        self._register(reg, f"AlterPartition from {leader}")
        self.send(Message(CONTROLLER, leader, "altered", (request, answer.error, answer.registration)))

    def controller_tick(self) -> None:
        """The controller's view of which replicas live: a crashed one at once (Ray reports the
        actor dead), a paused one once its session lapsed (a restarted one registered itself)."""
        now = self.now()
        reg = self.registration
        alive = {
            r.id: r.incarnation for r in self.replicas.values()
            if r.up and (r.paused_since is None or now - r.paused_since < SESSION_TIMEOUT_MS)
        }
        back = [r for r, incarnation in alive.items() if self.controller_alive.get(r, incarnation) != incarnation]
        self.controller_alive = alive
        self._register(reconcile(restarted(reg, back, alive), alive), f"controller sees {sorted(alive)} alive")

    def reassign(self) -> None:
        """An operator (or the balancer) moves the partition to three of the nodes, in some order;
        mid-move, an operator may cancel it or send a new target (AlterPartitionReassignments)."""
        if self.registration.reassigning and self.rng.random() < 0.3:
            reg, error = change_reassignment(self.registration, None, self.controller_alive)
            if error is ErrorCode.none:
                self.note("reassignments cancelled")
            else:
                self.note("cancels refused (only the added replicas in sync)")
            self._register(reg, "cancel the move")
            return
        target = tuple(self.rng.sample(NODES, len(REPLICAS)))
        moving = self.registration.reassigning
        reg, error = change_reassignment(self.registration, target, self.controller_alive)
        if error is ErrorCode.none and reg != self.registration:
            self.note("reassignments changed mid-move" if moving else "reassignments")
        self._register(reg, f"reassign to {target}")

    def _register(self, reg: PartitionRegistration, why: str) -> None:
        if reg != self.registration:
            self.trace.append(f"{why}: leader {reg.leader} epoch {reg.leader_epoch}, ISR {reg.isr} "
                              f"(partition epoch {reg.partition_epoch})")
            if reg.leader_epoch != self.registration.leader_epoch:
                self.note("elections")
            if self.registration.reassigning and not reg.reassigning:
                self.note("reassignments completed")
            self.registration = reg

    def metadata(self, rid: int) -> None:
        r = self.replicas[rid]
        if r.running and r.known_partition_epoch < self.registration.partition_epoch:
            self._apply_metadata(r)

    def _apply_metadata(self, r: Replica) -> None:
        """A replica learns the latest registration (KRaft's metadata log reaches every broker in order)."""
        reg = self.registration
        r.known_partition_epoch = reg.partition_epoch
        if r.id not in reg.replicas:
            if r.leader is not None or r.follower is not None or r.log:
                # Kafka's StopReplica with deletion: a replica that left the assignment deletes its log.
                self.trace.append(f"{r.id} leaves the assignment and deletes its log (end {len(r.log)})")
                self._unanswered(r)
                r.leader, r.follower, r.fetch_sent, r.log = None, None, None, []
            return
        if reg.leader == r.id:
            if r.leader is not None and r.leader.metadata(reg, self.now()):
                return
            high_watermark = r.high_watermark()
            r.leader, r.follower, r.fetch_sent = None, None, None
            self._unanswered(r)  # written under an older epoch: their producers time out and retry
            r.leader = LeaderState(r.id, reg, r.epochs(), 0, len(r.log), high_watermark, self.now(),
                                   MIN_INSYNC_REPLICAS, LAG_TIME_MAX_MS)
            self.trace.append(f"{r.id} leads epoch {reg.leader_epoch} from {len(r.log)}")
        elif reg.leader == NO_LEADER:
            if r.leader is not None or r.follower is not None:
                high_watermark = r.high_watermark()
                self._unanswered(r)
                r.leader, r.fetch_sent = None, None
                r.follower = FollowerState(r.id, NO_LEADER, reg.leader_epoch, r.epochs(), 0, len(r.log), high_watermark)
        elif r.follower is None or r.follower.leader_epoch != reg.leader_epoch:
            high_watermark = r.high_watermark()
            self._unanswered(r)
            r.leader, r.fetch_sent = None, None
            r.follower = FollowerState(r.id, reg.leader, reg.leader_epoch, r.epochs(), 0, len(r.log), high_watermark)

    def _unanswered(self, r: Replica) -> None:
        """Writes r will never answer (it crashed, or leads no more): their producers time out."""
        if r.waiting:
            self.note("writes never answered")
            r.waiting = []

    # -- invariants ------------------------------------------------------------------------------

    def _observe(self, r: Replica) -> None:
        """What a leader exposes below its high watermark is committed: one log, never shorter."""
        leader = r.leader
        hw = leader.visible_high_watermark if leader is not None else None
        if hw is None:
            return
        if r.log[: min(hw, len(self.committed))] != self.committed[:hw]:
            raise Violation(f"leader {r.id} (epoch {leader.leader_epoch}) exposes a log below its high "
                            f"watermark {hw} that differs from what was committed")
        if hw > len(self.committed):
            self.committed = r.log[:hw]
        reg = self.registration
        if reg.leader == r.id and reg.leader_epoch == leader.leader_epoch:
            if hw < self.registered_hw:
                raise Violation(f"leader {r.id}'s high watermark went back: {hw} < {self.registered_hw}")
            self.registered_hw = hw

    def _check_epochs(self, r: Replica) -> None:
        epochs = [epoch for epoch, _ in r.log]
        if epochs != sorted(epochs):
            raise Violation(f"replica {r.id}'s leader epochs decrease along its log")

    def check(self) -> None:
        committed_ids = {i: offset for offset, (_, i) in enumerate(self.committed)}
        for i, offset in self.acked.items():
            if committed_ids.get(i) != offset:
                raise Violation(f"acknowledged record {i} (offset {offset}) is not in the committed log")
        for rid in self.registration.isr:
            # Every member of the ISR holds everything committed: it is what an election may pick.
            r = self.replicas[rid]
            if r.log[: len(self.committed)] != self.committed:
                raise Violation(f"replica {rid} of the ISR {self.registration.isr} lacks or disagrees with "
                                f"the committed log ({len(r.log)} of {len(self.committed)} records)")
        for r in self.replicas.values():
            self._check_epochs(r)

    # -- the end ---------------------------------------------------------------------------------

    def heal_and_converge(self, steps: int = 4000) -> None:
        """Undo every fault, then run only the healthy events until the replicas agree."""
        self.trace.append("heal")
        for r in self.replicas.values():
            if not r.up:
                self.restart(r, wipe=False)
            r.paused_since = None
            r.isolated_until = 0
        for _ in range(steps):
            roll = self.rng.random()
            if roll < 0.5:
                self.deliver()
            elif roll < 0.7:
                self.send_fetch(self.rng.choice(NODES))
            elif roll < 0.8:
                self.tick(self.rng.choice(NODES))
            elif roll < 0.87:
                self.controller_tick()
            elif roll < 0.95:
                self.metadata(self.rng.choice(NODES))
            else:
                self.advance(30)
            self.answer_acks()
            self.check()
            if self.converged():
                break
        else:
            raise Violation(f"no convergence after healing: registration {self.registration}, "
                            f"log ends {[len(r.log) for r in self.replicas.values()]}")
        leader = self.replicas[self.registration.leader]
        ids = [i for _, i in leader.log]
        if len(ids) != len(set(ids)):
            raise Violation("a record is in the converged log twice")
        missing = set(self.acked) - set(ids)
        if missing:
            raise Violation(f"acknowledged records {sorted(missing)[:5]} are not in the converged log")

    def converged(self) -> bool:
        reg = self.registration
        if reg.leader == NO_LEADER or reg.reassigning or set(reg.isr) != set(reg.replicas):
            return False
        leader = self.replicas[reg.leader]
        if leader.leader is None or leader.leader.leader_epoch != reg.leader_epoch:
            return False
        if leader.leader.visible_high_watermark != len(leader.log) or leader.leader.pending is not None:
            return False
        return all(
            self.replicas[r].log == leader.log and self.replicas[r].known_partition_epoch == reg.partition_epoch
            for r in reg.replicas
        )


def run(seed: int, steps: int = 600) -> ReplicationWorld:
    return harness.run(lambda: ReplicationWorld(seed), seed, steps, "replication ", ReplicationWorld.heal_and_converge)
