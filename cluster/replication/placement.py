"""Where a replicated partition's replicas live: one per node, leaders and replicas spread evenly.

Functions of data, as placement.py's. A replica is named by its replica id (one per node, as a
Kafka broker id is one per broker): no two replicas of a partition share a node, which is the
failure domain. Like Kafka's placers, partitions' replica sets are spread too, not only the
per-node counts: a node's partitions keep their other copies on as many other nodes as the
counts allow, so that when it is lost its leadership and catch-up fall on many nodes, not on one
partner (Kafka's StripedReplicaPlacer shuffles for this; here the choice is deterministic).

- `default_replication_factor`: Kafka's defaults for a small cluster as issue 25 settles them:
  3 where there are three or more nodes, else as many as there are (1 on one node, so the
  single-machine default and its speed are unchanged; 2 on two, which keeps the data through one
  disk's loss, though acks=all then waits for both while min.insync.replicas is 2).
- `assign_replicas`: a new topic's (or new partitions') replicas on the nodes holding fewest, the
  preferred leader (the first) the one of them leading fewest, the others among the equally
  loaded and leading the ones that share fewest partitions with it so far.
- `replacements`: for partitions that had a replica on a node that is gone for good, the target
  a reassignment moves them to (the lost replica's place taken by another node), so a lost
  node's data is copied back to the replication factor (KIP-455's way).
- `balance_moves`: when a node joins (or counts drift), the reassignments that even out the
  replicas per node, a few at a time: the copies move to the new node instead of a shared disk
  carrying the logs there (Kafka leaves this to an operator's reassignment or a balancer such
  as Cruise Control; issue 25 asks the controller to do it).
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


def _counts(assignments: Iterable[tuple[int, ...]]) -> tuple[Counter[int], Counter[int], Counter[tuple[int, int]]]:
    leaders: Counter[int] = Counter()
    replicas: Counter[int] = Counter()
    pairs: Counter[tuple[int, int]] = Counter()
    for assigned in assignments:
        if assigned:
            leaders[assigned[0]] += 1
            replicas.update(assigned)
            pairs.update((a, b) for a in assigned for b in assigned if a != b)
    return leaders, replicas, pairs


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
    leaders, load, pairs = _counts((existing or {}).values())
    out: dict[TP, tuple[int, ...]] = {}
    for tp in partitions:
        # Replicas on the nodes holding fewest (every node stays within one of even). The leader
        # is the node leading fewest among those that can hold one: the least loaded tier when it
        # alone fills the partition, else any node (the whole least loaded tier is then taken).
        least = min(load[r] for r in ids)
        tier = [r for r in ids if load[r] == least]
        eligible = tier if len(tier) >= replication_factor else ids
        first = min(eligible, key=lambda r: (leaders[r], load[r], r))
        chosen = [first]
        while len(chosen) < replication_factor:
            # The least loaded; among those the node leading most (the ones leading fewest stay
            # free to lead the next partitions: leaders stay within one of even too), then the one
            # that has shared fewest partitions with those chosen.
            chosen.append(min(
                (r for r in ids if r not in chosen),
                key=lambda r: (load[r], -leaders[r], sum(pairs[(r, c)] for c in chosen), r),
            ))
        assigned = tuple(chosen)
        leaders[first] += 1
        load.update(assigned)
        pairs.update((a, b) for a in assigned for b in assigned if a != b)
        out[tp] = assigned
    return out


def replacements(
    assignments: Mapping[TP, tuple[int, ...]], gone: Collection[int], replica_ids: Collection[int]
) -> dict[TP, tuple[int, ...]]:
    """For each partition with a replica in `gone`, its assignment with every gone replica replaced
    in its place (a preferred leader's replacement is preferred: the live node leading fewest;
    another's, the one holding fewest) by a live node that is not already one of its replicas. A
    gone replica with no such node left is dropped from the target (fewer live nodes than the
    replication factor); a partition with no live node at all is left out."""
    live = sorted(set(replica_ids) - set(gone))
    affected = {tp for tp, a in assignments.items() if any(r in gone for r in a)}
    leaders, load, _ = _counts(a for tp, a in assignments.items() if tp not in affected)
    load.update(r for tp in affected for r in assignments[tp] if r not in gone)  # they stay, leading or not
    out: dict[TP, tuple[int, ...]] = {}
    for tp in sorted(affected):
        assigned = assignments[tp]
        target: list[int] = []
        for i, r in enumerate(assigned):
            if r not in gone:
                target.append(r)
                continue
            candidates = [n for n in live if n not in assigned and n not in target]
            if not candidates:
                continue
            if i == 0:
                new = min(candidates, key=lambda n: (leaders[n], load[n], n))
            else:
                new = min(candidates, key=lambda n: (load[n], leaders[n], n))
            target.append(new)
        if not target:
            continue
        leaders[target[0]] += 1
        load.update(r for r in target if r not in assigned)
        out[tp] = tuple(target)
    return out


def balance_moves(
    assignments: Mapping[TP, tuple[int, ...]], replica_ids: Collection[int], max_moves: int
) -> dict[TP, tuple[int, ...]]:
    """Up to `max_moves` reassignment targets that bring the replicas per node within one of even.

    Each move takes one replica of a partition from the node holding most to the node holding
    fewest (which holds none of that partition), in the leaving replica's place in the
    assignment: a preferred leader's place too, so a node that joins leads its share once its
    copies are in sync. Where the most loaded node leads two more partitions than the least, the
    partition moved is one it leads; otherwise one it follows, so leadership stays as even as it
    was. Every partition's replicas must be in `replica_ids` (the caller moves nothing while a
    node is away); a partition moves at most once per call."""
    ids = sorted(set(replica_ids))
    if len(ids) < 2 or any(r not in ids for a in assignments.values() for r in a):
        return {}
    leaders, load, _ = _counts(assignments.values())
    current = dict(assignments)
    out: dict[TP, tuple[int, ...]] = {}
    while len(out) < max_moves:
        source = max(ids, key=lambda r: (load[r], leaders[r], -r))
        target = min(ids, key=lambda r: (load[r], leaders[r], r))
        if load[source] - load[target] < 2:
            break
        movable = sorted(tp for tp, a in current.items() if tp not in out and source in a and target not in a)
        if not movable:
            break
        lead = leaders[source] - leaders[target] >= 2
        tp = next((tp for tp in movable if (current[tp][0] == source) == lead), movable[0])
        moved = tuple(target if r == source else r for r in current[tp])
        if current[tp][0] == source:
            leaders[source] -= 1
            leaders[target] += 1
        load[source] -= 1
        load[target] += 1
        current[tp] = out[tp] = moved
    return out
