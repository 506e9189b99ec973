"""failover-rebalance: a group coordinator's failover (or any move of it) made a group rebalance.

A failover must be invisible to a healthy group: the new coordinator replays the group and
restarts every member's session, so members that keep heartbeating keep their generation (classic)
or epoch (share and consumer-protocol groups). The same holds for every other move of a `__consumer_offsets` partition: a
controller balance move, a node that joins or leaves, an operator's move. For each such move the
cluster recorded (leadership.parquet; every cause but a first placement, and a restarted
cluster's placement too), within [its start, its new leader loaded + checks.stable_within_s] no
classic member of a group on that partition may start a rebalance because the coordinator said
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or REBALANCE_IN_PROGRESS, and no share or consumer-protocol
member may be fenced, unless churn explains it. (A run without recorded changes is judged by the faults whose
`detail.groups` name groups, within [fault, fault end + checks.stable_within_s].)

Churn explains a rebalance when a `member_start` or `member_stop` of the group came before it by
at most the group's session timeout plus heartbeat interval (a member that stops without leaving
is expired after its session timeout; the others hear of it at their next heartbeat); in a share
or consumer-protocol group, by at most two heartbeat intervals (members are not fenced because
others come or go).
A member's join is churn until it ends, at the member's first `rebalance_end`: its start and that
end both count, and so does every moment between them. A join under way when its coordinator
moves ends well after its start: the new coordinator never had the member's pending id (Kafka keeps
pending members in memory only), so the member joins again, and that join, and the cooperative
round after it, make the group rebalance (a CI run saw a cooperative-sticky group rebalance 12.1
and 16.5 s after its sixth member started, 1.6 s after that member's join ended).
docs/experiments.md says churn "in the same window"; judging each rebalance by the churn that can
have caused it keeps the check sharp for groups that churn all the time (one churn every 30 s
would otherwise excuse every window of 30 s or more).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from coordinator.hashing import group_partition
from loadtest.check.faults import over_at
from loadtest.check.leadership import FIRST_PLACEMENT
from loadtest.check.rundata import RunData
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "failover-rebalance"
TITLE = "no rebalance caused by a coordinator failover"
REBALANCE_CAUSES = ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS")
OFFSETS = "__consumer_offsets"
Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CoordinatorMove:
    start: int
    settled: int  # when the new coordinator served (a fault's end, without recorded changes)
    groups: list[str]
    row: Row  # what the evidence shows of it
    what: str


def coordinator_moves(run: RunData) -> list[CoordinatorMove]:
    """Every move of a group coordinator the run saw: recorded, or (older runs) the faults."""
    if run.leadership is None:
        ends = over_at(run)
        return [CoordinatorMove(f["time"], ends[f["fault_id"]], list(f["detail"]["groups"]), f, f"fault {f['fault_id']}")
                for f in run.rows("fault") if f["detail"].get("groups")]
    partitions = run.info.offsets_partitions
    on: dict[int, list[str]] = defaultdict(list)
    for group in run.info.groups:
        on[group_partition(group, partitions)].append(group)
    restarts = [f["time"] for f in run.rows("fault") if f["detail"].get("action") == "restart-cluster"]
    moves = []
    for c in run.leadership:
        if c.topic != OFFSETS or c.cause == "unavailable" or not on.get(c.partition):
            continue
        if c.cause in FIRST_PLACEMENT and not (c.cause == "startup" and any(t <= c.time for t in restarts)):
            continue
        row = {"time": c.time, "kind": "leadership", "topic": c.topic, "partition": c.partition,
               "leader_epoch": c.leader_epoch, "target": c.actor, "detail": {"cause": c.cause, "previous": c.previous}}
        moves.append(CoordinatorMove(c.time, c.settled, on[c.partition], row, f"{c.cause} to epoch {c.leader_epoch}"))
    return moves


def failover_rebalance(run: RunData) -> Verdict:
    moves = coordinator_moves(run)
    if not moves:
        return not_applicable(NAME, TITLE, "no group coordinator moved")
    bound = run.info.stable_within_us
    rebalances = _rebalances(run)
    churn: dict[str, list[int]] = defaultdict(list)
    for row in (*run.rows("member_start"), *run.rows("member_stop")):
        churn[row["group"]].append(row["time"])
    joins = _first_joins(run)
    for group, spans in joins.items():
        churn[group].extend(end for _start, end in spans)
    for times in churn.values():
        times.sort()
    evidence = Evidence()
    checked = violations = excused = 0
    for move in moves:
        start, end = move.start, move.settled + bound
        for group in move.groups:
            checked += 1
            reach = run.info.churn_reach(group)
            caused = []
            for row in rebalances.get(group, ()):
                if not start <= row["time"] <= end:
                    continue
                if _churned(churn.get(group, []), row["time"] - reach, row["time"]) \
                        or any(began <= row["time"] <= ended for began, ended in joins.get(group, ())):
                    excused += 1
                else:
                    caused.append(row)
            if caused:
                violations += 1
                evidence.add(f"{group} rebalanced after its coordinator moved ({move.what})", move.row, *caused[:5])
    if violations:
        summary = f"{violations} of {plural(checked, 'group')} whose coordinator moved rebalanced because of it"
    else:
        summary = f"{plural(checked, 'group')} whose coordinator moved kept {'its' if checked == 1 else 'their'} members"
    if excused:
        summary += f" ({plural(excused, 'rebalance')} after churn)"
    return judged(NAME, TITLE, checked, violations, evidence, summary)


def _rebalances(run: RunData) -> dict[str, list[Row]]:
    """group -> its members' rebalances a coordinator can cause (classic) and fencings (share), by time."""
    out: dict[str, list[Row]] = defaultdict(list)
    for row in run.rows("rebalance_start"):
        if row["detail"].get("reason") in REBALANCE_CAUSES:
            out[row["group"]].append(row)
    for row in run.rows("fenced"):
        out[row["group"]].append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r["time"])
    return out


def _first_joins(run: RunData) -> dict[str, list[tuple[int, int]]]:
    """group -> (start, end) of each member's first join: its member_start to its first rebalance_end."""
    starts = {(row["group"], row["member"]): row["time"] for row in run.rows("member_start")}
    ends: dict[tuple[str, str], int] = {}
    for row in run.rows("rebalance_end"):
        key = (row["group"], row["member"])
        start = starts.get(key)
        if start is not None and row["time"] >= start and (key not in ends or row["time"] < ends[key]):
            ends[key] = row["time"]
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (group, member), end in ends.items():
        out[group].append((starts[(group, member)], end))
    return out


def _churned(times: list[int], since: int, until: int) -> bool:
    i = bisect.bisect_left(times, since)
    return i < len(times) and times[i] <= until
