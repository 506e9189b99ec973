"""What the decoded `__share_group_state` records say about each share partition.

`records/share_group_state.parquet` gives each share partition's initial start offset (the lowest
start offset written; compaction may have dropped older snapshots, which makes it later than it
was, so `earliest` decides first); `records/share_state_final.parquet` its final durable state.
Rows whose topic name is missing are named through run.json's topic ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from loadtest.check.rundata import RunData

SharePartition = tuple[str, str, int]  # group, topic, partition
ACKNOWLEDGED, ARCHIVED = 2, 4  # delivery_state values of a finished batch


def initial_start_offsets(run: RunData) -> dict[SharePartition, int]:
    """Each share partition's initial start offset, for the share partitions the records name.

    docs/experiments.md: the lowest start offset >= 0 written for it, 0 when the group started
    with `earliest`. `earliest` decides first: the run's topics are created empty, so such a
    group owes every record from 0, even where compaction left only a later snapshot.
    """
    return run.derived("share-initial-start", lambda: _initial_start_offsets(run))


def start_of(run: RunData, partition: SharePartition) -> int | None:
    """Where a share partition started; None when nothing says (`latest` and no record of it)."""
    if run.info.share_auto_offset_reset == "earliest":
        return 0
    return initial_start_offsets(run).get(partition)


def _initial_start_offsets(run: RunData) -> dict[SharePartition, int]:
    out: dict[SharePartition, int] = {}
    for row in _rows(run, run.share_state, ("group", "topic", "topic_id", "topic_partition", "start_offset")):
        start = row["start_offset"]
        if start is None or start < 0:  # -1 in an update: unchanged
            continue
        key = (row["group"], row["topic"], row["topic_partition"])
        out[key] = start if key not in out else min(start, out[key])
    return out


@dataclass(slots=True)
class FinalState:
    start_offset: int
    done_first: np.ndarray  # first offsets of the ACKNOWLEDGED / ARCHIVED ranges, sorted, disjoint
    done_last: np.ndarray

    def finished(self, offsets: np.ndarray) -> np.ndarray:
        """Which offsets are done: below the start offset, or inside a finished batch."""
        i = np.searchsorted(self.done_first, offsets, side="right") - 1
        inside = (i >= 0) & (offsets <= self.done_last[np.maximum(i, 0)]) if len(self.done_first) else False
        return (offsets < self.start_offset) | inside


def final_states(run: RunData) -> dict[SharePartition, FinalState] | None:
    if run.share_final is None:
        return None
    out = {}
    for row in _rows(run, run.share_final, ("group", "topic", "topic_id", "topic_partition", "start_offset", "batches")):
        if row["start_offset"] is None:
            continue
        done = _merged((b["first_offset"], b["last_offset"]) for b in row["batches"] or ()
                       if b["delivery_state"] in (ACKNOWLEDGED, ARCHIVED))
        out[(row["group"], row["topic"], row["topic_partition"])] = FinalState(
            row["start_offset"], np.array([d[0] for d in done], dtype=np.int64),
            np.array([d[1] for d in done], dtype=np.int64))
    return out


def _merged(ranges: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Sorted, disjoint ranges (a binary search over them needs no overlaps)."""
    out: list[list[int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return out


def _rows(run: RunData, table: pa.Table | None, columns: tuple[str, ...]) -> list[dict]:
    if table is None:
        return []
    present = [c for c in columns if c in table.column_names]
    rows = table.select(present).to_pylist()
    for row in rows:
        for name in columns:
            row.setdefault(name, None)  # an older records file without the column
        if not row["topic"]:
            row["topic"] = run.info.topic_names.get(str(row.get("topic_id")), row.get("topic_id"))
    return rows
