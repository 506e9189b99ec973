"""duplicate (share), reported as `duplicate-share`: a share record delivered again after an
acknowledgement of it that succeeded with ACCEPT or REJECT, which makes it durably done.

"Again" means acquired after the acknowledged delivery: with a higher delivery count, or asked
for (its ShareFetch sent) after the acknowledgement was answered. A same-count delivery that
overlaps the acknowledged one is two members holding it at once, judged by double-acquisition.
Redeliveries after a RELEASE, a lock expiry or a failed acknowledgement are how share groups work.
"""

from __future__ import annotations

from loadtest.check.history import asked_at
from loadtest.check.rundata import RunData
from loadtest.check.share import TERMINAL, ShareRecord, acked_delivery, delivered_records, redelivered
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "duplicate-share"
TITLE = "no share record delivered again after an ACCEPT or REJECT that succeeded"


def duplicate_share(run: RunData) -> Verdict:
    checked = delivered_records(run)
    if not checked:
        return not_applicable(NAME, TITLE, "no share group received records")
    again = redelivered(run)
    evidence = Evidence()
    violations = 0
    for record in again.values():
        shown = delivered_after_done(record)
        if shown is not None:
            violations += 1
            acked, ack, later = shown
            evidence.add(f"delivered again after a successful {ack['ack_type']}", acked, ack, later)
    if violations:
        summary = (f"{violations:,} of {plural(checked, 'share record')} delivered again after a successful "
                   f"ACCEPT or REJECT")
    else:
        summary = (f"{plural(checked, 'share record')}, {len(again):,} delivered more than once, none after a "
                   f"successful ACCEPT or REJECT")
    return judged(NAME, TITLE, checked, violations, evidence, summary)


def delivered_after_done(record: ShareRecord) -> tuple[dict, dict, dict] | None:
    """(the acknowledged delivery, its ack, the delivery after it) of the first duplicate, or None."""
    for ack in record.acks:
        if ack["ack_type"] not in TERMINAL or ack["error"] != "NONE":
            continue
        acked = acked_delivery(ack, record.deliveries)
        for d in record.deliveries:
            if d is acked:
                continue
            higher = acked is not None and (d["delivery_count"] or 0) > (acked["delivery_count"] or 0)
            if higher or asked_at(d) >= ack["time"]:
                return acked, ack, d
    return None
