"""Groups after faults: Stable again in time, and never rebalanced by a coordinator failover.

A coordinator failover must be invisible to a healthy group (SPEC.md §1, Kafka's
test_broker_failure): the new leader replays the group and restarts every member's session from
the moment it loaded, so members that keep heartbeating keep their generation and epoch.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from loadtest.check.rundata import RunData
from loadtest.check.verdict import FAIL, NA, PASS, Verdict, evidence

Row = dict[str, Any]
REBALANCE_CAUSES = ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS")


def fault_ends(run: RunData) -> dict[int, int]:
    """fault id -> when it was over: its fault_end (a pause, a restart), else when it was injected."""
    ends = {f["fault_id"]: f["time"] for f in run.kind("fault")}
    for row in run.kind("fault_end"):
        ends[row["fault_id"]] = max(ends.get(row["fault_id"], 0), row["time"])
    return ends


def _states(run: RunData) -> dict[str, list[Row]]:
    by: dict[str, list[Row]] = defaultdict(list)
    for row in run.kind("group_state"):
        by[row["group"]].append(row)
    return by


def unstable_group(run: RunData) -> Verdict:
    title = "every group Stable again soon after each fault"
    faults = run.kind("fault")
    if not faults:
        return Verdict("unstable-group", title, NA, "no fault was injected")
    bound = run.stable_within_us
    ends = fault_ends(run)
    states = _states(run)
    shown: list[Row] = []
    checked = violations = 0
    slowest = 0
    for fault in faults:
        end = ends[fault["fault_id"]]
        for group, rows in sorted(states.items()):
            before = [r for r in rows if r["time"] <= fault["time"] and r.get("state")]
            if not before or before[-1]["state"] in ("Empty", "Dead"):
                continue  # had no members when the fault came
            checked += 1
            stable = next((r for r in rows if r.get("state") == "Stable" and (r.get("request_time") or r["time"]) >= end), None)
            if stable is None or stable["time"] > end + bound:
                violations += 1
                if len(shown) < 50:
                    window = [r for r in rows if fault["time"] <= r["time"] <= end + bound][:5]
                    shown += evidence(fault, *window, note=f"{group} not seen Stable within {bound / 1e6:g} s")
            else:
                slowest = max(slowest, stable["time"] - fault["time"])
    if violations:
        return Verdict("unstable-group", title, FAIL, f"{violations} of {checked} (fault, group) pairs not Stable "
                       f"within {bound / 1e6:g} s", checked, violations, shown)
    return Verdict("unstable-group", title, PASS, f"after each of {len(faults)} faults every group with members was "
                   f"Stable again, at most {slowest / 1e6:.1f} s after it", checked)


def failover_rebalance(run: RunData) -> Verdict:
    title = "no rebalance caused by a coordinator failover"
    faults = [f for f in run.kind("fault") if (f.get("detail") or {}).get("groups")]
    if not faults:
        return Verdict("failover-rebalance", title, NA, "no fault moved a group coordinator")
    ends = fault_ends(run)
    bound = run.stable_within_us
    by_group: dict[str, list[Row]] = defaultdict(list)
    for row in run.kind("rebalance_start"):
        if (row.get("detail") or {}).get("reason") in REBALANCE_CAUSES:
            by_group[row["group"]].append(row)
    for row in run.kind("fenced"):
        by_group[row["group"]].append(row)
    churn: dict[str, list[Row]] = defaultdict(list)
    for row in run.kind("member_start") + run.kind("member_stop"):
        churn[row["group"]].append(row)
    shown: list[Row] = []
    checked = violations = 0
    for fault in faults:
        end = ends[fault["fault_id"]] + bound
        for group in fault["detail"]["groups"]:
            checked += 1
            excuse = run.session_timeout_us(group)
            caused = [r for r in by_group.get(group, ()) if fault["time"] <= r["time"] <= end
                      and not any(r["time"] - excuse <= c["time"] <= r["time"] for c in churn.get(group, ()))]
            if caused:
                violations += 1
                if len(shown) < 50:
                    shown += evidence(fault, *caused[:5], note=f"{group} rebalanced after its coordinator moved")
    if violations:
        return Verdict("failover-rebalance", title, FAIL, f"{violations} of {checked} groups whose coordinator moved "
                       f"rebalanced", checked, violations, shown)
    return Verdict("failover-rebalance", title, PASS, f"{checked} group(s) whose coordinator moved kept their generation "
                   f"and epochs", checked)
