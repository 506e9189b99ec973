"""unfinished-share-record: an acknowledged record of a share group's topics that did not end
ACKNOWLEDGED or ARCHIVED.

The final durable state (records/share_state_final.parquet) decides: below the share
partition's start offset everything is done, above it a record must lie in an ACKNOWLEDGED or
ARCHIVED batch. Without that file the clients' view decides: the record's last successful
acknowledgement is ACCEPT or REJECT, or its last delivery reached the delivery-count limit and
was released or never acknowledged (its lock expired), which archives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loadtest.check.produced import acknowledged_records
from loadtest.check.rundata import RunData
from loadtest.check.share import TERMINAL, share_deliveries
from loadtest.check.share_records import FinalState, final_states, start_of
from loadtest.check.tables import topics_filter
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural
from loadtest.experiment import rundir

NAME = "unfinished-share-record"
TITLE = "every share record ended ACKNOWLEDGED or ARCHIVED"


@dataclass(slots=True)
class Judged:
    """Per record of one group: whether it could be judged, whether it is unfinished, and why."""

    judged: np.ndarray
    unfinished: np.ndarray
    why: dict[int, str]  # for the unfinished ones


Judge = Callable[[str, pa.Table], Judged]


def unfinished_share_record(run: RunData) -> Verdict:
    groups = run.info.share_groups
    if not groups:
        return not_applicable(NAME, TITLE, "the run has no share groups")
    if run.info.status != "complete":
        return not_applicable(NAME, TITLE, f"the run ended {run.info.status}: its records had no time to finish")
    produced = acknowledged_records(run)
    if produced.num_rows == 0:
        return not_applicable(NAME, TITLE, "no record was acknowledged to a producer")
    finals = final_states(run)
    if finals is not None:
        judge, source = _by_durable_state(finals), "the final durable state"
    else:
        judge, source = _by_clients(run), f"the clients' acknowledgements ({rundir.SHARE_STATE_FINAL} missing)"
    evidence = Evidence()
    checked = violations = 0
    for group, topics in sorted(groups.items()):
        records = topics_filter(produced, topics)
        outcome = judge(group, records)
        checked += int(outcome.judged.sum())
        found = np.flatnonzero(outcome.unfinished)
        violations += len(found)
        for i in found[: 0 if evidence.full else 50]:
            evidence.add(f"{outcome.why[int(i)]} in {group}", {**records.slice(int(i), 1).to_pylist()[0], "group": group})
    if violations:
        summary = f"{violations:,} of {checked:,} (share group, record) pairs unfinished, by {source}"
    else:
        summary = f"{plural(checked, '(share group, record) pair')} finished, by {source}"
    return judged(NAME, TITLE, checked, violations, evidence, summary)


def _by_durable_state(finals: dict[tuple[str, str, int], FinalState]) -> Judge:
    def judge(group: str, records: pa.Table) -> Judged:
        topics = records["topic"].to_numpy(zero_copy_only=False)
        partitions = records["partition"].to_numpy()
        offsets = records["offset"].to_numpy()
        out = Judged(np.ones(records.num_rows, dtype=bool), np.zeros(records.num_rows, dtype=bool), {})
        for topic, partition in set(zip(topics, partitions)):
            at = np.flatnonzero((topics == topic) & (partitions == partition))
            state = finals.get((group, topic, int(partition)))
            if state is None:
                out.unfinished[at] = True
                reason = "no durable share state for its partition"
            else:
                out.unfinished[at] = ~state.finished(offsets[at])
                reason = f"at or after start offset {state.start_offset}, not in an ACKNOWLEDGED or ARCHIVED batch"
            out.why.update((int(i), reason) for i in at[out.unfinished[at]])
        return out

    return judge


def _by_clients(run: RunData) -> Judge:
    limit = run.info.delivery_count_limit
    acks = run.table("ack")
    acks = acks.filter(pc.equal(acks["error"], "NONE"))
    deliveries = share_deliveries(run)

    def judge(group: str, records: pa.Table) -> Judged:
        last_ack = _last(acks.filter(pc.equal(acks["group"], group)), ("ack_type", "delivery_count", "time"))
        last_delivery = _last(deliveries.filter(pc.equal(deliveries["group"], group)), ("delivery_count", "time"))
        out = Judged(np.ones(records.num_rows, dtype=bool), np.zeros(records.num_rows, dtype=bool), {})
        keys = zip(*(records[c].to_pylist() for c in ("topic", "partition", "offset")))
        starts: dict[tuple[str, int], int | None] = {}
        for i, (topic, partition, offset) in enumerate(keys):
            if (topic, partition) not in starts:
                starts[(topic, partition)] = start_of(run, (group, topic, partition))
            start = starts[(topic, partition)]
            if start is None or offset < start:  # before the group's start: not its to finish
                out.judged[i] = start is not None
                continue
            reason = _client_reason(last_ack.get((topic, partition, offset)),
                                    last_delivery.get((topic, partition, offset)), limit)
            if reason is not None:
                out.unfinished[i] = True
                out.why[i] = reason
        return out

    return judge


def _client_reason(ack: tuple | None, delivery: tuple | None, limit: int) -> str | None:
    """Why the clients' view leaves a record unfinished (None: finished)."""
    if ack is not None and ack[0] in TERMINAL:
        return None
    if delivery is not None and (delivery[0] or 0) >= limit:
        if ack is None or ack[2] < delivery[1] or ack[0] == "RELEASE":
            return None  # released, or its lock expired, at the limit: archived
    if delivery is None:
        return "never delivered"
    if ack is None:
        return "never acknowledged"
    return f"last acknowledged with {ack[0]} at delivery count {ack[1]}"


def _last(table: pa.Table, columns: tuple[str, ...]) -> dict[tuple[str, int, int], tuple]:
    """(topic, partition, offset) -> the columns of its latest row (tables are by time)."""
    names = ("topic", "partition", "offset", *columns)
    values = [table[c].to_pylist() for c in names]
    return {(t, p, o): tuple(rest) for t, p, o, *rest in zip(*values)}
