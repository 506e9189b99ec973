"""One replicated partition on three LogReplicas over real PartitionLogs, under faults.

replication_world.py checks the replication state machines on logs that are Python lists; this
world runs the layer that carries real data: LogReplica over a PartitionLog in a directory per
replica, so every produce is a record batch appended under the leader's epoch, every follower
append goes through `append_replicated` (CRC, offsets, leader epochs kept), every divergence
through `truncate_replica`, and every restart through the log's recovery and the replica's
leader-epoch checkpoint. A crash drops the replica's objects without closing anything (what the
page cache holds survives, as it does when only the process dies); a wipe removes its directory.
The controller and the network are replication_world's: the same registration functions, a
network that reorders, drops and duplicates.

The invariants are the same, read from the logs' bytes: what a leader exposed below its high
watermark is one sequence of records (`committed`), every acknowledged record is in it, every ISR
member's log begins with it, leader epochs never decrease along a log; and once healed the three
logs hold the same batches.
"""

from __future__ import annotations

import itertools
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from cluster import recordbatch
from cluster.log import FlushPolicy, LogConfig, PartitionLog
from cluster.replication.log_replica import LogReplica, ReplicationConfig
from cluster.replication.registration import (
    NO_LEADER,
    AlterAnswer,
    AlterPartition,
    PartitionRegistration,
    answer_alter_partition,
    reconcile,
    registered_again,
)
from tests.sim import harness
from tests.sim.harness import Harness, Violation
from tests.sim.network import CONTROLLER, Message, Network

REPLICAS = (0, 1, 2)
CONFIG = ReplicationConfig(min_insync_replicas=2, lag_time_max_ms=300, fetch_max_bytes=600)
# Small segments, so that reads, truncations and recovery cross segment boundaries.
LOG_CONFIG = LogConfig(segment_bytes=700, flush=FlushPolicy.NONE)
SESSION_TIMEOUT_MS = 450
RETRY_MS = 100


@dataclass
class Replica:
    id: int
    directory: Path
    replica: LogReplica | None = None  # None while down
    paused_since: int | None = None
    isolated_until: int = 0
    incarnation: int = 0
    directory_id: int = 0  # changes when the directory is wiped
    fetch_sent_ms: int | None = None
    alter_sent_ms: int = 0
    waiting: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)  # (end, term, ids)

    @property
    def running(self) -> bool:
        return self.replica is not None and self.paused_since is None


def record_ids(log: PartitionLog) -> list[tuple[int, int]]:
    """(leader epoch, record id) of every record of the log, by offset."""
    out = []
    for batch in log.batches():
        epoch = recordbatch.parse_header(batch).partition_leader_epoch
        out += [(epoch, int(value)) for _, _, value in recordbatch.decode_records(batch)]
    return out


class LogReplicationWorld(Harness):
    def __init__(self, seed: int, root: Path) -> None:
        super().__init__(seed)
        self.root = root
        self.replicas = {r: Replica(r, root / f"replica-{r}") for r in REPLICAS}
        self.registration = PartitionRegistration.new(REPLICAS)
        self.alive: dict[int, int] = {r: 0 for r in REPLICAS}
        self.directory_ids = {r: 0 for r in REPLICAS}
        self.last_alter: AlterAnswer | None = None
        self.network = Network(self.rng)
        self.ids = itertools.count()
        self.committed: list[tuple[int, int]] = []
        self.registered_hw = 0
        self.acked: set[int] = set()
        self.epoch_writer: dict[int, int] = {}
        self.counts: dict[str, int] = {}
        for r in self.replicas.values():
            self._open(r)
            r.replica.apply(self.registration, self.now())
        self._events = ["produce", "deliver", "fetch", "tick", "clock", "controller", "metadata", "drop",
                        "duplicate", "recover", "fault"]
        self._weights = [15, 35, 18, 6, 8, 5, 7, 1.5, 1.5, 1.5, 1]

    def now(self) -> int:
        return self.clock.now_ms()

    def advance(self, ms: int) -> None:
        self.trace.append(f"clock +{ms}")
        self.clock.advance(ms)

    def note(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _open(self, r: Replica) -> None:
        r.replica = LogReplica(r.id, r.incarnation, PartitionLog.open(r.directory, LOG_CONFIG), CONFIG)

    # -- the schedule ----------------------------------------------------------------------------

    def step(self) -> None:
        event = self.rng.choices(self._events, self._weights)[0]
        rid = self.rng.choice(REPLICAS)
        if event == "produce":
            self.produce(rid)
        elif event == "deliver":
            self.deliver()
        elif event == "fetch":
            self.send_fetch(rid)
        elif event == "tick":
            self.tick(rid)
        elif event == "clock":
            self.advance(self.rng.choice((1, 5, 10, 20, 50, 400)))
        elif event == "controller":
            self.controller_tick()
        elif event == "metadata":
            self.metadata(rid)
        elif event in ("drop", "duplicate") and self.network:
            m = self.network.drop() if event == "drop" else self.network.duplicate()
            self.trace.append(f"{event} {m.kind} {m.src}->{m.dst}")
        elif event == "recover":
            self.recover()
        elif event == "fault":
            self.fault(self.replicas[rid])
        self.answer_acks()

    def fault(self, r: Replica) -> None:
        if not r.running or sum(not x.running for x in self.replicas.values()) >= 1:
            return  # one replica down at a time: two of three must stay to commit anything
        roll = self.rng.random()
        if roll < 0.4:
            self.trace.append(f"crash {r.id} (log end {r.replica.log.end_offset})")
            r.replica = None  # nothing closed: the files stay as the page cache holds them
            r.waiting.clear()
            r.fetch_sent_ms = None
            self.network.forget(r.id)
        elif roll < 0.75:
            self.trace.append(f"pause {r.id}")
            r.paused_since = self.now()
        else:
            r.isolated_until = self.now() + self.rng.choice((100, 300, 600))
            self.trace.append(f"isolate {r.id}")

    def recover(self) -> None:
        down = [r for r in self.replicas.values() if not r.running]
        if not down:
            return
        r = self.rng.choice(down)
        if r.replica is not None:
            self.trace.append(f"resume {r.id}")
            r.paused_since = None
            return
        if r.id not in self.registration.isr and self.rng.random() < 0.6:
            shutil.rmtree(r.directory, ignore_errors=True)
            r.directory_id += 1
            self.note("wiped")
        r.incarnation += 1
        self._open(r)
        self.trace.append(f"restart {r.id} (log end {r.replica.log.end_offset})")
        # It registers before it acts (replication_world.controller_register says why).
        log_lost = self.directory_ids[r.id] != r.directory_id
        self.directory_ids[r.id] = r.directory_id
        self.alive = {**self.alive, r.id: r.incarnation}
        self._register(registered_again(self.registration, r.id, self.alive, log_lost), f"{r.id} registers")
        self._check_log(r)

    # -- replicas --------------------------------------------------------------------------------

    def produce(self, rid: int) -> None:
        r = self.replicas[rid]
        if not r.running or r.replica.leader is None:
            return
        ids = tuple(next(self.ids) for _ in range(self.rng.randint(1, 3)))
        batch = bytearray(recordbatch.encode_records([(i, None, b"%d" % v) for i, v in enumerate(ids)], 1_000))
        epoch = r.replica.leader.leader_epoch
        error, _, end, term = r.replica.append([batch], None, acks_all=True, now_ms=self.now())
        if error is not ErrorCode.none:
            self.note("refused for too small an ISR")
            return
        if self.epoch_writer.setdefault(epoch, rid) != rid:
            raise Violation(f"replicas {self.epoch_writer[epoch]} and {rid} both wrote in leader epoch {epoch}")
        r.waiting.append((end, term, ids))
        self.trace.append(f"produce {ids} to {rid} -> log end {end}")

    def answer_acks(self) -> None:
        for r in self.replicas.values():
            if not r.running:
                continue
            still = []
            for end, term, ids in r.waiting:
                answer = r.replica.acks_all_reached(end, term)
                if answer is None:
                    still.append((end, term, ids))
                elif answer is ErrorCode.none:
                    self.acked.update(ids)
                    self.note("acknowledged writes")
            r.waiting = still
            self._observe(r)

    def send_fetch(self, rid: int) -> None:
        r = self.replicas[rid]
        if not r.running or r.replica.follower is None or r.replica.follower.leader == NO_LEADER:
            return
        if r.fetch_sent_ms is not None and self.now() - r.fetch_sent_ms < RETRY_MS:
            return
        fetch = r.replica.next_fetch()
        r.fetch_sent_ms = self.now()
        self.network.send(Message(rid, r.replica.follower.leader, "fetch", (fetch,)))

    def tick(self, rid: int) -> None:
        r = self.replicas[rid]
        if not r.running or r.replica.leader is None:
            return
        leader = r.replica.leader
        request = leader.maybe_shrink_isr(self.now())
        if request is None and leader.pending is not None and self.now() - r.alter_sent_ms >= RETRY_MS:
            request = leader.pending
        self._send_alter(r, request)

    def _send_alter(self, r: Replica, request: AlterPartition | None) -> None:
        if request is not None:
            r.alter_sent_ms = self.now()
            self.network.send(Message(r.id, CONTROLLER, "alter", (request,)))

    # -- the network -----------------------------------------------------------------------------

    def deliver(self) -> None:
        m = self.network.take(lambda r: self.replicas[r].running)
        if m is None:
            return
        now = self.now()
        if self.network.cut(m, lambda r: self.replicas[r].isolated_until, now):
            return
        if m.dst == CONTROLLER:
            (request,) = m.body
            reg, self.last_alter = answer_alter_partition(self.registration, request, self.alive, self.last_alter)
            self._register(reg, f"AlterPartition from {m.src}")
            self.network.send(Message(CONTROLLER, m.src, "altered", (request, self.last_alter)))
            return
        r = self.replicas[m.dst]
        if m.kind == "fetch":
            (fetch,) = m.body
            answer, change = r.replica.answer_fetch(fetch, now)
            self.network.send(Message(r.id, m.src, "fetched", (fetch, answer)))
            self._send_alter(r, change)
        elif m.kind == "fetched":
            fetch, answer = m.body
            f = r.replica.follower
            if f is None or f.leader != m.src:
                return
            before = r.replica.log.end_offset
            error = r.replica.apply_fetched(fetch, answer)
            if r.replica.log.end_offset < before:
                self.note("truncations")
            if error is ErrorCode.none and answer.error_code is ErrorCode.none:
                r.fetch_sent_ms = None
                self.send_fetch(r.id)
            self._check_log(r)
        elif m.kind == "altered":
            request, answer = m.body
            r.replica.isr_change_answered(request, answer.error, answer.registration, now)

    # -- the controller --------------------------------------------------------------------------

    def controller_tick(self) -> None:
        now = self.now()
        alive = {
            r.id: r.incarnation for r in self.replicas.values()
            if r.replica is not None and (r.paused_since is None or now - r.paused_since < SESSION_TIMEOUT_MS)
        }
        self.alive = alive
        self._register(reconcile(self.registration, alive), f"controller sees {sorted(alive)} alive")

    def _register(self, reg: PartitionRegistration, why: str) -> None:
        if reg != self.registration:
            if reg.leader_epoch != self.registration.leader_epoch:
                self.note("elections")
            self.trace.append(f"{why}: leader {reg.leader} epoch {reg.leader_epoch} ISR {reg.isr}")
            self.registration = reg

    def metadata(self, rid: int) -> None:
        r = self.replicas[rid]
        if r.running:
            was_leader, follower = r.replica.leader is not None, r.replica.follower
            r.replica.apply(self.registration, self.now())
            if was_leader and r.replica.leader is None:
                r.waiting.clear()
            if r.replica.follower is not None and r.replica.follower is not follower:
                r.fetch_sent_ms = None  # a new leader to follow: fetch from it at once

    # -- invariants ------------------------------------------------------------------------------

    def _observe(self, r: Replica) -> None:
        leader = r.replica.leader
        hw = leader.visible_high_watermark if leader is not None else None
        if hw is None:
            return
        prefix = record_ids(r.replica.log)[:hw] if hw > len(self.committed) else None
        if prefix is not None:
            if prefix[: len(self.committed)] != self.committed:
                raise Violation(f"leader {r.id} exposes below {hw} a log that differs from what was committed")
            self.committed = prefix
        reg = self.registration
        if reg.leader == r.id and reg.leader_epoch == leader.leader_epoch:
            if hw < self.registered_hw:
                raise Violation(f"leader {r.id}'s high watermark went back: {hw} < {self.registered_hw}")
            self.registered_hw = hw

    def _check_log(self, r: Replica) -> None:
        epochs = [h.partition_leader_epoch for h in r.replica.log.batch_headers()]
        if epochs != sorted(epochs):
            raise Violation(f"replica {r.id}'s leader epochs decrease along its log")

    def check(self) -> None:
        committed_ids = {i for _, i in self.committed}
        if not self.acked <= committed_ids:
            raise Violation(f"acknowledged records {sorted(self.acked - committed_ids)[:5]} are not committed")
        for rid in self.registration.isr:
            r = self.replicas[rid]
            if r.replica is None:
                continue  # down: checked when it comes back and the controller hears of it
            if record_ids(r.replica.log)[: len(self.committed)] != self.committed:
                raise Violation(f"replica {rid} of the ISR {self.registration.isr} lacks the committed log")

    def heal_and_converge(self, steps: int = 3000) -> None:
        self.trace.append("heal")
        for r in self.replicas.values():
            r.paused_since = None
            r.isolated_until = 0
            if r.replica is None:
                r.incarnation += 1
                self._open(r)
                self.alive = {**self.alive, r.id: r.incarnation}
                self._register(registered_again(self.registration, r.id, self.alive, False), "heal")
        for _ in range(steps):
            roll = self.rng.random()
            rid = self.rng.choice(REPLICAS)
            if roll < 0.5:
                self.deliver()
            elif roll < 0.7:
                self.send_fetch(rid)
            elif roll < 0.8:
                self.tick(rid)
            elif roll < 0.87:
                self.controller_tick()
            elif roll < 0.95:
                self.metadata(rid)
            else:
                self.advance(30)
            self.answer_acks()
            self.check()
            if self.converged():
                break
        else:
            raise Violation(f"no convergence after healing: {self.registration}, log ends "
                            f"{[r.replica.log.end_offset for r in self.replicas.values()]}")
        logs = [list(r.replica.log.batches()) for r in self.replicas.values()]
        if logs[0] != logs[1] or logs[1] != logs[2]:
            raise Violation("healed replicas hold different batches")
        ids = [i for _, i in record_ids(self.replicas[self.registration.leader].replica.log)]
        if len(ids) != len(set(ids)) or not self.acked <= set(ids):
            raise Violation("the healed log lacks an acknowledged record or holds one twice")

    def converged(self) -> bool:
        reg = self.registration
        if reg.leader == NO_LEADER or set(reg.isr) != set(REPLICAS):
            return False
        leader = self.replicas[reg.leader].replica
        if leader.leader is None or leader.leader.leader_epoch != reg.leader_epoch or leader.leader.pending is not None:
            return False
        end = leader.log.end_offset
        return leader.leader.visible_high_watermark == end and all(
            r.replica.log.end_offset == end and r.replica.partition_epoch == reg.partition_epoch
            for r in self.replicas.values()
        )

    def close(self) -> None:
        for r in self.replicas.values():
            if r.replica is not None:
                r.replica.log.close()
                r.replica = None
        super().close()


def run(seed: int, root: Path, steps: int = 400) -> LogReplicationWorld:
    return harness.run(
        lambda: LogReplicationWorld(seed, root), seed, steps, "log replication ", LogReplicationWorld.heal_and_converge
    )
