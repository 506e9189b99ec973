"""How one ShareFetch's MaxRecords and MaxBytes are spent, in one place: the gateway's split over
the partition leaders it reaches and its hand-on round (cluster/clients/partition_leader.py), and
each leader's round over its own partitions (cluster/share/manager.py). Pure functions.

Kafka's broker acquires a ShareFetch's partitions one after another, each up to what the
earlier ones left of MaxRecords (ShareFetchUtils.processFetchResponse); SharePartition.acquire
keeps whole log batches, so the cap is soft by less than one batch (4.0/4.1 have no other mode;
4.2's record_limit ShareAcquireMode, ShareFetch v2, makes it exact). Here the partitions sit on
several leaders called in parallel, so the gateway cannot pass a remainder from one to the next
within one call. It splits the budget by the partitions each leader fetches (`split_budget`), a
leader given none of it answers at once (`poll_wait`), and what the leaders left goes on to the
partitions a leader did not reach because its share ran out, in one more call without waiting
(`hand_on`). Calling the leaders one by one
would keep the exact order but add a round trip per leader to every poll; giving each the whole
budget (as before) acquired up to MaxRecords per leader. The cap stays soft by less than one
batch per leader call, each leader keeping batch boundaries as Kafka does; in record_limit mode
(ShareFetch v2) each leader takes at most its share exactly, so the shares, summing to
MaxRecords, keep the whole fetch exact.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

# Kafka's ShareFetch MaxRecords when a (v0) client sends none.
DEFAULT_MAX_RECORDS = 500

# A leader reads the log only as far as the records it may acquire need: the request's max_bytes
# (50 MiB from librdkafka) read from disk on every fetch to acquire max_records of it was half
# the leader's time. Bytes per record are learnt per share partition from what it returned; the
# floor keeps small reads from costing a round per batch.
READ_FLOOR = 64 * 1024
READ_MARGIN = 1.25
FIRST_BYTES_PER_RECORD = 1024.0


def max_records(requested: int) -> int:
    """The request's MaxRecords, or Kafka's default where it sent none."""
    return requested if requested > 0 else DEFAULT_MAX_RECORDS


def acquired_count(acquired: Iterable[Any]) -> int:
    """Records in acquired ranges (first_offset, last_offset)."""
    return sum(a.last_offset - a.first_offset + 1 for a in acquired)


def left_over(max_records: int, max_bytes: int, outcomes: Iterable[Any]) -> tuple[int, int]:
    """(records, bytes) of a fetch's budget that these outcomes (records, acquired) left."""
    records, size = 0, 0
    for o in outcomes:
        records += acquired_count(o.acquired)
        size += len(o.records)
    return max_records - records, max_bytes - size


def read_cap(records_left: int, bytes_left: int, bytes_per_record: float) -> int:
    """How far a leader reads one share partition's log for `records_left` records: what they
    took there before, with a margin and a floor, never past the bytes left (at least one)."""
    return max(min(bytes_left, max(READ_FLOOR, int(records_left * bytes_per_record * READ_MARGIN))), 1)


def poll_wait(budget: int, max_wait_ms: int) -> int:
    """A leader given none of MaxRecords answers at once rather than long-poll for records it
    may not take (it still applies the acknowledgements it carries)."""
    return max_wait_ms if budget > 0 else 0


def split_budget(budget: int, weights: Sequence[int]) -> list[int]:
    """`budget` in proportion to `weights` (partitions fetched per leader), rounding down; the
    records left by rounding go one each to the first leaders with a weight, which are the
    session's rotated order, so no partition is always last."""
    total = sum(weights)
    if budget <= 0 or total <= 0:
        return [0] * len(weights)
    shares = [budget * w // total for w in weights]
    left = budget - sum(shares)
    for i, w in enumerate(weights):
        if left <= 0:
            break
        if w > 0:
            shares[i] += 1
            left -= 1
    return shares


@dataclass(frozen=True, slots=True)
class LeaderAnswer:
    """One leader's part of a ShareFetch, as the hand-on round sees it."""

    budget: int  # its share of MaxRecords
    fetching: Sequence[bool]  # per partition of its call: fetched (not only acknowledged)
    outcomes: Sequence[Any] | None  # per partition: (records, acquired, error_code); None: it was gone


def hand_on(max_records: int, max_bytes: int, answers: Mapping[Hashable, LeaderAnswer]) -> tuple[int, dict[Hashable, tuple[list[int], int]]]:
    """The hand-on round: (bytes left, leader -> (positions of its call to fetch again, records
    they may take)). Only a leader that used its whole share (or had none) is asked again, for its
    fetched partitions that acquired nothing and failed not, each acquired in one call only (as
    in Kafka's one pass), so records and acquired ranges are never two answers joined."""
    served = [o for a in answers.values() if a.outcomes for o in a.outcomes]
    left, bytes_left = left_over(max_records, max_bytes, served)
    if left <= 0 or bytes_left <= 0:
        return bytes_left, {}
    reachable: dict[Hashable, list[int]] = {}
    for leader, a in answers.items():
        if a.outcomes is None or (a.budget > 0 and sum(acquired_count(o.acquired) for o in a.outcomes) < a.budget):
            continue  # gone, or it had less than its share: nothing more there now
        untouched = [j for j, (fetched, o) in enumerate(zip(a.fetching, a.outcomes))
                     if fetched and not o.acquired and o.error_code == ErrorCode.none]
        if untouched:
            reachable[leader] = untouched
    budgets = split_budget(left, [len(p) for p in reachable.values()])
    return bytes_left, {leader: (positions, b) for (leader, positions), b in zip(reachable.items(), budgets) if b > 0}
