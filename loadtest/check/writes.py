"""lost-write and incomplete-read: did every acknowledged record reach every group that read to the end?

lost-write (Jepsen's name) joins in Arrow: per group read to the end, the acknowledged records
of its topics (for a share group, from its share partitions' initial start offsets on) without
a `delivery` row of that group. incomplete-read is the liveness side: a group that never gets to
the end hides its lost writes.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from loadtest.check.drain import Drain, drain_outcome
from loadtest.check.produced import acknowledged_records
from loadtest.check.rundata import RunData
from loadtest.check.share_records import start_of
from loadtest.check.tables import RECORD_KEY, distinct, topics_filter
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

LOST_WRITE = "lost-write"
LOST_WRITE_TITLE = "every acknowledged record reached every group that read to the end"
INCOMPLETE_READ = "incomplete-read"
INCOMPLETE_READ_TITLE = "every group read to the end by the end of the drain"


def lost_write(run: RunData) -> Verdict:
    produced = acknowledged_records(run)
    if produced.num_rows == 0:
        return not_applicable(LOST_WRITE, LOST_WRITE_TITLE, "no record was acknowledged to a producer")
    drain = drain_outcome(run)
    if not drain.done:
        return not_applicable(LOST_WRITE, LOST_WRITE_TITLE, _why_none_done(run, drain))
    deliveries = run.table("delivery").select(["group", *RECORD_KEY])
    evidence = Evidence()
    checked = 0
    lost_by_group: dict[str, int] = {}
    unknown_start: list[str] = []
    for group, topics in sorted(drain.done.items()):
        expected = topics_filter(produced, topics)
        if group in run.info.share_groups:
            expected = _from_share_start(run, group, expected, unknown_start)
        received = distinct(deliveries.filter(pc.equal(deliveries["group"], group)), RECORD_KEY)
        lost = expected.join(received, keys=RECORD_KEY, join_type="left anti").sort_by("time")
        checked += expected.num_rows
        if lost.num_rows:
            lost_by_group[group] = lost.num_rows
            for row in lost.slice(0, 50).to_pylist():
                evidence.add(f"acknowledged, never delivered to {group}", {**row, "group": group})
    lost = sum(lost_by_group.values())
    extra = _caveats(run, drain, unknown_start)
    if lost:
        who = ", ".join(f"{g} {n:,}" for g, n in sorted(lost_by_group.items()))
        summary = f"{lost:,} of {checked:,} (group, record) pairs never delivered: {who}{extra}"
    else:
        summary = (f"{produced.num_rows:,} acknowledged records reached every group that read to the end "
                   f"({len(drain.done)}; {checked:,} (group, record) pairs){extra}")
    return judged(LOST_WRITE, LOST_WRITE_TITLE, checked, lost, evidence, summary)


def _from_share_start(run: RunData, group: str, records: pa.Table, unknown: list[str]) -> pa.Table:
    """A share group owes only the records from its share partitions' initial start offsets on."""
    partitions = records.select(["topic", "partition"]).group_by(["topic", "partition"]).aggregate([]).to_pylist()
    known = {"topic": [], "partition": [], "share_start": []}
    for tp in partitions:
        start = start_of(run, (group, tp["topic"], tp["partition"]))
        if start is None:
            unknown.append(f"{group}:{tp['topic']}-{tp['partition']}")
            continue
        known["topic"].append(tp["topic"])
        known["partition"].append(tp["partition"])
        known["share_start"].append(start)
    table = pa.table(known, schema=pa.schema([("topic", pa.string()), ("partition", pa.int32()),
                                              ("share_start", pa.int64())]))
    joined = records.join(table, keys=["topic", "partition"], join_type="inner")  # unknown starts drop out
    return joined.filter(pc.greater_equal(joined["offset"], joined["share_start"])).drop_columns(["share_start"])


def _caveats(run: RunData, drain: Drain, unknown_start: list[str]) -> str:
    notes = []
    if drain.behind:
        notes.append(f"{plural(len(drain.behind), 'group')} not read to the end not judged (see incomplete-read)")
    if unknown_start:
        parts = sorted(set(unknown_start))
        notes.append(f"{plural(len(parts), 'share partition')} with an unknown initial start offset skipped "
                     f"(share.auto.offset.reset=latest and no record of it: {', '.join(parts[:3])})")
    return "; " + "; ".join(notes) if notes else ""


def _why_none_done(run: RunData, drain: Drain) -> str:
    if not drain.recorded:
        if run.info.status != "complete":
            return f"the run ended {run.info.status} before its drain: no group read to the end"
        return "no group's progress was recorded at the end (no drained rows)"
    return "no group read to the end, so none can show a lost write (see incomplete-read)"


def incomplete_read(run: RunData) -> Verdict:
    groups = run.info.groups
    if not groups:
        return not_applicable(INCOMPLETE_READ, INCOMPLETE_READ_TITLE, "the run has no groups")
    drain = drain_outcome(run)
    if not drain.recorded and run.info.status != "complete":
        return not_applicable(INCOMPLETE_READ, INCOMPLETE_READ_TITLE,
                              f"the run ended {run.info.status} before its drain")
    evidence = Evidence()
    ends = run.end_offsets()
    for group in sorted(drain.behind):
        for row in drain.behind[group]:
            evidence.add(f"{group} stopped at {row['offset']} of {ends.get((row['topic'], row['partition']), '?')}", row)
    behind = sorted(drain.behind)
    if not drain.recorded:
        # A liveness failure too: the cluster did not answer ListOffsets for the whole drain.
        why = "the end offsets were never read" if not ends else "no drained row was written"
        summary = f"no group was seen reading to the end: {why} (run.json notes say more)"
    elif behind:
        shown = ", ".join(behind[:5]) + (", …" if len(behind) > 5 else "")
        never = sum(1 for g in behind if not drain.behind[g])
        summary = (f"{len(behind)} of {plural(len(groups), 'group')} did not read to the end: {shown}"
                   + (f" ({never} without any drained row)" if never else ""))
    else:
        summary = f"every group read to the end ({len(groups)})"
    return judged(INCOMPLETE_READ, INCOMPLETE_READ_TITLE, len(groups), len(behind), evidence, summary)
