"""double-acquisition: one share record held by two members at once.

Two ways to see it (docs/experiments.md, invariant 5):
- two deliveries of the record with the same delivery count: each acquisition counts one more,
  unless the partition's leadership changed between them: a count is durable only once an
  acknowledgement or release is written, so a new leader counts on from the written state and may
  hand the same count out again (KIP-932). Whether it changed is a fact of the run: each delivery
  carries the leader epoch that acquired it (raygroups' gateway reports it with every answer), and
  the run directory holds every leadership change the cluster made (leadership.parquet): two
  deliveries of one epoch came from one leader, whatever the fault schedule says; without epochs,
  a recorded change straddles them if the first was asked for while the old leader could still
  serve and the second arrived after the change began. (A run recorded before either existed is
  judged by the faults that moved the partition, from injection until its recovery was seen.)
  Or unless the first holder never acknowledged it and its share session may have closed between
  (it stopped, was fenced, or a fault dropped connections): records released because their
  session closed give their delivery back (KAFKA-17541, Kafka 4.1+);
- a delivery to member B asked for after A's delivery arrived and arriving before A's
  acknowledgement, which then succeeded, was sent: A still held the record when B got it.
"""

from __future__ import annotations

from typing import Any

from loadtest.check.faults import Move, leadership_moves
from loadtest.check.leadership import LeaderChange
from loadtest.check.history import asked_at
from loadtest.check.rundata import RunData
from loadtest.check.share import ShareRecord, acked_delivery, delivered_records, redelivered
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "double-acquisition"
TITLE = "no share record held by two members at once"
Row = dict[str, Any]


def double_acquisition(run: RunData) -> Verdict:
    checked = delivered_records(run)
    if not checked:
        return not_applicable(NAME, TITLE, "no share group received records")
    moves = leadership_moves(run)
    closed = session_ends(run)
    evidence = Evidence()
    violations = 0
    excused = 0
    for (group, topic, partition, offset), record in redelivered(run).items():
        found, moved = held_twice(record, moves.get(f"{topic}-{partition}", []), closed)
        excused += moved
        if found is not None:
            violations += 1
            why, rows = found
            evidence.add(why, *rows)
    if violations:
        summary = f"{violations:,} of {plural(checked, 'share record')} held by two members at once"
    else:
        summary = f"{plural(checked, 'share record')}, each held by one member at a time"
    if excused:
        summary += f" ({plural(excused, 'same-count redelivery', 'same-count redeliveries')} across a leader change or a closed session)"
    return judged(NAME, TITLE, checked, violations, evidence, summary)


def session_ends(run: RunData) -> dict[str | None, list[int]]:
    """When a member's share session may have closed: member -> times (None: every member's, a
    fault may drop any connection)."""
    out: dict[str | None, list[int]] = {None: [f["time"] for f in run.rows("fault")]}
    for kind in ("member_stop", "fenced"):
        for row in run.rows(kind):
            out.setdefault(row["member"], []).append(row["time"])
    return out


def held_twice(
    record: ShareRecord, moves: list[Move | LeaderChange], closed: dict[str | None, list[int]] | None = None
) -> tuple[tuple[str, list[Row]] | None, int]:
    """((why, rows) of the first double acquisition or None, how many same-count pairs a leader
    change explained)."""
    excused = 0
    by_count: dict[int, Row] = {}
    acknowledged = [id(h) for a in record.acks if a["error"] == "NONE" if (h := acked_delivery(a, record.deliveries))]
    closed = closed or {}

    def session_closed(first: Row, second: Row) -> bool:
        times = closed.get(first["member"], []) + closed.get(None, [])
        return id(first) not in acknowledged and any(asked_at(first) <= t <= second["time"] for t in times)

    for d in record.deliveries:
        if d["delivery_count"] is None:
            continue
        earlier = by_count.get(d["delivery_count"])
        by_count[d["delivery_count"]] = d
        if earlier is None:
            continue
        if leaders_differ(earlier, d, moves) or session_closed(earlier, d):
            excused += 1
            continue
        epoch = d.get("leader_epoch")
        same = f"from the same leader (epoch {epoch})" if epoch is not None else "no leader change between"
        return (f"delivered twice with delivery count {d['delivery_count']}, {same}", [earlier, d]), excused
    for ack in record.acks:
        if ack["error"] != "NONE":
            continue
        holder = acked_delivery(ack, record.deliveries)
        if holder is None:
            continue
        for other in record.deliveries:
            if other["member"] != holder["member"] and asked_at(other) >= holder["time"] \
                    and other["time"] <= asked_at(ack):
                return (f"acquired by {other['member']} while its holder still held it ({holder['member']}'s "
                        f"{ack['ack_type']} succeeded later)", [holder, other, ack]), excused
    return None, excused


def leaders_differ(first: Row, second: Row, moves: list[Move | LeaderChange]) -> bool:
    """Whether two deliveries of a record may come from two leaderships of its partition."""
    epochs = first.get("leader_epoch"), second.get("leader_epoch")
    if None not in epochs:
        return epochs[0] != epochs[1]
    return any(m.straddles(asked_at(first), second["time"]) for m in moves)
