"""The records a run must account for: acknowledged to a producer, below the partition's end offset."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from loadtest.check.rundata import RunData


def acknowledged_records(run: RunData) -> pa.Table:
    """The `produce` rows below their partition's `end_offset` (all of them where none was read),
    by time. A `produce` row is an acks=all acknowledgement, so the record is committed to the log."""
    produced = run.table("produce")
    ends = run.table("end_offset")
    if produced.num_rows == 0 or ends.num_rows == 0:
        return produced
    # One end per partition (the latest read is the highest).
    ends = ends.group_by(["topic", "partition"]).aggregate([("offset", "max")]).rename_columns(
        ["topic", "partition", "end_offset"])
    joined = produced.join(ends, keys=["topic", "partition"], join_type="left outer")
    below = pc.or_kleene(pc.is_null(joined["end_offset"]), pc.less(joined["offset"], joined["end_offset"]))
    return joined.filter(below).drop_columns(["end_offset"]).sort_by("time")
