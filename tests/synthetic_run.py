"""A synthetic but realistic run directory, written with the experiment's own EventLog.

One topic `orders`, one producer, a classic group `billing-0` (3 members, a churn at 35 s that
costs a rebalance), a share group `workers` (3 members) and two faults:
- F0 at 20 s kills the group coordinator of billing-0 (no fault_end): classic coordinator calls
  answer NOT_COORDINATOR until 21.6 s, the monitor cannot describe the group until 22 s;
- F1 at 40 s pauses a share coordinator for 5 s (fault_end at 45 s): share acknowledgements fail
  and share deliveries wait until it resumes.

Share records follow a fixed plan by their produce index i (`share_plan`), so a test knows how many
end ACKNOWLEDGED and ARCHIVED: i % 10 in 0..6 ACCEPT; 7 RELEASE then ACCEPT (delivery count 2);
8 REJECT; 9 never acknowledged, the lock expires, then RELEASE twice up to the delivery-count limit
3 (ARCHIVED). Every 50th record's first ACCEPT fails (REQUEST_TIMED_OUT), and so does any ACCEPT
during F1: those locks expire and the redelivery is accepted.

`python -m tests.synthetic_run OUT --rate 2000 --duration 120` writes a large run.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from loadtest.experiment.eventlog import EventLog
from loadtest.experiment.records import CONSUMER_OFFSETS_SCHEMA, SHARE_FINAL_SCHEMA, SHARE_STATE_SCHEMA

T0_MS = datetime(2026, 11, 23, 12, 0, 0, tzinfo=timezone.utc).timestamp() * 1000
TOPIC = "orders"
CLASSIC = "billing-0"
SHARE = "workers"
PRODUCER = "orders-producer-0"
LIMIT = 3
LOCK_MS = 3000.0
BROKERS = ["127.0.0.1:9092", "127.0.0.1:9093"]
F0_AT, F0_CLEAR, F0_MONITOR_CLEAR = 20.0, 21.6, 22.0
F1_AT, F1_END = 40.0, 45.0
CHURN_AT, CHURN_DONE = 35.0, 36.2


@dataclass
class Config:
    duration_s: float = 60.0
    rate: float = 40.0  # records/s produced
    partitions: int = 4
    share: bool = True
    seed: int = 7
    flush_rows: int = 4000  # small parts: a run is several part files


@dataclass
class Expected:
    """What the generator knows the report should find."""

    produced: int = 0
    share_acknowledged: int = 0
    share_archived: int = 0
    share_deliveries_by_count: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    classic_generations: list[int] = field(default_factory=list)
    rows: int = 0


def share_plan(i: int) -> str:
    return {7: "release", 8: "reject", 9: "expire"}.get(i % 10, "accept")


class Sim:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.rows: list[dict[str, Any]] = []
        self.correlation: dict[str, int] = defaultdict(int)
        self.expected = Expected()

    def at(self, s: float) -> float:
        return T0_MS + s * 1000

    def emit(self, **row: Any) -> None:
        self.rows.append(row)

    def call(self, t: float, role: str, member: str, group: str | None, api: str, latency: float,
             error: str = "NONE") -> float:
        """A request and its response; returns the response time (ms)."""
        self.correlation[member] += 1
        c = self.correlation[member]
        broker = BROKERS[c % 2]
        self.emit(time=t, kind="request", role=role, member=member, member_id=f"{member}-id", group=group, api=api,
                  broker=broker, correlation=c)
        self.emit(time=t + latency, kind="response", role=role, member=member, member_id=f"{member}-id", group=group,
                  api=api, broker=broker, correlation=c, request_time=t, latency_ms=latency, error=error)
        return t + latency

    def jitter(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)


def _wobble(member: str, t: float, n: int) -> int:
    """A deterministic jitter (hash() of a str changes per process)."""
    return (int(t) * 31 + sum(map(ord, member))) % n


class Ticks:
    """A member's fetch loop: a request every `period` ms, answered `latency` ms later."""

    def __init__(self, sim: Sim, start_ms: float, end_ms: float, period: float = 250.0) -> None:
        self.requests: list[float] = []
        t = start_ms
        while t < end_ms:
            self.requests.append(t)
            t += period
        self.sim = sim

    def next(self, t: float) -> float:
        """The first request sent at or after t."""
        i = bisect.bisect_left(self.requests, t)
        return self.requests[min(i, len(self.requests) - 1)]


def generate(run_dir: Path, cfg: Config | None = None) -> Expected:
    cfg = cfg or Config()
    sim = Sim(cfg)
    D = cfg.duration_s
    load_end = D - 10
    sim.emit(time=sim.at(0), kind="phase", role="runner", state="start")
    sim.emit(time=sim.at(1), kind="phase", role="runner", state="load")
    sim.emit(time=sim.at(load_end), kind="phase", role="runner", state="drain")
    sim.emit(time=sim.at(D - 0.5), kind="phase", role="runner", state="end")
    produced = _produce(sim, 2.0, load_end)
    _classic(sim, produced, D)
    if cfg.share:
        _share(sim, produced, D)
    _faults(sim)
    _monitor(sim, D)
    _ends(sim, produced, load_end, D)
    sim.rows.sort(key=lambda r: r["time"])
    log = EventLog(run_dir, flush_rows=cfg.flush_rows)
    for start in range(0, len(sim.rows), cfg.flush_rows):  # parts of flush_rows rows, as a run writes them
        log.extend(sim.rows[start:start + cfg.flush_rows])
    log.close()
    sim.expected.rows = len(sim.rows)
    _run_json(run_dir, cfg)
    _records(run_dir, produced, cfg)
    return sim.expected


# -- producer --------------------------------------------------------------------------------------


@dataclass
class Record:
    i: int
    partition: int
    offset: int
    time: float  # produce row (ack) time, ms


def _produce(sim: Sim, start: float, end: float) -> list[Record]:
    records: list[Record] = []
    next_offset = [0] * sim.cfg.partitions
    per_tick = sim.cfg.rate / 10
    carry = 0.0
    t = sim.at(start)
    sim.emit(time=t - 500, kind="member_start", role="producer", member=PRODUCER)
    while t < sim.at(end):
        carry += per_tick
        batch, carry = int(carry), carry - int(carry)
        by_partition: dict[int, int] = defaultdict(int)
        pending = []
        for _ in range(batch):
            by_partition[len(records) % sim.cfg.partitions] += 1
            pending.append(Record(len(records), len(records) % sim.cfg.partitions, -1, 0))
            records.append(pending[-1])
        for partition in sorted(by_partition):
            latency = sim.jitter(3, 12)
            # F1 pauses no partition leader; a short NOT_LEADER blip at 30 s shows produce errors.
            error = "NONE"
            if abs(t - sim.at(30)) < 60 and partition == 0:
                error, latency = "NOT_LEADER_OR_FOLLOWER", sim.jitter(1, 3)
            done = sim.call(t, "producer", PRODUCER, None, "Produce", latency, error)
            if error != "NONE":
                done = sim.call(done + 100, "producer", PRODUCER, None, "Produce", sim.jitter(3, 12))
            for r in (r for r in pending if r.partition == partition):
                r.offset = next_offset[partition]
                next_offset[partition] += 1
                r.time = done
                sim.emit(time=done, kind="produce", member=PRODUCER, topic=TOPIC, partition=partition, offset=r.offset,
                         key=f"k{r.i}", request_time=t)
        t += 100
    sim.emit(time=t + 10, kind="member_stop", role="producer", member=PRODUCER)
    sim.expected.produced = len(records)
    return records


# -- classic group ---------------------------------------------------------------------------------


def _owners(members: list[str], partitions: int) -> dict[int, str]:
    """Range assignment of one topic."""
    members = sorted(members)
    per, extra = divmod(partitions, len(members))
    owners, p = {}, 0
    for i, m in enumerate(members):
        for _ in range(per + (1 if i < extra else 0)):
            owners[p] = m
            p += 1
    return owners


def _coordinator_error(t: float, sim: Sim) -> str:
    return "NOT_COORDINATOR" if sim.at(F0_AT) <= t < sim.at(F0_CLEAR) else "NONE"


def _classic(sim: Sim, records: list[Record], D: float) -> None:
    first = [f"{CLASSIC}/m0{i}" for i in range(3)]
    second = [f"{CLASSIC}/m00", f"{CLASSIC}/m01", f"{CLASSIC}/m03"]
    n = sim.cfg.partitions
    gen1, gen2 = _owners(first, n), _owners(second, n)
    joined = {}
    for k, m in enumerate(first):
        t = sim.at(0.9 + 0.1 * k)
        sim.emit(time=t, kind="member_start", role="classic", member=m, group=CLASSIC)
        sim.emit(time=t + 5, kind="rebalance_start", role="classic", member=m, member_id=f"{m}-id", group=CLASSIC,
                 generation=-1, detail={"reason": "join"})
        sim.call(t + 10, "classic", m, CLASSIC, "FindCoordinator", sim.jitter(1, 4))
        done = sim.call(t + 20, "classic", m, CLASSIC, "JoinGroup", sim.at(1.4) - t - 20 + sim.jitter(0, 30))
        joined[m] = sim.call(done + 2, "classic", m, CLASSIC, "SyncGroup", sim.jitter(3, 20))
    for m, t in joined.items():
        mine = sorted(p for p, o in gen1.items() if o == m)
        sim.emit(time=t, kind="rebalance_end", role="classic", member=m, member_id=f"{m}-id", group=CLASSIC,
                 generation=1, detail={"assignment": {TOPIC: mine}})
        for p in mine:
            rt = t + 2
            done = sim.call(rt, "classic", m, CLASSIC, "OffsetFetch", sim.jitter(2, 6))
            sim.emit(time=done, kind="position", role="classic", member=m, group=CLASSIC, generation=1, topic=TOPIC,
                     partition=p, offset=0, request_time=rt, detail={"source": "reset"})
    # The churn: m02 leaves, m03 joins, the others rejoin; generation 2.
    stop = sim.at(CHURN_AT)
    sim.emit(time=stop, kind="member_stop", role="classic", member=f"{CLASSIC}/m02", group=CLASSIC)
    sim.emit(time=stop + 50, kind="member_start", role="classic", member=f"{CLASSIC}/m03", group=CLASSIC)
    sim.emit(time=stop + 60, kind="rebalance_start", role="classic", member=f"{CLASSIC}/m03", member_id=f"{CLASSIC}/m03-id",
             group=CLASSIC, generation=-1, detail={"reason": "join"})
    for k, m in enumerate(second[:2]):
        sim.emit(time=sim.at(35.5 + 0.3 * k), kind="rebalance_start", role="classic", member=m, member_id=f"{m}-id",
                 group=CLASSIC, generation=1, detail={"reason": "REBALANCE_IN_PROGRESS"})
        sim.call(sim.at(35.5 + 0.3 * k) + 1, "classic", m, CLASSIC, "JoinGroup", sim.at(36.0) - sim.at(35.5 + 0.3 * k))
    for k, m in enumerate(second):
        t = sim.at(CHURN_DONE) + 40 * k
        sim.call(t - 30, "classic", m, CLASSIC, "SyncGroup", 30)
        mine = sorted(p for p, o in gen2.items() if o == m)
        sim.emit(time=t, kind="rebalance_end", role="classic", member=m, member_id=f"{m}-id", group=CLASSIC,
                 generation=2, detail={"assignment": {TOPIC: mine}})
    sim.expected.classic_generations = [1, 2]
    # Fetch loops and deliveries: each record goes to its partition's owner at the owner's next fetch.
    members = sorted(set(first) | set(second))
    ticks = {m: Ticks(sim, sim.at(1.6) + 37 * i, sim.at(D - 2)) for i, m in enumerate(members)}
    delivered_at: dict[int, list[tuple[float, int]]] = defaultdict(list)
    served: set[tuple[str, float]] = set()
    for r in records:
        ready = r.time + 5
        if sim.at(CHURN_AT) <= ready < sim.at(CHURN_DONE) + 200:
            ready = sim.at(CHURN_DONE) + 200  # nobody consumes during the rebalance
        owners = gen1 if ready < sim.at(CHURN_AT) else gen2
        m = owners[r.partition]
        rt = ticks[m].next(ready)
        td = rt + 4 + (_wobble(m, rt, 7))
        served.add((m, rt))
        sim.emit(time=td, kind="delivery", role="classic", member=m, group=CLASSIC, topic=TOPIC, partition=r.partition,
                 offset=r.offset, generation=1 if owners is gen1 else 2, request_time=rt)
        delivered_at[r.partition].append((td, r.offset))
    for m, tick in ticks.items():
        alive_from = sim.at(CHURN_DONE) if m.endswith("m03") else sim.at(1.6)
        alive_to = sim.at(CHURN_AT) if m.endswith("m02") else sim.at(D - 2)
        for rt in tick.requests:
            if alive_from <= rt < alive_to and not (sim.at(CHURN_AT) <= rt < sim.at(CHURN_DONE)):
                latency = 4 + (_wobble(m, rt, 7)) if (m, rt) in served else 500.0  # long poll with no data
                sim.call(rt, "classic", m, CLASSIC, "Fetch", latency)
    # Commits once a second and heartbeats every 3 s, per member and its partitions.
    for m in members:
        for s in range(2, int(D) - 2):
            t = sim.at(s) + 11 * members.index(m)
            if (m.endswith("m02") and t >= sim.at(CHURN_AT)) or (m.endswith("m03") and t < sim.at(CHURN_DONE + 0.5)):
                continue
            if sim.at(CHURN_AT) <= t < sim.at(CHURN_DONE + 0.5):
                continue
            owners = gen1 if t < sim.at(CHURN_AT) else gen2
            generation = 1 if owners is gen1 else 2
            error = _coordinator_error(t, sim)
            latency = sim.jitter(40, 180) if error != "NONE" else sim.jitter(2, 9)
            done = sim.call(t, "classic", m, CLASSIC, "OffsetCommit", latency, error)
            for p in sorted(p for p, o in owners.items() if o == m):
                got = delivered_at[p]
                committed = bisect.bisect_right(got, (t, float("inf")))  # offsets delivered so far
                sim.emit(time=done, kind="commit", role="classic", member=m, group=CLASSIC, generation=generation,
                         topic=TOPIC, partition=p, offset=committed, error=error, request_time=t)
            if s % 3 == 0:
                error = _coordinator_error(t + 300, sim)
                sim.call(t + 300, "classic", m, CLASSIC, "Heartbeat", sim.jitter(1, 5) if error == "NONE" else 150, error)
            if error != "NONE" and s == int(F0_AT):
                sim.call(t + 200, "classic", m, CLASSIC, "FindCoordinator", sim.jitter(2, 8))
    for m in second:
        sim.emit(time=sim.at(D - 1.5), kind="member_stop", role="classic", member=m, group=CLASSIC)
    # Positions after the churn: from the committed offsets.
    for m in second:
        for p in sorted(p for p, o in gen2.items() if o == m):
            rt = sim.at(CHURN_DONE) + 10
            committed = bisect.bisect_right(delivered_at[p], (sim.at(CHURN_AT), float("inf")))
            done = sim.call(rt, "classic", m, CLASSIC, "OffsetFetch", sim.jitter(2, 6))
            sim.emit(time=done, kind="position", role="classic", member=m, group=CLASSIC, generation=2, topic=TOPIC,
                     partition=p, offset=committed, request_time=rt, detail={"source": "committed"})


# -- share group -----------------------------------------------------------------------------------


def _share(sim: Sim, records: list[Record], D: float) -> None:
    members = [f"{SHARE}/m0{i}" for i in range(3)]
    ticks = {m: Ticks(sim, sim.at(1.2) + 53 * i, sim.at(D - 1), period=200) for i, m in enumerate(members)}
    for k, m in enumerate(members):
        t = sim.at(1.0 + 0.05 * k)
        sim.emit(time=t, kind="member_start", role="share", member=m, group=SHARE)
        done = sim.call(t + 5, "share", m, SHARE, "ShareGroupHeartbeat", sim.jitter(3, 10))
        sim.emit(time=done, kind="assignment", role="share", member=m, member_id=f"{m}-id", group=SHARE, generation=1,
                 detail={"assignment": {TOPIC: list(range(sim.cfg.partitions))}})
        for s in range(2, int(D) - 1, 5):
            sim.call(sim.at(s) + 17 * k, "share", m, SHARE, "ShareGroupHeartbeat", sim.jitter(2, 8))
    paused = (sim.at(F1_AT), sim.at(F1_END))
    fetches: dict[str, set[float]] = defaultdict(set)
    acks_at: dict[str, set[float]] = defaultdict(set)
    expected = sim.expected

    def deliver(r: Record, m: str, ready: float, count: int) -> tuple[float, float]:
        if paused[0] <= ready < paused[1]:
            ready = paused[1] + 50  # ShareFetch waits for the paused coordinator
        rt = ticks[m].next(ready)
        td = rt + 3 + (_wobble(m, rt, 9))
        fetches[m].add(rt)
        sim.emit(time=td, kind="delivery", role="share", member=m, member_id=f"{m}-id", group=SHARE, topic=TOPIC,
                 partition=r.partition, offset=r.offset, generation=1, request_time=rt, delivery_count=count)
        expected.share_deliveries_by_count[count] += 1
        return rt, td

    def ack(r: Record, m: str, td: float, kind: str, count: int, error: str | None = None) -> float:
        rt = ticks[m].next(td + 30)  # piggybacked on the next ShareFetch
        done = rt + 3 + (_wobble(m, rt, 9))
        fetches[m].add(rt)
        if error is None:
            error = "REQUEST_TIMED_OUT" if paused[0] <= done < paused[1] + 50 else "NONE"
        sim.emit(time=done, kind="ack", role="share", member=m, member_id=f"{m}-id", group=SHARE, topic=TOPIC,
                 partition=r.partition, offset=r.offset, ack_type=kind, error=error, request_time=rt,
                 delivery_count=count)
        acks_at[m].add(rt)
        return done if error == "NONE" else -1

    for r in records:
        m = members[r.i % 3]
        # A few records reach the consumer before the producer hears the ack.
        ready = r.time - 2 if r.i % 97 == 0 else r.time + 3
        _, td = deliver(r, m, ready, 1)
        plan = share_plan(r.i)
        if plan == "accept":
            error = "REQUEST_TIMED_OUT" if r.i % 50 == 0 else None
            if ack(r, m, td, "ACCEPT", 1, error) < 0:  # failed: the lock expires, the redelivery is accepted
                m2 = members[(r.i + 1) % 3]
                _, td2 = deliver(r, m2, td + LOCK_MS + 20, 2)
                ack(r, m2, td2, "ACCEPT", 2, "NONE")
            expected.share_acknowledged += 1
        elif plan == "release":
            ack(r, m, td, "RELEASE", 1, "NONE")
            m2 = members[(r.i + 1) % 3]
            _, td2 = deliver(r, m2, td + 300, 2)
            ack(r, m2, td2, "ACCEPT", 2, "NONE")
            expected.share_acknowledged += 1
        elif plan == "reject":
            ack(r, m, td, "REJECT", 1, "NONE")
            expected.share_archived += 1
        else:  # never acknowledged: the lock expires; then released twice, archived at the limit
            m2 = members[(r.i + 1) % 3]
            _, td2 = deliver(r, m2, td + LOCK_MS + 20, 2)
            ack(r, m2, td2, "RELEASE", 2, "NONE")
            _, td3 = deliver(r, m2, td2 + 300, 3)
            ack(r, m2, td3, "RELEASE", 3, "NONE")
            expected.share_archived += 1
    for m, tick in ticks.items():
        for rt in tick.requests:
            busy = rt in fetches[m]
            if paused[0] <= rt < paused[1]:
                sim.call(rt, "share", m, SHARE, "ShareFetch", 1000.0, "REQUEST_TIMED_OUT")
            else:
                sim.call(rt, "share", m, SHARE, "ShareFetch", 3 + (_wobble(m, rt, 9)) if busy else 500.0)
    for m in members:
        sim.emit(time=sim.at(D - 1.2), kind="member_stop", role="share", member=m, group=SHARE)


# -- faults, monitor, end ----------------------------------------------------------------------------


def _faults(sim: Sim) -> None:
    sim.emit(time=sim.at(F0_AT), kind="fault", role="runner", fault_id=0, target="group-coordinator-1",
             detail={"action": "kill", "selector": "coordinator_of", "actors": ["group-coordinator-1"],
                     "groups": [CLASSIC], "partitions": [], "brokers": []})
    sim.emit(time=sim.at(F0_MONITOR_CLEAR), kind="recovery", role="runner", fault_id=0, target=CLASSIC,
             latency_ms=(F0_MONITOR_CLEAR - F0_AT) * 1000)
    sim.emit(time=sim.at(F1_AT), kind="fault", role="runner", fault_id=1, target="share-coordinator-0",
             detail={"action": "pause", "selector": "share_coordinator_of", "actors": ["share-coordinator-0"],
                     "groups": [], "partitions": [], "brokers": [], "share_partitions": [f"{SHARE}:{TOPIC}-0"]})
    sim.emit(time=sim.at(F1_END), kind="fault_end", role="runner", fault_id=1, target="share-coordinator-0")
    if sim.cfg.share:
        sim.emit(time=sim.at(F1_END + 0.4), kind="recovery", role="runner", fault_id=1, target=f"{SHARE}:{TOPIC}-0",
                 latency_ms=(F1_END + 0.4 - F1_AT) * 1000)


def _monitor(sim: Sim, D: float) -> None:
    for s in range(1, int(D)):
        t = sim.at(s + 0.5)
        # classic: NOT_COORDINATOR right after F0; rebalancing around the churn; Empty after the members stop
        if F0_AT <= s + 0.5 < F0_MONITOR_CLEAR:
            sim.emit(time=t, kind="group_state", role="classic", group=CLASSIC, error="NOT_COORDINATOR")
        else:
            state = "Stable"
            if CHURN_AT <= s + 0.5 < CHURN_DONE:
                state = "PreparingRebalance"
            elif s + 0.5 >= D - 1.5:
                state = "Empty"
            members = 0 if state == "Empty" else 3
            sim.emit(time=t, kind="group_state", role="classic", group=CLASSIC, state=state, error="NONE",
                     generation=2 if s > CHURN_DONE else 1, detail={"members": members})
        if sim.cfg.share:
            if F1_AT <= s + 0.5 < F1_END:
                sim.emit(time=t, kind="group_state", role="share", group=SHARE, error="REQUEST_TIMED_OUT")
            else:
                sim.emit(time=t, kind="group_state", role="share", group=SHARE, state="Stable", error="NONE",
                         generation=3, detail={"members": 3})


def _ends(sim: Sim, records: list[Record], load_end: float, D: float) -> None:
    ends: dict[int, int] = defaultdict(int)
    for r in records:
        ends[r.partition] = max(ends[r.partition], r.offset + 1)
    for p in range(sim.cfg.partitions):
        sim.emit(time=sim.at(load_end + 0.5), kind="end_offset", role="runner", topic=TOPIC, partition=p, offset=ends[p])
        sim.emit(time=sim.at(D - 3), kind="drained", role="classic", group=CLASSIC, topic=TOPIC, partition=p,
                 offset=ends[p], state="complete")
        if sim.cfg.share:
            sim.emit(time=sim.at(D - 3), kind="drained", role="share", group=SHARE, topic=TOPIC, partition=p,
                     offset=ends[p], state="complete")


def _run_json(run_dir: Path, cfg: Config) -> None:
    groups: dict[str, dict[str, list[str]]] = {"classic": {CLASSIC: [TOPIC]}, "share": {}}
    if cfg.share:
        groups["share"] = {SHARE: [TOPIC]}
    info = {
        "format": 1,
        "scenario": {"name": "synthetic-failover" if cfg.share else "synthetic-classic-only",
                     "duration_s": cfg.duration_s - 10, "checks": {"stable_within_s": 30, "drain_timeout_s": 60}},
        "cluster": {"bootstrap": ",".join(BROKERS), "embedded": True,
                    "settings": {"group.share.delivery.count.limit": LIMIT, "group.share.record.lock.duration.ms": LOCK_MS}},
        "topics": [{"name": TOPIC, "topic_id": "0b6f0000-0000-0000-0000-000000000001", "partitions": cfg.partitions}],
        "groups": groups,
        "started": datetime.fromtimestamp(T0_MS / 1000, timezone.utc).isoformat(),
        "ended": datetime.fromtimestamp(T0_MS / 1000 + cfg.duration_s, timezone.utc).isoformat(),
        "status": "complete",
        "notes": ["synthetic run: written by tests/integration/report/synthetic.py"],
    }
    (run_dir / "run.json").write_text(json.dumps(info, indent=2))
    (run_dir / "scenario.toml").write_text('name = "synthetic"\n')


def _records(run_dir: Path, records: list[Record], cfg: Config) -> None:
    out = run_dir / "records"
    out.mkdir(exist_ok=True)
    ends: dict[int, int] = defaultdict(int)
    for r in records:
        ends[r.partition] = max(ends[r.partition], r.offset + 1)
    stamp = int(T0_MS + cfg.duration_s * 1000)
    offsets = [{"partition": 7, "offset": 0, "time": stamp, "record_type": "GroupMetadata", "group": CLASSIC,
                "key": json.dumps({"group": CLASSIC}), "value": "{}", "generation": 2}]
    for p in range(cfg.partitions):
        for k, committed in enumerate((ends[p] // 2, ends[p])):  # an older commit, then the last one
            offsets.append({"partition": 7, "offset": 1 + 2 * p + k, "time": stamp, "record_type": "OffsetCommit",
                            "group": CLASSIC, "key": json.dumps({"group": CLASSIC, "topic": TOPIC, "partition": p}),
                            "value": json.dumps({"offset": committed}), "topic": TOPIC, "topic_partition": p,
                            "committed_offset": committed})
    pq.write_table(pa.Table.from_pylist(offsets, schema=CONSUMER_OFFSETS_SCHEMA), out / "consumer_offsets.parquet")
    state, final = [], []
    if cfg.share:
        for p in range(cfg.partitions):
            start = max(0, ends[p] - 3)
            batches = [{"first_offset": start, "last_offset": start + 1, "delivery_state": 2, "delivery_count": 1},
                       {"first_offset": start + 2, "last_offset": start + 2, "delivery_state": 4, "delivery_count": 3}]
            common = {"group": SHARE, "topic_id": "0b6f0000-0000-0000-0000-000000000001", "topic": TOPIC,
                      "topic_partition": p, "start_offset": start, "state_epoch": 1, "batches": batches}
            state.append({"partition": 3, "offset": p, "time": stamp, "record_type": "ShareSnapshot", "tombstone": False,
                          "leader_epoch": 0, **common})
            final.append(common)
    pq.write_table(pa.Table.from_pylist(state, schema=SHARE_STATE_SCHEMA), out / "share_group_state.parquet")
    pq.write_table(pa.Table.from_pylist(final, schema=SHARE_FINAL_SCHEMA), out / "share_state_final.parquet")


def write_verdicts(run_dir: Path) -> dict[str, Any]:
    verdicts = {
        "format": 1, "ok": False, "checked_at": "2026-11-23T12:01:05+00:00",
        "verdicts": [
            {"name": "lost-write", "title": "every acknowledged record reached every group that read to the end",
             "status": "pass", "summary": "every acknowledged record reached billing-0 and workers", "checked": 1000,
             "violations": 0, "evidence": []},
            {"name": "duplicate", "title": "no classic record is delivered twice without a reason",
             "status": "fail", "summary": "1 unexplained second delivery in billing-0", "checked": 1000, "violations": 1,
             "evidence": [
                 {"kind": "delivery", "time": "2026-11-23T12:00:30.100000+00:00", "member": "billing-0/m00",
                  "group": CLASSIC, "topic": TOPIC, "partition": 0, "offset": 17, "generation": 1},
                 {"kind": "delivery", "time": "2026-11-23T12:00:30.900000+00:00", "member": "billing-0/m00",
                  "group": CLASSIC, "topic": TOPIC, "partition": 0, "offset": 17, "generation": 1},
             ]},
            {"name": "unstable-group", "title": "every group is Stable again soon after each fault",
             "status": "pass", "summary": "billing-0 Stable 2.0 s after F0; workers 0.5 s after F1", "checked": 2,
             "violations": 0, "evidence": []},
            {"name": "failover-rebalance", "title": "no group rebalances because its coordinator moved",
             "status": "n/a", "summary": "no fault moved a group coordinator partition with members in it",
             "checked": 0, "violations": 0, "evidence": []},
        ],
    }
    (run_dir / "verdicts.json").write_text(json.dumps(verdicts, indent=2))
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description="write a synthetic run directory")
    parser.add_argument("out", type=Path)
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--no-share", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = Config(duration_s=args.duration, rate=args.rate, partitions=args.partitions, share=not args.no_share,
                 flush_rows=50_000)
    expected = generate(args.out, cfg)
    write_verdicts(args.out)
    print(f"{expected.rows:,} rows, {expected.produced:,} records produced in {args.out}")


if __name__ == "__main__":
    main()
