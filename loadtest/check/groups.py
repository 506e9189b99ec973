"""unstable-group: after each fault, every group that had members is seen Stable again in time.

From the fault's end (its `fault_end`, else its injection), the monitor must see the group
`Stable` in an answer to a request it sent at or after that instant, within the scenario's
`checks.stable_within_s`. A group "had members" when the monitor's latest successful view of it
before the fault was neither Empty nor Dead. When the monitor stopped (the run ended) before the
window did, a group not yet seen Stable is not judged, and the summary says so.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from loadtest.check.faults import over_at
from loadtest.check.history import asked_at
from loadtest.check.rundata import RunData
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "unstable-group"
TITLE = "every group with members Stable again soon after each fault"
Row = dict[str, Any]
IDLE = ("Empty", "Dead")


def unstable_group(run: RunData) -> Verdict:
    faults = run.rows("fault")
    if not faults:
        return not_applicable(NAME, TITLE, "no fault was injected")
    bound = run.info.stable_within_us
    ends = over_at(run)
    states: dict[str, list[Row]] = defaultdict(list)
    for row in run.rows("group_state"):
        states[row["group"]].append(row)
    watched_until = run.rows("group_state")[-1]["time"] if states else 0  # the monitor's last answer
    evidence = Evidence()
    checked = violations = unobserved = 0
    slowest = 0
    for fault in faults:
        end = ends[fault["fault_id"]]
        for group, rows in sorted(states.items()):
            before = [r for r in rows if r["time"] <= fault["time"] and r["state"] is not None]
            if not before or before[-1]["state"] in IDLE:
                continue
            stable = next((r for r in rows if r["state"] == "Stable" and asked_at(r) >= end), None)
            if stable is not None and stable["time"] <= end + bound:
                checked += 1
                slowest = max(slowest, stable["time"] - fault["time"])
                continue
            if watched_until < end + bound:
                unobserved += 1  # the monitor stopped before the window ended: cannot tell
                continue
            checked += 1
            violations += 1
            window = [r for r in rows if fault["time"] <= r["time"] <= end + bound]
            why = f"{group} not seen Stable within {bound / 1e6:g} s of fault {fault['fault_id']}'s end"
            evidence.add(why, fault, before[-1], *_changes(window))
    seconds = f"{bound / 1e6:g} s"
    if not checked:
        reason = "no group had members when a fault came" if not unobserved else \
            f"the monitor stopped less than {seconds} after every fault"
        return not_applicable(NAME, TITLE, reason)
    if violations:
        summary = f"{violations} of {plural(checked, '(fault, group) pair')} not Stable within {seconds}"
    else:
        summary = (f"{plural(checked, '(fault, group) pair')} ({plural(len(faults), 'fault')}): Stable again "
                   f"within {seconds}, the slowest {slowest / 1e6:.1f} s after its fault")
    if unobserved:
        summary += f"; {plural(unobserved, 'pair')} not judged: the monitor stopped before {seconds} had passed"
    return judged(NAME, TITLE, checked, violations, evidence, summary)


def _changes(rows: list[Row]) -> list[Row]:
    """The rows where what the monitor saw changed (state or error), to keep the evidence short."""
    out, last = [], None
    for row in rows:
        seen = (row["state"], row["error"])
        if seen != last:
            out.append(row)
            last = seen
    return out[:8]
