"""Merging state batches (Kafka 4.x PersisterStateBatchCombiner): what the share coordinator does
with the batches a write brings and the batches it holds for a share partition."""

from __future__ import annotations

import dataclasses
import heapq

from sharestate.records import StateBatch


def _priority(batch: StateBatch) -> tuple[int, int]:
    """Kafka's compareBatchDeliveryInfo: on overlapping offsets the higher delivery count wins,
    then the higher delivery state (AVAILABLE 0 < ACQUIRED 1 < ACKNOWLEDGED 2 < ARCHIVED 4).

    A record's delivery count only grows and its state only moves on (to a terminal state, or
    back to AVAILABLE with a higher count on the next acquisition), so this is "the newer batch
    wins" for every history a share-partition leader writes, and it keeps a late or repeated
    write from undoing progress.
    """
    return batch.delivery_count, batch.delivery_state


def combine_state_batches(
    batches_so_far: tuple[StateBatch, ...] | list[StateBatch],
    new_batches: tuple[StateBatch, ...] | list[StateBatch],
    start_offset: int,
) -> tuple[StateBatch, ...]:
    """Merge two batch lists into one sorted list of non-overlapping batches.

    As PersisterStateBatchCombiner.combineStateBatches: batches ending before `start_offset`
    are dropped and one that straddles it is trimmed (unless start_offset is -1); on offsets
    where batches overlap, the one with the higher priority (`_priority`) wins. Kafka merges
    pairwise in a TreeSet and occasionally leaves two adjacent batches with equal state apart;
    this sweep gives the same state for every offset and always coalesces them.
    """
    batches = [*batches_so_far, *new_batches]
    if start_offset != -1:
        batches = [
            b if b.first_offset >= start_offset else dataclasses.replace(b, first_offset=start_offset)
            for b in batches
            if b.last_offset >= start_offset
        ]
    if len(batches) < 2:
        return tuple(batches)

    # Sweep the elementary intervals between batch boundaries; a heap holds the batches that
    # started, best priority on top, and drops those that ended when they surface.
    by_first = sorted(batches, key=lambda b: b.first_offset)
    bounds = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    heap: list[tuple[int, int, int, StateBatch]] = []
    combined: list[StateBatch] = []
    started = 0
    for low, next_low in zip(bounds, bounds[1:]):
        while started < len(by_first) and by_first[started].first_offset <= low:
            batch = by_first[started]
            count, state = _priority(batch)
            heapq.heappush(heap, (-count, -state, started, batch))
            started += 1
        while heap and heap[0][3].last_offset < low:
            heapq.heappop(heap)
        if not heap:
            continue  # a gap between batches
        winner = heap[0][3]
        last = combined[-1] if combined else None
        if (
            last is not None
            and last.last_offset + 1 == low
            and last.delivery_state == winner.delivery_state
            and last.delivery_count == winner.delivery_count
        ):
            combined[-1] = dataclasses.replace(last, last_offset=next_low - 1)
        else:
            combined.append(StateBatch(low, next_low - 1, winner.delivery_state, winner.delivery_count))
    return tuple(combined)
