"""Which groups read to the end: every partition of their topics has a `drained` row `complete`.

Only such a group can show a lost write (a group that stopped early simply had not got there),
and a group that never gets there is itself a verdict (incomplete-read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.check.rundata import RunData

Row = dict[str, Any]


@dataclass(slots=True)
class Drain:
    done: dict[str, list[str]] = field(default_factory=dict)  # group read to the end -> its topics
    behind: dict[str, list[Row]] = field(default_factory=dict)  # group -> its drained rows not complete
    missing: dict[str, list[str]] = field(default_factory=dict)  # group -> "topic-partition" never drained
    recorded: bool = False  # any drained row at all (a run cut short has none)


def drain_outcome(run: RunData) -> Drain:
    latest: dict[tuple[str, str, int], Row] = {}
    for row in run.rows("drained"):  # by time: the last row of a partition wins
        latest[(row["group"], row["topic"], row["partition"])] = row
    out = Drain(recorded=bool(latest))
    for group, topics in run.info.groups.items():
        behind, missing = [], []
        for topic in topics:
            partitions = partitions_of(run, topic)
            if not partitions:
                missing.append(topic)  # nothing says what its partitions are: not read to the end
            for partition in partitions:
                row = latest.get((group, topic, partition))
                if row is None:
                    missing.append(f"{topic}-{partition}")
                elif row["state"] != "complete":
                    behind.append(row)
        if behind or missing:
            out.behind[group] = behind
            out.missing[group] = missing
        else:
            out.done[group] = topics
    return out


def partitions_of(run: RunData, topic: str) -> list[int]:
    """The topic's partitions: from run.json, else as far as the end offsets and drained rows show."""
    if topic in run.info.partitions:
        return list(range(run.info.partitions[topic]))
    seen = {p for t, p in run.end_offsets() if t == topic}
    seen |= {r["partition"] for r in run.rows("drained") if r["topic"] == topic}
    return sorted(seen)
