"""failover-rebalance: a group coordinator's failover made a group rebalance.

A failover must be invisible to a healthy group: the new coordinator replays the group and
restarts every member's session, so members that keep heartbeating keep their generation (classic)
or epoch (share). For each fault whose `detail.groups` names groups (their coordinator partition
moved), within [fault, fault end + checks.stable_within_s] no classic member of such a group may
start a rebalance because the coordinator said ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or
REBALANCE_IN_PROGRESS, and no share member may be fenced, unless churn explains it.

Churn explains a rebalance when a `member_start` or `member_stop` of the group came before it by
at most the group's session timeout plus heartbeat interval (a member that stops without leaving
is expired after its session timeout; the others hear of it at their next heartbeat); in a share
group, by at most two heartbeat intervals (members are not fenced because others come or go).
docs/experiments.md says churn "in the same window"; judging each rebalance by the churn that can
have caused it keeps the check sharp for groups that churn all the time (one churn every 30 s
would otherwise excuse every window of 30 s or more).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from loadtest.check.faults import over_at
from loadtest.check.rundata import RunData
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "failover-rebalance"
TITLE = "no rebalance caused by a coordinator failover"
REBALANCE_CAUSES = ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS")
Row = dict[str, Any]


def failover_rebalance(run: RunData) -> Verdict:
    faults = [f for f in run.rows("fault") if f["detail"].get("groups")]
    if not faults:
        return not_applicable(NAME, TITLE, "no fault moved a group coordinator")
    ends = over_at(run)
    bound = run.info.stable_within_us
    rebalances = _rebalances(run)
    churn: dict[str, list[int]] = defaultdict(list)
    for row in (*run.rows("member_start"), *run.rows("member_stop")):
        churn[row["group"]].append(row["time"])
    for times in churn.values():
        times.sort()
    evidence = Evidence()
    checked = violations = excused = 0
    for fault in faults:
        start, end = fault["time"], ends[fault["fault_id"]] + bound
        for group in fault["detail"]["groups"]:
            checked += 1
            reach = run.info.churn_reach(group)
            caused = []
            for row in rebalances.get(group, ()):
                if not start <= row["time"] <= end:
                    continue
                if _churned(churn.get(group, []), row["time"] - reach, row["time"]):
                    excused += 1
                else:
                    caused.append(row)
            if caused:
                violations += 1
                evidence.add(f"{group} rebalanced after its coordinator moved (fault {fault['fault_id']})",
                             fault, *caused[:5])
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


def _churned(times: list[int], since: int, until: int) -> bool:
    i = bisect.bisect_left(times, since)
    return i < len(times) and times[i] <= until
