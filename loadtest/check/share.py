"""Share groups' records as the share checks see them: deliveries and acknowledgements per record.

Facts the checks rest on (KIP-932, Kafka's SharePartition): a record is acquired by one member
at a time, each acquisition counting one more delivery; an acknowledgement succeeds only while
its member still holds the record; a successful ACCEPT or REJECT is durable before it is
answered, so the record never comes back; a delivery count is durable only once an
acknowledgement or release of the record is written.

Only records delivered more than once can show a duplicate or a double acquisition, so only
they (and their acks) become Python rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from loadtest.check.history import asked_at
from loadtest.check.rundata import RunData
from loadtest.check.tables import GROUP_RECORD_KEY, distinct, repeated, role_filter

Row = dict[str, Any]
Record = tuple[str, str, int, int]  # group, topic, partition, offset
TERMINAL = ("ACCEPT", "REJECT")


@dataclass(slots=True)
class ShareRecord:
    deliveries: list[Row] = field(default_factory=list)  # by time
    acks: list[Row] = field(default_factory=list)  # by time


def share_deliveries(run: RunData) -> pa.Table:
    return role_filter(run.table("delivery"), "share")


def delivered_records(run: RunData) -> int:
    return distinct(share_deliveries(run), GROUP_RECORD_KEY).num_rows


def redelivered(run: RunData) -> dict[Record, ShareRecord]:
    """Every share record delivered more than once, with its deliveries and acks."""
    return run.derived("share-redelivered", lambda: _redelivered(run))


def _redelivered(run: RunData) -> dict[Record, ShareRecord]:
    again = repeated(share_deliveries(run), GROUP_RECORD_KEY)
    out: dict[Record, ShareRecord] = defaultdict(ShareRecord)
    if again.num_rows == 0:
        return out
    for row in again.to_pylist():
        out[_key(row)].deliveries.append(row)
    acks = run.table("ack").join(distinct(again, GROUP_RECORD_KEY), keys=GROUP_RECORD_KEY, join_type="left semi")
    for row in acks.sort_by("time").to_pylist():
        record = out[_key(row)]
        if not _vacuous(row, record.acks):
            record.acks.append(row)
    return out


def _vacuous(ack: Row, earlier: list[Row]) -> bool:
    """An acknowledgement answered after a successful ACCEPT/REJECT of another delivery of the
    record (another member's, or the same member's with another delivery count) was: the broker
    may have completed the record first (it is then below the start offset, and Kafka skips such
    offsets and answers NONE), so that NONE proves nothing about who held it. Answers on two
    connections reach their clients in either order, so the other answer need not have arrived
    before this one was sent (under load CI saw the NONE sent 1.5 s before it, answered after).
    The same member's: a member that acknowledges through a share session on one gateway while
    it fetches the partition through another (its leader moved) may hold the record's redelivery
    and ACCEPT it there first; the stale acknowledgement arrives later (seen in the fault-kinds
    scenario: 15 s later, when the member's shutdown flushed it)."""
    return any(
        e["error"] == "NONE" and e["ack_type"] in ("ACCEPT", "REJECT") and e["time"] <= ack["time"]
        and (e["member"] != ack["member"] or e["delivery_count"] != ack["delivery_count"])
        for e in earlier
    )


def acked_delivery(ack: Row, deliveries: list[Row]) -> Row | None:
    """The delivery an ack answered: its member's latest one arrived before it was sent. A member
    holds a record once at a time and the broker applies an acknowledgement (offsets, no count) to
    what the member holds now: an ACCEPT a member meant for an expired delivery and sent late (its
    `delivery_count` says which it meant), answered NONE because the member holds the record again,
    acknowledged the later delivery. Without a later one, the delivery with the ack's count."""
    found = None
    sent = asked_at(ack)
    for d in deliveries:
        if d["time"] > sent:
            break
        if d["member"] == ack["member"] and (
                ack["delivery_count"] is None or (d["delivery_count"] or 0) >= ack["delivery_count"]):
            found = d
    return found


def _key(row: Row) -> Record:
    return (row["group"], row["topic"], row["partition"], row["offset"])
