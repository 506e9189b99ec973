"""delivery-count-exceeded: a share delivery whose count is above group.share.delivery.count.limit
(a record at the limit must be archived, not handed out again)."""

from __future__ import annotations

import pyarrow.compute as pc

from loadtest.check.rundata import RunData
from loadtest.check.share import share_deliveries
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "delivery-count-exceeded"
TITLE = "no share record delivered more often than group.share.delivery.count.limit"


def delivery_count_exceeded(run: RunData) -> Verdict:
    deliveries = share_deliveries(run)
    if deliveries.num_rows == 0:
        return not_applicable(NAME, TITLE, "no share group received records")
    limit = run.info.delivery_count_limit
    over = deliveries.filter(pc.greater(deliveries["delivery_count"], limit))
    evidence = Evidence()
    for row in over.slice(0, 50).to_pylist():
        evidence.add(f"delivery count {row['delivery_count']} above the limit {limit}", row)
    highest = pc.max(deliveries["delivery_count"]).as_py()
    if over.num_rows:
        summary = f"{over.num_rows:,} of {plural(deliveries.num_rows, 'share delivery', 'share deliveries')} above the limit {limit}"
    else:
        summary = (f"{plural(deliveries.num_rows, 'share delivery', 'share deliveries')}, the highest count "
                   f"{highest} (limit {limit})")
    return judged(NAME, TITLE, deliveries.num_rows, over.num_rows, evidence, summary)
