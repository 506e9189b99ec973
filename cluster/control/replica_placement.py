"""Where a replicated partition's replicas live: one per node, leaders and replicas spread evenly.

Functions of data, as placement.py's. A replica is named by its replica id (one per node, as a
Kafka broker id is one per broker): no two replicas of a partition share a node, which is the
failure domain (Kafka's rack-aware StripedReplicaPlacer with every node its own rack).

- `default_replication_factor`: Kafka's defaults for a small cluster as issue 25 settles them:
  3 where there are three or more nodes, else as many as there are (1 on one node, so the
  single-machine default and its speed are unchanged; 2 on two, which keeps the data through one
  disk's loss, though acks=all then waits for both while min.insync.replicas is 2).
- `assign_replicas`: a new topic's (or new partitions') replicas on the nodes holding fewest, the
  preferred leader (the first) the one of them leading fewest.
- `replacements`: for partitions that had a replica on a node that is gone for good, the target
  a reassignment moves them to (the lost replica's place taken by the least loaded other node),
  so a lost node's data is copied back to the replication factor (KIP-455's way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

TP = tuple[str, int]


def default_replication_factor(nodes: int) -> int:
    return max(1, min(3, nodes))


def replication_factor_error(requested: int, nodes: int) -> str | None:
    """Why a requested replication factor cannot be had (Kafka's INVALID_REPLICATION_FACTOR), or
    None; -1 asks for the default."""
    if requested == -1:
        return None
    if requested < 1:
        return f"replication factor must be at least 1, not {requested}"
    if requested > nodes:
        return f"replication factor {requested} is larger than the {nodes} node(s) that can hold a replica"
    return None


def _counts(assignments: Iterable[tuple[int, ...]]) -> tuple[Counter[int], Counter[int]]:
    leaders: Counter[int] = Counter()
    replicas: Counter[int] = Counter()
    for assigned in assignments:
        if assigned:
            leaders[assigned[0]] += 1
            replicas.update(assigned)
    return leaders, replicas


def assign_replicas(
    partitions: Sequence[TP],
    replica_ids: Collection[int],
    replication_factor: int,
    existing: Mapping[TP, tuple[int, ...]] | None = None,
) -> dict[TP, tuple[int, ...]]:
    """Replicas for each of `partitions`, in order, counting what `existing` already places."""
    ids = sorted(set(replica_ids))
    if not 1 <= replication_factor <= len(ids):
        raise ValueError(f"replication factor {replication_factor} with {len(ids)} node(s)")
    leaders, load = _counts((existing or {}).values())
    out: dict[TP, tuple[int, ...]] = {}
    for tp in partitions:
        # Replicas on the nodes holding fewest (every node stays within one of even). The leader
        # is the node leading fewest among those that can hold one: the least loaded tier when it
        # alone fills the partition, else any node (the whole least loaded tier is then taken).
        least = min(load[r] for r in ids)
        tier = [r for r in ids if load[r] == least]
        eligible = tier if len(tier) >= replication_factor else ids
        first = min(eligible, key=lambda r: (leaders[r], load[r], r))
        rest = sorted((r for r in ids if r != first), key=lambda r: (load[r], -leaders[r], r))
        assigned = (first, *rest[: replication_factor - 1])
        leaders[first] += 1
        load.update(assigned)
        out[tp] = assigned
    return out


def replacements(
    assignments: Mapping[TP, tuple[int, ...]], gone: Collection[int], replica_ids: Collection[int]
) -> dict[TP, tuple[int, ...]]:
    """For each partition with a replica in `gone`, its assignment with every gone replica replaced
    (in its place, so a preferred leader's replacement is preferred) by the live node holding
    fewest replicas that is not already one of its replicas. A partition with no such node left
    keeps what it has (fewer nodes than its replication factor: nothing to move to)."""
    live = sorted(set(replica_ids) - set(gone))
    _, load = _counts(a for a in assignments.values())
    out: dict[TP, tuple[int, ...]] = {}
    for tp, assigned in sorted(assignments.items()):
        if not any(r in gone for r in assigned):
            continue
        target = list(assigned)
        for i, r in enumerate(target):
            if r not in gone:
                continue
            candidates = [n for n in live if n not in target]
            if not candidates:
                break
            new = min(candidates, key=lambda n: (load[n], n))
            target[i] = new
            load[new] += 1
        else:
            out[tp] = tuple(target)
    return out
