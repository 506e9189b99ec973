"""A small synthetic run directory for the checker's tests, written the way the experiment writes one.

`clean_run()` lays out a run that passes every invariant; tests plant one anomaly into it with the
builder's helpers (or drop rows with `remove`) and `write()` it. Times are seconds from the run's
start (`at`; `asked` is when the request behind a row was sent); rows hold what `EventLog` takes.

The clean run (topic `orders`, 2 partitions, records 0..13 in each, one every 3 s from 2 s):
- classic group `billing-0`: m00 reads orders-0, m01 orders-1 (generation 1); m01 stops at 10 s
  (churn), m00 takes both in generation 2 from the committed offsets; every delivery is committed
  right after it;
- share group `workers`: s00 reads orders-0, s01 orders-1, ACCEPT each record; record orders-0@4
  is RELEASEd once and ACCEPTed at delivery count 2;
- consumer-protocol group `ledger-0` (KIP-848): k00 owns orders-0, k01 orders-1 (member epoch 1);
  k01 stops at 10 s and leaves (it revokes orders-1 at 10.05 s, committed), k00 takes orders-1 at
  10.8 s (epoch 2) from the committed offset and keeps orders-0; every delivery is committed right
  after it; both give everything up when they leave at 46 s;
- faults: F0 kills billing-0's coordinator at 20.5 s (the monitor sees NOT_COORDINATOR until 22 s),
  F1 moves the leadership of orders-0 at 30.5 s, F2 pauses a partition leader 39.5-41 s;
- the monitor describes both groups every second; the drain finds both at the end offset 14.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.hashing import group_partition
from loadtest.check import CheckResult, Verdict, run_check
from loadtest.check.leadership import LeaderChange
from loadtest.check.rundata import RunData, split_by_kind
from loadtest.check.runinfo import parse_info
from loadtest.check.verdict import iso
from loadtest.experiment import rundir
from loadtest.experiment.eventlog import EventLog, rows_to_table
from loadtest.experiment.leadership import Change, write_changes
from loadtest.experiment.records import SHARE_FINAL_SCHEMA, SHARE_STATE_SCHEMA

T0_MS = 1_795_000_000_000.0  # 2026-11-18T11:06:40Z: the run's start, wall-clock milliseconds
TOPIC, TOPIC_ID, PARTITIONS, RECORDS = "orders", "0b6f0000-0000-0000-0000-00000000000a", 2, 14
CLASSIC, SHARE, PRODUCER = "billing-0", "workers", "orders-producer-0"
CONSUMER = "ledger-0"
M0, M1 = f"{CLASSIC}/m00", f"{CLASSIC}/m01"
S0, S1 = f"{SHARE}/s00", f"{SHARE}/s01"
K0, K1 = f"{CONSUMER}/k00", f"{CONSUMER}/k01"
HANDOVER_AT = 10.8  # k00 takes orders-1 from k01
LIMIT, STABLE_S = 5, 10.0
SESSION_TIMEOUT_S, REBALANCE_TIMEOUT_S = 6, 20  # the consumer group's (group.consumer.session.timeout.ms, the scenario's)
CHURN_AT = 10.0
F0_AT, F0_CLEAR = 20.5, 22.0  # kill of billing-0's group coordinator
F1_AT, F1_RECOVERED = 30.5, 32.03  # move of orders-0's leadership; recovered by the next produce
F2_AT, F2_END = 39.5, 41.0  # pause of a partition leader
RELEASED = (0, 4)  # (partition, offset) of the record released once
DRAIN_AT = 44.0
Row = dict[str, Any]


def ms(at: float) -> float:
    return T0_MS + at * 1000


def produced_at(partition: int, offset: int) -> float:
    return 2.0 + 3.0 * offset + 0.1 * partition


@dataclass
class RunBuilder:
    rows: list[Row] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=lambda: run_json())
    share_state: list[Row] | None = field(default_factory=list)  # None: the file is not written
    share_final: list[Row] | None = field(default_factory=list)
    leadership: list[Change] | None = None  # None: no leadership.parquet (an older run)

    # -- rows ------------------------------------------------------------------------------------------

    def add(self, kind: str, at: float, asked: float | None = None, **columns: Any) -> Row:
        row = {"time": ms(at), "kind": kind, **columns}
        if asked is not None:
            row["request_time"] = ms(asked)
        self.rows.append(row)
        return row

    def remove(self, match: Callable[[Row], bool]) -> list[Row]:
        gone = [r for r in self.rows if match(r)]
        self.rows = [r for r in self.rows if not match(r)]
        return gone

    def find(self, **equal: Any) -> list[Row]:
        return [r for r in self.rows if all(r.get(k) == v for k, v in equal.items())]

    def produce(self, partition: int, offset: int, at: float) -> Row:
        return self.add("produce", at, at - 0.02, role="producer", member=PRODUCER, topic=TOPIC, partition=partition,
                        offset=offset, key=f"k{partition}-{offset}")

    def classic_delivery(self, member: str, partition: int, offset: int, generation: int, at: float,
                         group: str = CLASSIC) -> Row:
        return self.add("delivery", at, at - 0.04, role=_role(group), member=member, group=group, topic=TOPIC,
                        partition=partition, offset=offset, generation=generation)

    def position(self, member: str, partition: int, offset: int, generation: int, at: float, asked: float,
                 source: str = "committed", group: str = CLASSIC) -> Row:
        return self.add("position", at, asked, role=_role(group), member=member, group=group, generation=generation,
                        topic=TOPIC, partition=partition, offset=offset, detail={"source": source})

    def commit(self, member: str, partition: int, offset: int, generation: int, at: float, error: str = "NONE",
               group: str = CLASSIC) -> Row:
        return self.add("commit", at, at - 0.05, role=_role(group), member=member, group=group, generation=generation,
                        topic=TOPIC, partition=partition, offset=offset, error=error)

    def owns(self, member: str, epoch: int, at: float, partitions: list[int], reason: str, changed: list[int],
             **extra: Any) -> Row:
        """A consumer member's `assignment` row: it owns `partitions` of orders now, `changed` by `reason`."""
        detail = {"assignment": {TOPIC: partitions} if partitions else {}, "reason": reason,
                  reason: {TOPIC: changed}, **extra}
        return self.add("assignment", at, role="consumer", member=member, member_id=f"{member}-id", group=CONSUMER,
                        generation=epoch, detail=detail)

    def rebalance_start(self, member: str, generation: int, at: float, reason: str) -> Row:
        return self.add("rebalance_start", at, role="classic", member=member, member_id=f"{member}-id", group=CLASSIC,
                        generation=generation, detail={"reason": reason})

    def rebalance_end(self, member: str, generation: int, at: float, partitions: list[int]) -> Row:
        return self.add("rebalance_end", at, role="classic", member=member, member_id=f"{member}-id", group=CLASSIC,
                        generation=generation, detail={"assignment": {TOPIC: partitions}})

    def share_delivery(self, member: str, partition: int, offset: int, count: int, at: float,
                       asked: float | None = None, leader_epoch: int | None = None) -> Row:
        return self.add("delivery", at, at - 0.04 if asked is None else asked, role="share", member=member,
                        group=SHARE, topic=TOPIC, partition=partition, offset=offset, generation=1,
                        delivery_count=count, leader_epoch=leader_epoch)

    def leader_change(self, topic: str, partition: int, epoch: int, began: float, cause: str,
                      released: float | None = None, loaded: float | None = None, actor: str = "partition-leader-1",
                      previous: str | None = "partition-leader-0") -> Change:
        """A leadership change the cluster recorded (leadership.parquet); released defaults to
        `began` (a failover), loaded to 0.3 s after it."""
        change = Change(ms(began), topic, partition, epoch, actor, previous, cause,
                        ms(began if released is None else released), ms(began + 0.3 if loaded is None else loaded))
        self.leadership = [*(self.leadership or []), change]
        return change

    def record_leadership(self) -> "RunBuilder":
        """The clean run as a cluster that records its leadership changes saw it: every partition
        placed at start, F0's failover of billing-0's coordinator, F1's move of orders-0."""
        offsets = group_partition(CLASSIC, 50)
        self.leadership = []
        self.leader_change("__consumer_offsets", offsets, 1, 0.2, "startup", actor="group-coordinator-0", previous=None)
        for p in range(PARTITIONS):
            self.leader_change(TOPIC, p, 1, 0.4, "created", actor=f"partition-leader-{p}", previous=None)
        self.leader_change("__consumer_offsets", offsets, 2, F0_AT + 0.3, "failover", actor="group-coordinator-1",
                           previous="group-coordinator-0")
        self.leader_change(TOPIC, 0, 2, F1_AT + 0.1, "operator-move", released=F1_AT + 0.2, loaded=F1_AT + 0.4,
                           actor="partition-leader-1", previous="partition-leader-0")
        return self

    def ack(self, member: str, partition: int, offset: int, count: int, ack_type: str, at: float,
            error: str = "NONE") -> Row:
        return self.add("ack", at, at - 0.05, role="share", member=member, group=SHARE, topic=TOPIC,
                        partition=partition, offset=offset, delivery_count=count, ack_type=ack_type, error=error)

    def group_state(self, group: str, at: float, state: str | None, members: int, error: str = "NONE") -> Row:
        role = _role(group)
        columns: Row = {"role": role, "group": group, "error": error}
        if state is not None:
            columns.update(state=state, detail={"members": members})
            if role != "classic":
                columns["generation"] = 2
        return self.add("group_state", at, at - 0.01, **columns)

    def fault(self, fault_id: int, at: float, action: str, target: str, groups: list[str] = (),
              partitions: list[str] = (), actors: list[str] = ()) -> Row:
        detail = {"action": action, "selector": "actor", "actors": list(actors), "groups": list(groups),
                  "partitions": list(partitions), "brokers": []}
        return self.add("fault", at, role="runner", fault_id=fault_id, target=target, detail=detail)

    def recovery(self, fault_id: int, target: str, at: float, fault_at: float) -> Row:
        return self.add("recovery", at, role="runner", fault_id=fault_id, target=target,
                        latency_ms=(at - fault_at) * 1000)

    def member(self, kind: str, role: str, member: str, at: float, group: str | None = None) -> Row:
        return self.add(kind, at, role=role, member=member, group=group)

    # -- the run directory ----------------------------------------------------------------------------

    def write(self, run_dir: Path, flush_rows: int = 200) -> Path:
        """The run directory, the event log in several parts as a run writes it."""
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / rundir.RUN_JSON).write_text(json.dumps(self.info, indent=2))
        log = EventLog(run_dir, flush_rows=flush_rows)
        log.extend(sorted(self.rows, key=lambda r: r["time"]))
        log.close()
        records = run_dir / rundir.RECORDS
        records.mkdir(exist_ok=True)
        if self.share_state is not None:
            pq.write_table(pa.Table.from_pylist(self.share_state, schema=SHARE_STATE_SCHEMA),
                           run_dir / rundir.SHARE_STATE_RECORDS)
        if self.share_final is not None:
            pq.write_table(pa.Table.from_pylist(self.share_final, schema=SHARE_FINAL_SCHEMA),
                           run_dir / rundir.SHARE_STATE_FINAL)
        if self.leadership is not None:
            write_changes(run_dir / rundir.LEADERSHIP, self.leadership)
        return run_dir

    def run_data(self, run_dir: Path = Path("memory")) -> RunData:
        """The same run straight into the checker's structures, without files (property tests)."""
        events = split_by_kind(rows_to_table(sorted(self.rows, key=lambda r: r["time"])))
        state = pa.Table.from_pylist(self.share_state, schema=SHARE_STATE_SCHEMA) if self.share_state is not None else None
        final = pa.Table.from_pylist(self.share_final, schema=SHARE_FINAL_SCHEMA) if self.share_final is not None else None
        leadership = None
        if self.leadership is not None:
            leadership = [LeaderChange(int(c.began_ms * 1000), c.topic, c.partition, c.leader_epoch, c.actor, c.previous,
                                       c.cause, int(c.released_ms * 1000),
                                       None if c.loaded_ms is None else int(c.loaded_ms * 1000))
                          for c in sorted(self.leadership, key=lambda c: c.began_ms)]
        return RunData(run_dir, parse_info(self.info), events, state, final, leadership)


def _role(group: str) -> str:
    return {SHARE: "share", CONSUMER: "consumer"}.get(group, "classic")


def run_json(classic: bool = True, share: bool = True, consumer: bool = True) -> dict[str, Any]:
    return {
        "format": 1,
        "scenario": {"name": "checker-unit", "duration_s": 42,
                     "checks": {"stable_within_s": STABLE_S, "drain_timeout_s": 30},
                     "groups": ([{"name": CLASSIC, "count": 1, "topics": [TOPIC], "members": 2,
                                  "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}] if classic else [])
                     + ([{"name": CONSUMER, "count": 1, "topics": [TOPIC], "members": 2, "protocol": "consumer",
                          "rebalance_timeout_ms": REBALANCE_TIMEOUT_S * 1000}] if consumer else []),
                     "share_groups": [{"name": SHARE, "count": 1, "topics": [TOPIC], "members": 2}] if share else []},
        "cluster": {"bootstrap": "127.0.0.1:9092", "embedded": True,
                    "settings": {"group.share.delivery.count.limit": LIMIT, "group.share.record.lock.duration.ms": 15000,
                                 "share.auto.offset.reset": "earliest",
                                 "group.consumer.session.timeout.ms": SESSION_TIMEOUT_S * 1000,
                                 "group.consumer.heartbeat.interval.ms": 1000}},
        "topics": [{"name": TOPIC, "topic_id": TOPIC_ID, "partitions": PARTITIONS}],
        "groups": {"classic": {CLASSIC: [TOPIC]} if classic else {}, "share": {SHARE: [TOPIC]} if share else {},
                   "consumer": {CONSUMER: [TOPIC]} if consumer else {}},
        "started": "2026-11-18T00:00:00+00:00", "ended": "2026-11-18T00:00:47+00:00",
        "status": "complete", "notes": [],
    }


def clean_run() -> RunBuilder:
    b = RunBuilder()
    b.add("phase", 0.0, role="runner", state="start")
    b.add("phase", 0.5, role="runner", state="load")
    b.member("member_start", "producer", PRODUCER, 1.0)
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            b.produce(p, i, produced_at(p, i))
    _classic(b)
    _share(b)
    _consumer(b)
    _faults(b)
    _monitor(b)
    _drain(b)
    return b


def _classic(b: RunBuilder) -> None:
    for m in (M0, M1):
        b.member("member_start", "classic", m, 1.0, CLASSIC)
        b.rebalance_start(m, -1, 1.1, "join")
    b.rebalance_end(M0, 1, 1.5, [0])
    b.rebalance_end(M1, 1, 1.5, [1])
    b.position(M0, 0, 0, 1, 1.6, 1.55, source="reset")
    b.position(M1, 1, 0, 1, 1.6, 1.55, source="reset")
    # The churn: m01 leaves (everything it read is committed); m00 rejoins and takes both.
    b.member("member_stop", "classic", M1, CHURN_AT, CLASSIC)
    b.rebalance_start(M0, 1, 10.3, "REBALANCE_IN_PROGRESS")
    b.rebalance_end(M0, 2, 10.8, [0, 1])
    for p in range(PARTITIONS):
        b.position(M0, p, 3, 2, 10.9, 10.85)
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            t = produced_at(p, i)
            member, generation = (M1, 1) if p == 1 and t < CHURN_AT else (M0, 1 if t < CHURN_AT else 2)
            b.classic_delivery(member, p, i, generation, t + 0.05)
            b.commit(member, p, i + 1, generation, t + 0.3)
    b.member("member_stop", "classic", M0, 46.0, CLASSIC)


def _consumer(b: RunBuilder) -> None:
    for m in (K0, K1):
        b.member("member_start", "consumer", m, 1.0, CONSUMER)
    b.owns(K0, 1, 1.5, [0], "assigned", [0])
    b.owns(K1, 1, 1.5, [1], "assigned", [1])
    b.position(K0, 0, 0, 1, 1.6, 1.55, source="reset", group=CONSUMER)
    b.position(K1, 1, 0, 1, 1.6, 1.55, source="reset", group=CONSUMER)
    # k01 leaves: it committed everything it read (3) and gives orders-1 up; k00's next heartbeat
    # brings it, and it starts from the commit. k00 keeps orders-0 (no new start position).
    b.member("member_stop", "consumer", K1, CHURN_AT, CONSUMER)
    b.owns(K1, 1, CHURN_AT + 0.05, [], "revoked", [1])
    b.owns(K0, 2, HANDOVER_AT, [0, 1], "assigned", [1])
    b.position(K0, 1, 3, 2, HANDOVER_AT + 0.1, HANDOVER_AT + 0.05, group=CONSUMER)
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            t = produced_at(p, i)  # none of orders-1 between the churn and the handover
            member = K1 if p == 1 and t < CHURN_AT else K0
            epoch = 1 if t < HANDOVER_AT else 2
            b.classic_delivery(member, p, i, epoch, t + 0.05, group=CONSUMER)
            b.commit(member, p, i + 1, epoch, t + 0.3, group=CONSUMER)
    b.member("member_stop", "consumer", K0, 46.0, CONSUMER)
    b.owns(K0, 2, 46.05, [], "revoked", [0, 1])


def _share(b: RunBuilder) -> None:
    for k, m in enumerate((S0, S1)):
        b.member("member_start", "share", m, 1.0, SHARE)
        b.add("assignment", 1.3, role="share", member=m, member_id=f"{m}-id", group=SHARE, generation=1,
              detail={"assignment": {TOPIC: [k]}})
    for p, m in enumerate((S0, S1)):
        for i in range(RECORDS):
            t = produced_at(p, i)
            b.share_delivery(m, p, i, 1, t + 0.06)
            if (p, i) == RELEASED:
                b.ack(m, p, i, 1, "RELEASE", t + 0.4)
                b.share_delivery(m, p, i, 2, t + 0.6)
                b.ack(m, p, i, 2, "ACCEPT", t + 0.9)
            else:
                b.ack(m, p, i, 1, "ACCEPT", t + 0.4)
    for m in (S0, S1):
        b.member("member_stop", "share", m, 46.0, SHARE)
    base = {"tombstone": False, "group": SHARE, "topic_id": TOPIC_ID, "topic": TOPIC, "state_epoch": 1,
            "leader_epoch": 1}
    for p in range(PARTITIONS):
        b.share_state += [
            {**base, "partition": 7, "offset": 2 * p, "time": int(ms(1.4)), "record_type": "ShareSnapshot",
             "topic_partition": p, "start_offset": 0, "batches": []},
            {**base, "partition": 7, "offset": 10 + p, "time": int(ms(44.0)), "record_type": "ShareUpdate",
             "topic_partition": p, "start_offset": -1,
             "batches": [{"first_offset": RECORDS - 1, "last_offset": RECORDS - 1, "delivery_state": 2,
                          "delivery_count": 1}]},
        ]
        b.share_final.append({"group": SHARE, "topic_id": TOPIC_ID, "topic": TOPIC, "topic_partition": p,
                              "start_offset": RECORDS, "state_epoch": 1, "batches": []})


def _faults(b: RunBuilder) -> None:
    b.fault(0, F0_AT, "kill", "group-coordinator-0", groups=[CLASSIC], actors=["group-coordinator-0"])
    b.recovery(0, CLASSIC, F0_CLEAR, F0_AT)
    b.fault(1, F1_AT, "move", f"{TOPIC}-0", partitions=[f"{TOPIC}-0"], actors=["partition-leader-0"])
    b.recovery(1, f"{TOPIC}-0", F1_RECOVERED, F1_AT)
    b.fault(2, F2_AT, "pause", "partition-leader-1", partitions=[f"{TOPIC}-1"], actors=["partition-leader-1"])
    b.add("fault_end", F2_END, role="runner", fault_id=2, target="partition-leader-1")
    b.recovery(2, f"{TOPIC}-1", F2_END + 0.15, F2_AT)


def _monitor(b: RunBuilder) -> None:
    for s in range(1, 46):
        t = float(s)
        if t < 2.0:
            b.group_state(CLASSIC, t, "Empty", 0)
        elif CHURN_AT < t <= CHURN_AT + 1:
            b.group_state(CLASSIC, t - 0.5, "PreparingRebalance", 1)
        elif F0_AT < t < F0_CLEAR:
            b.group_state(CLASSIC, t, None, 0, error="NOT_COORDINATOR")
        else:
            b.group_state(CLASSIC, t, "Stable", 2 if t < CHURN_AT else 1)
        b.group_state(SHARE, t, "Stable" if t >= 2.0 else "Empty", 2 if t >= 2.0 else 0)
        if t < 2.0:
            b.group_state(CONSUMER, t, "Empty", 0)
        elif CHURN_AT < t <= HANDOVER_AT:
            b.group_state(CONSUMER, t, "Reconciling", 1)
        else:
            b.group_state(CONSUMER, t, "Stable", 2 if t < CHURN_AT else 1)


def _drain(b: RunBuilder) -> None:
    b.add("phase", DRAIN_AT, role="runner", state="drain")
    b.member("member_stop", "producer", PRODUCER, DRAIN_AT)
    for p in range(PARTITIONS):
        b.add("end_offset", DRAIN_AT + 0.5, role="runner", topic=TOPIC, partition=p, offset=RECORDS)
        for group, role in ((CLASSIC, "classic"), (SHARE, "share"), (CONSUMER, "consumer")):
            b.add("drained", 45.0, role=role, group=group, topic=TOPIC, partition=p, offset=RECORDS, state="complete")
    b.add("phase", 46.5, role="runner", state="end")


# -- judging it ----------------------------------------------------------------------------------------------

def judge(builder: RunBuilder, tmp_path: Path) -> CheckResult:
    """Write the run under tmp_path and check it as `raygroups check` does."""
    return run_check(builder.write(tmp_path / "run"))


def only_failure(result: CheckResult, name: str, violations: int) -> Verdict:
    """The one failing verdict (every other passes), with its violation count."""
    statuses = {v.name: v.status for v in result.verdicts}
    failing = {n for n, s in statuses.items() if s == "fail"}
    assert failing == {name}, {v.name: v.summary for v in result.verdicts if v.status != "pass"}
    assert all(s == "pass" for n, s in statuses.items() if n != name), statuses
    verdict = result.verdict(name)
    assert verdict.violations == violations, verdict.summary
    return verdict


def kinds(evidence: list[Row]) -> list[str]:
    return [r["kind"] for r in evidence]


def iso_of(at: float) -> str:
    """The ISO string a row observed at `at` gets in the evidence."""
    return iso(int(ms(at) * 1000))
