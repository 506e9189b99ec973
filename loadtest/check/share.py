"""Share groups (KIP-932): records delivered again after a durable acknowledgement, held by two
members at once, delivered beyond the delivery-count limit, or never finished.

Facts the checks rest on (seed 001 §6, Kafka's SharePartition): an ACCEPT or REJECT that
succeeds is durable before it is answered, so the record never comes back; an acknowledgement
succeeds only while its member still holds the record; and a delivery count is durable only once
an acknowledgement or release of the record is written, so after the partition's leadership
moves, the new leader counts on from what was written and may hand out a count again.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from loadtest.check.rundata import RunData
from loadtest.check.verdict import FAIL, NA, PASS, Verdict, evidence

Row = dict[str, Any]
Record = tuple[str, str, int, int]  # group, topic, partition, offset
TERMINAL = ("ACCEPT", "REJECT")
ACKNOWLEDGED, ARCHIVED = 2, 4


def _deliveries(run: RunData) -> dict[Record, list[Row]]:
    by: dict[Record, list[Row]] = defaultdict(list)
    for row in run.kind("delivery"):
        if row["role"] == "share":
            by[(row["group"], row["topic"], row["partition"], row["offset"])].append(row)
    return by


def _acks(run: RunData) -> dict[Record, list[Row]]:
    by: dict[Record, list[Row]] = defaultdict(list)
    for row in run.kind("ack"):
        by[(row["group"], row["topic"], row["partition"], row["offset"])].append(row)
    return by


def _acked_delivery(ack: Row, deliveries: list[Row]) -> Row | None:
    """The delivery an acknowledgement answered: same member and count, the latest before it was sent."""
    found = None
    for d in deliveries:
        if d["member"] == ack["member"] and d["delivery_count"] == ack["delivery_count"] and d["time"] <= ack["request_time"]:
            found = d
    return found


def duplicate_share(run: RunData) -> Verdict:
    title = "no share record delivered again after an acknowledgement that succeeded"
    deliveries = _deliveries(run)
    if not deliveries:
        return Verdict("duplicate-share", title, NA, "no share group received records")
    acks = _acks(run)
    shown: list[Row] = []
    checked = violations = 0
    for record, rows in deliveries.items():
        checked += 1
        for ack in acks.get(record, ()):
            if ack["ack_type"] not in TERMINAL or ack["error"] != "NONE":
                continue
            acked = _acked_delivery(ack, rows)
            later = [d for d in rows if d is not acked and (d["request_time"] >= ack["time"]
                     or (acked is not None and d["delivery_count"] > acked["delivery_count"]))]
            if later:
                violations += 1
                if len(shown) < 50:
                    shown += evidence(acked, ack, later[0], note=f"delivered again after a durable {ack['ack_type']}")
                break
    if violations:
        return Verdict("duplicate-share", title, FAIL, f"{violations:,} records delivered again after a durable "
                       f"ACCEPT or REJECT", checked, violations, shown)
    return Verdict("duplicate-share", title, PASS, f"{checked:,} share records; none came back after a durable "
                   f"ACCEPT or REJECT (redeliveries follow a RELEASE, a lock expiry or a failed acknowledgement)", checked)


MOVES_LEADERSHIP = ("kill", "move", "restart-cluster", "kill-node")


def _leadership_moved(run: RunData) -> dict[str, list[tuple[int, int]]]:
    """topic-partition -> (from, by) windows (µs) within which a fault moved its leadership: from
    the fault's injection to the partition serving again (its recovery; else the fault's end plus
    the stability bound), since the old leader may serve a little while after the fault began."""
    recovered = {(r["fault_id"], r["target"]): r["time"] for r in run.kind("recovery")}
    ended = {r["fault_id"]: r["time"] for r in run.kind("fault_end")}
    moved: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for fault in run.kind("fault"):
        detail = fault.get("detail") or {}
        if detail.get("action") not in MOVES_LEADERSHIP:
            continue
        for tp in detail.get("partitions", []):
            by = recovered.get((fault["fault_id"], tp), ended.get(fault["fault_id"], fault["time"]) + run.stable_within_us)
            moved[tp].append((fault["time"], by))
    return moved


def double_acquisition(run: RunData) -> Verdict:
    title = "no share record held by two members at once"
    deliveries = _deliveries(run)
    if not deliveries:
        return Verdict("double-acquisition", title, NA, "no share group received records")
    acks = _acks(run)
    moved = _leadership_moved(run)
    shown: list[Row] = []
    checked = violations = 0
    for record, rows in deliveries.items():
        checked += 1
        why = _held_twice(record, rows, acks.get(record, ()), moved)
        if why is not None:
            violations += 1
            if len(shown) < 50:
                shown += evidence(*why[1], note=why[0])
    if violations:
        return Verdict("double-acquisition", title, FAIL, f"{violations:,} records were held by two members at once",
                       checked, violations, shown)
    return Verdict("double-acquisition", title, PASS, f"{checked:,} share records, each held by one member at a time",
                   checked)


def _held_twice(record: Record, rows: list[Row], acks: Any, moved: dict[str, list[tuple[int, int]]]) -> tuple[str, list[Row]] | None:
    tp = f"{record[1]}-{record[2]}"
    by_count: dict[int, Row] = {}
    for d in rows:
        earlier = by_count.get(d["delivery_count"])
        if earlier is not None and not any(earlier["request_time"] <= by and start <= d["time"]
                                           for start, by in moved.get(tp, ())):
            return f"two deliveries with delivery count {d['delivery_count']} and no leader change between", [earlier, d]
        by_count[d["delivery_count"]] = d
    for ack in acks:
        if ack["error"] != "NONE":
            continue
        holder = _acked_delivery(ack, rows)
        if holder is None:
            continue
        for other in rows:
            if other["member"] != holder["member"] and other["request_time"] >= holder["time"] \
                    and other["time"] <= ack["request_time"]:
                return "acquired by another member while its holder still held it (its acknowledgement succeeded later)", \
                    [holder, other, ack]
    return None


def delivery_count_exceeded(run: RunData) -> Verdict:
    title = "no share record delivered more often than group.share.delivery.count.limit"
    limit = run.delivery_count_limit
    rows = [r for r in run.kind("delivery") if r["role"] == "share"]
    if not rows:
        return Verdict("delivery-count-exceeded", title, NA, "no share group received records")
    over = [r for r in rows if (r["delivery_count"] or 0) > limit]
    if over:
        return Verdict("delivery-count-exceeded", title, FAIL, f"{len(over):,} deliveries above the limit {limit}",
                       len(rows), len(over), evidence(*over[:50], note=f"limit {limit}"))
    highest = max((r["delivery_count"] or 0) for r in rows)
    return Verdict("delivery-count-exceeded", title, PASS, f"{len(rows):,} deliveries, the highest count {highest} "
                   f"(limit {limit})", len(rows))


def unfinished_share_record(run: RunData) -> Verdict:
    title = "every share record ended ACKNOWLEDGED or ARCHIVED"
    groups = run.share_groups
    if not groups:
        return Verdict("unfinished-share-record", title, NA, "the run has no share groups")
    if run.status != "complete":
        return Verdict("unfinished-share-record", title, NA, f"the run ended {run.status}: its records had no time to finish")
    ends = run.end_offsets()
    produced = [r for r in run.kind("produce") if r["offset"] < ends.get((r["topic"], r["partition"]), r["offset"] + 1)]
    finished = _finished_by_durable_state(run) if run.final_state is not None else _finished_by_clients(run)
    source = "the final durable state" if run.final_state is not None else "the clients' acknowledgements"
    shown: list[Row] = []
    checked = violations = 0
    for group, topics in sorted(groups.items()):
        for row in produced:
            if row["topic"] not in topics:
                continue
            checked += 1
            if not finished(group, row["topic"], row["partition"], row["offset"]):
                violations += 1
                if len(shown) < 50:
                    shown += evidence({**row, "group": group}, note=f"not ACKNOWLEDGED or ARCHIVED in {source}")
    if violations:
        return Verdict("unfinished-share-record", title, FAIL, f"{violations:,} of {checked:,} records unfinished "
                       f"(from {source})", checked, violations, shown)
    return Verdict("unfinished-share-record", title, PASS, f"{checked:,} (share group, record) pairs finished, by {source}",
                   checked)


def _finished_by_durable_state(run: RunData) -> Any:
    states = {(r["group"], r["topic"], r["topic_partition"]): r for r in run.final_state or ()}

    def finished(group: str, topic: str, partition: int, offset: int) -> bool:
        state = states.get((group, topic, partition))
        if state is None:
            return False
        if offset < state["start_offset"]:
            return True
        return any(b["first_offset"] <= offset <= b["last_offset"] and b["delivery_state"] in (ACKNOWLEDGED, ARCHIVED)
                   for b in state["batches"])

    return finished


def _finished_by_clients(run: RunData) -> Any:
    limit = run.delivery_count_limit
    last: dict[Record, Row] = {}
    for ack in run.kind("ack"):
        if ack["error"] == "NONE":
            last[(ack["group"], ack["topic"], ack["partition"], ack["offset"])] = ack

    def finished(group: str, topic: str, partition: int, offset: int) -> bool:
        ack = last.get((group, topic, partition, offset))
        return ack is not None and (ack["ack_type"] in TERMINAL or (ack["delivery_count"] or 0) >= limit)

    return finished
