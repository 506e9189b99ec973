"""Placement and failover policy: which live actor should lead each partition. Functions of data.

Kafka's controller keeps a partition on its leader while that broker lives and elects another when
it does not; raygroups does the same over actors, since every actor can open every log (one disk).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cluster.actors.common import ActorKind, kind_for_topic

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LiveActor:
    name: str
    kind: ActorKind
    node_id: str | None = None


def desired_leadership(partitions: Iterable[TP], current: Mapping[TP, str], live: Sequence[LiveActor]) -> dict[TP, str]:
    """Every partition led by a live actor of its kind.

    A partition stays on its leader while that actor lives (a move costs a load and a new epoch);
    the others go where `place` puts them. A partition whose kind has no live actor is left out:
    it is unavailable until one starts.
    """
    by_name = {a.name: a for a in live}
    desired: dict[TP, str] = {}
    orphans: list[TP] = []
    for tp in partitions:
        leader = by_name.get(current.get(tp, ""))
        if leader is not None and leader.kind is kind_for_topic(tp[0]):
            desired[tp] = leader.name
        else:
            orphans.append(tp)
    desired.update(place(orphans, live, desired))
    return desired


def place(partitions: Iterable[TP], live: Sequence[LiveActor], leaders: Mapping[TP, str]) -> dict[TP, str]:
    """Spread partitions over live actors of their kind: least loaded actor first, then the least
    loaded node (so that one node's loss costs as few partitions as it can), then by name."""
    node_of = {a.name: a.node_id for a in live}
    load = Counter(leaders.values())
    node_load = Counter(node_of.get(name) for name in leaders.values())
    placement: dict[TP, str] = {}
    for tp in sorted(partitions):
        kind = kind_for_topic(tp[0])
        candidates = [a for a in live if a.kind is kind]
        if not candidates:
            continue
        chosen = min(candidates, key=lambda a: (load[a.name], node_load[a.node_id], a.name))
        placement[tp] = chosen.name
        load[chosen.name] += 1
        node_load[chosen.node_id] += 1
    return placement


def missing_actors(wanted: Mapping[ActorKind, int], running: Mapping[ActorKind, int]) -> dict[ActorKind, int]:
    """How many actors of each kind to start so that `wanted` of each are starting or running."""
    return {kind: n - running.get(kind, 0) for kind, n in wanted.items() if n > running.get(kind, 0)}


def retry_delay(failures: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Seconds before the next try after `failures` failed ones in a row: doubling, capped, so that
    a full disk is retried often at first and a long outage costs a try every `cap` seconds."""
    return min(cap, base * 2 ** max(0, failures - 1))
