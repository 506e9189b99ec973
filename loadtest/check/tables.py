"""Arrow helpers the invariants share: narrowing the big event tables before Python sees them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

RECORD_KEY = ["topic", "partition", "offset"]
GROUP_RECORD_KEY = ["group", *RECORD_KEY]


def topics_filter(table: pa.Table, topics: list[str]) -> pa.Table:
    return table.filter(pc.is_in(table["topic"], pa.array(topics, pa.string())))


def role_filter(table: pa.Table, role: str) -> pa.Table:
    return table.filter(pc.equal(table["role"], role))


def distinct(table: pa.Table, keys: list[str]) -> pa.Table:
    return table.select(keys).group_by(keys).aggregate([])


def repeated(table: pa.Table, keys: list[str]) -> pa.Table:
    """The rows whose key occurs more than once (e.g. every delivery of a record delivered twice),
    by time: a run's deliveries are mostly of records delivered once, which never reach Python."""
    counts = table.select(keys).group_by(keys).aggregate([([], "count_all")])
    twice = counts.filter(pc.greater(counts["count_all"], 1)).drop_columns(["count_all"])
    if twice.num_rows == 0:
        return table.slice(0, 0)
    return table.join(twice, keys=keys, join_type="left semi").sort_by("time")
