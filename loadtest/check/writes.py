"""Did every acknowledged record reach every group that read to the end? (Jepsen's lost-write.)"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from loadtest.check.rundata import RunData
from loadtest.check.verdict import FAIL, NA, PASS, Verdict, evidence

TP = tuple[str, int]


def groups_read_to_end(run: RunData) -> tuple[dict[str, list[str]], dict[str, list[dict[str, Any]]]]:
    """(groups whose every partition drained complete -> topics, group -> its drained rows)."""
    drained: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in run.kind("drained"):
        drained[row["group"]].append(row)
    done = {}
    for group, topics in {**run.classic_groups, **run.share_groups}.items():
        rows = drained.get(group, [])
        if rows and all(r["state"] == "complete" for r in rows):
            done[group] = topics
    return done, drained


def share_start_offsets(run: RunData) -> dict[tuple[str, str, int], int]:
    """Each share partition's initial start offset: the lowest written (0 when nothing says otherwise)."""
    out: dict[tuple[str, str, int], int] = {}
    for row in run.share_records or ():
        start = row.get("start_offset")
        if start is None or start < 0 or row.get("topic") is None:
            continue
        key = (row["group"], row["topic"], row["topic_partition"])
        out[key] = min(start, out.get(key, start))
    return out


def lost_write(run: RunData) -> Verdict:
    title = "every acknowledged record reached every group that read to the end"
    produced = run.kind("produce")
    ends = run.end_offsets()
    done, _ = groups_read_to_end(run)
    if not produced:
        return Verdict("lost-write", title, NA, "no record was acknowledged to a producer")
    if not done:
        return Verdict("lost-write", title, NA, "no group read to the end, so none can show a lost write")
    received: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    for row in run.kind("delivery"):
        if row["group"] in done:
            received[row["group"]].add((row["topic"], row["partition"], row["offset"]))
    starts = share_start_offsets(run)
    checked, lost, shown = 0, 0, []
    lost_by_group: dict[str, int] = defaultdict(int)
    for group, topics in sorted(done.items()):
        wanted = set(topics)
        is_share = group in run.share_groups
        for row in produced:
            tp = (row["topic"], row["partition"])
            if row["topic"] not in wanted or row["offset"] >= ends.get(tp, row["offset"] + 1):
                continue
            if is_share and row["offset"] < starts.get((group, *tp), 0):
                continue  # before the share group's start: not its to read
            checked += 1
            if (row["topic"], row["partition"], row["offset"]) not in received[group]:
                lost += 1
                lost_by_group[group] += 1
                if len(shown) < 50:
                    shown += evidence({**row, "group": group}, note=f"acknowledged, never delivered to {group}")
    if lost:
        who = ", ".join(f"{g} {n:,}" for g, n in sorted(lost_by_group.items()))
        return Verdict("lost-write", title, FAIL, f"{lost:,} of {checked:,} (group, record) pairs lost: {who}",
                       checked, lost, shown)
    return Verdict("lost-write", title, PASS,
                   f"{len(produced):,} acknowledged records reached all {len(done)} group(s) that read to the end",
                   checked)


def incomplete_read(run: RunData) -> Verdict:
    title = "every group read to the end by the end of the drain"
    groups = {**run.classic_groups, **run.share_groups}
    if not groups:
        return Verdict("incomplete-read", title, NA, "the run has no groups")
    done, drained = groups_read_to_end(run)
    if not drained:
        if run.status != "complete":
            return Verdict("incomplete-read", title, NA, f"the run ended {run.status} before its drain")
        return Verdict("incomplete-read", title, FAIL, "no group's progress was recorded at the end",
                       len(groups), len(groups))
    ends = run.end_offsets()
    behind = [g for g in groups if g not in done]
    if behind:
        shown = []
        for group in behind:
            for row in drained.get(group, []):
                if row["state"] != "complete" or row["offset"] < ends.get((row["topic"], row["partition"]), 0):
                    shown += evidence(row, note=f"end offset {ends.get((row['topic'], row['partition']))}")
        return Verdict("incomplete-read", title, FAIL,
                       f"{len(behind)} of {len(groups)} groups did not read to the end: {', '.join(sorted(behind)[:5])}",
                       len(groups), len(behind), shown)
    return Verdict("incomplete-read", title, PASS, f"all {len(groups)} groups read to the end", len(groups))
