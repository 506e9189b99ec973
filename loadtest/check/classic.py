"""duplicate (classic): a record a classic group received twice that no rebalance explains.

A consumer-protocol (KIP-848) group is judged the same way: its members read and commit by offset
as classic members do, and a partition changes hands when the coordinator reconciles it (its
member epoch is the rows' generation).

A classic consumer reads a partition from the position it fetched (OffsetFetch) when it was
assigned it. Reading a record again is at-least-once delivery working as designed only when a
rebalance moved the partition before its previous owner's commit covered the record: the
re-reader's start position is at or below the record, and no commit past the record had been
answered when the re-reader asked where to start. Two deliveries to one member in one generation
after one position are a consumer (or broker) handing the same offset out twice: never explained.

Only records delivered more than once reach Python (tables.repeated); each later delivery is
judged against the one before it.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from loadtest.check.history import Commits, Positions, asked_at, member_positions, successful_commits
from loadtest.check.rundata import RunData
from loadtest.check.tables import GROUP_RECORD_KEY, repeated
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "duplicate"
TITLE = "no record of a classic or consumer group delivered twice unless a rebalance came before its commit"
ROLES = ("classic", "consumer")  # the members that read by offset
Row = dict[str, Any]


def duplicate(run: RunData) -> Verdict:
    table = run.table("delivery")
    deliveries = table.filter(pc.is_in(table["role"], pa.array(ROLES, pa.string())))
    if deliveries.num_rows == 0:
        return not_applicable(NAME, TITLE, "no classic or consumer group received records")
    by_record: dict[tuple, list[Row]] = defaultdict(list)
    for row in repeated(deliveries, GROUP_RECORD_KEY).to_pylist():  # by time
        by_record[(row["group"], row["topic"], row["partition"], row["offset"])].append(row)
    positions = member_positions(run)
    commits = successful_commits(run)
    evidence = Evidence()
    repeats = violations = 0
    for (group, topic, partition, offset), rows in by_record.items():
        history = commits.get((group, topic, partition), Commits())
        for first, second in pairwise(rows):
            repeats += 1
            why, shown = unexplained(first, second, positions, history)
            if why is not None:
                violations += 1
                evidence.add(why, first, second, *shown)
    if violations:
        summary = (f"{violations:,} of {plural(repeats, 'repeated delivery', 'repeated deliveries')} not explained "
                   f"by a rebalance before a commit ({deliveries.num_rows:,} classic and consumer deliveries)")
    elif repeats:
        summary = (f"{deliveries.num_rows:,} classic and consumer deliveries, {plural(repeats, 'repeat')}, each after a "
                   f"rebalance that came before its commit")
    else:
        summary = f"{deliveries.num_rows:,} classic and consumer deliveries, no record delivered twice"
    return judged(NAME, TITLE, deliveries.num_rows, violations, evidence, summary)


def unexplained(first: Row, second: Row, positions: dict[tuple, Positions], commits: Commits) -> tuple[str | None, list[Row]]:
    """Why `second` (a later delivery of `first`'s record) is a duplicate, and the rows that show
    it; (None, []) when a rebalance before the commit explains it."""
    offset = second["offset"]
    mine = positions.get((second["group"], second["member"], second["topic"], second["partition"]), Positions())
    i = mine.latest_at(second["time"])
    if i < 0:
        return "delivered again to a member with no start position for the partition", []
    start = mine.rows[i]
    if start["offset"] > offset:
        return f"delivered again below the re-reader's start position {start['offset']}", [start]
    if first["member"] == second["member"] and first["generation"] == second["generation"] \
            and mine.latest_at(first["time"]) == i:
        return "delivered twice to one member in one generation after one start position", [start]
    covering = commits.highest_before(asked_at(start))
    if covering is not None and covering["offset"] > offset:
        return (f"a commit of {covering['offset']} was answered before the re-reader asked where to start",
                [start, covering])
    return None, []
