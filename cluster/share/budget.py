"""One ShareFetch's MaxRecords over the partition leaders it reaches.

Kafka's broker acquires a ShareFetch's partitions one after another, each up to what the
earlier ones left of MaxRecords (ShareFetchUtils.processFetchResponse); SharePartition.acquire
keeps whole log batches, so the cap is soft by less than one batch (4.0/4.1 have no other mode;
4.2's record_limit ShareAcquireMode, ShareFetch v2, makes it exact). Here the partitions sit on
several leaders called in parallel, so the gateway cannot pass a remainder from one to the next
within one call. It splits the budget by the partitions each leader fetches, and hands what the
leaders left on to the partitions a leader did not reach because its share ran out, in one more
call without waiting (see PartitionLeaderClient.share_fetch). Calling the leaders one by one
would keep the exact order but add a round trip per leader to every poll; giving each the whole
budget (as before) acquired up to MaxRecords per leader. The cap stays soft by less than one
batch per leader call, each leader keeping batch boundaries as Kafka does.
"""

from __future__ import annotations

from collections.abc import Sequence


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
