"""Placement and failover policy: which live actor should lead each partition, and how many actors
of each kind each Ray node runs. Functions of data.

Kafka's controller keeps a partition on its leader while that broker lives and elects another when
it does not; raygroups does the same over actors, since every actor can open every log (one disk,
shared by every node: see docs/scale-out.md). Nodes are the failure domain: partitions of a kind are
balanced over the nodes that run an actor of that kind first, and over the actors on a node second,
so that losing a node costs as few partitions as it can. When nodes join, `rebalance` moves a fair
share to them, a bounded number a pass (each move is a load and a new epoch, during which clients
of that partition get retriable errors), never a partition that moved a moment ago, except to a
fresh actor: one that came up within the cooldown (a replacement, or a joining node's) takes its
fair share at once, on its node too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cluster.calls.kinds import ActorKind, kind_for_topic

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LiveActor:
    name: str
    kind: ActorKind
    node_id: str | None = None
    # Came up within the rebalance cooldown: a replacement, or an actor a joining node started.
    fresh: bool = False


@dataclass(frozen=True, slots=True)
class RebalancePolicy:
    # Partitions moving at once, cluster-wide: the rest wait for the next pass.
    max_moves: int = 8
    # Seconds a partition that moved (for any reason) stays where it is before a rebalance may move it.
    cooldown: float = 30.0


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
    """Spread partitions over live actors of their kind: the node leading the fewest partitions of
    that kind first, then the least loaded actor on it, then by name."""
    node_of = {a.name: a.node_id for a in live}
    kind_of = {a.name: a.kind for a in live}
    load = Counter(leaders.values())
    node_load = Counter((kind_of.get(name), node_of.get(name)) for name in leaders.values())
    placement: dict[TP, str] = {}
    for tp in sorted(partitions):
        kind = kind_for_topic(tp[0])
        candidates = [a for a in live if a.kind is kind]
        if not candidates:
            continue
        chosen = min(candidates, key=lambda a: (node_load[(kind, a.node_id)], load[a.name], a.node_id or "", a.name))
        placement[tp] = chosen.name
        load[chosen.name] += 1
        node_load[(kind, chosen.node_id)] += 1
    return placement


def rebalance(
    leaders: Mapping[TP, str],
    live: Sequence[LiveActor],
    moved_at: Mapping[TP, float],
    now: float,
    policy: RebalancePolicy = RebalancePolicy(),
) -> dict[TP, str]:
    """Moves that bring each kind's partitions within one of even over the nodes running an actor
    of that kind, from the busiest node's busiest actor to the idlest node's idlest actor; then,
    on each node, moves that bring each fresh actor within one of the busiest actor of its kind
    there.

    Otherwise an uneven spread inside a node is left to `place`: actors on one node share its fate,
    so for safety only nodes differ (a cluster on one node moves a partition only to a fresh actor).
    At most `policy.max_moves`. A partition that moved within `policy.cooldown` seconds stays,
    unless it goes to a fresh actor, which prefers partitions past their cooldown: a replacement
    leads nothing, and the partitions of the actor it replaces have just failed over, so waiting
    for their cooldown left it idle that long (and on one node for good).
    """
    moves: dict[TP, str] = {}
    for kind in sorted({a.kind for a in live}, key=lambda k: k.value):
        actors = {a.name: a for a in live if a.kind is kind}
        led: dict[str, list[TP]] = {name: [] for name in actors}
        for tp, name in sorted(leaders.items()):
            if name in led and kind_for_topic(tp[0]) is kind:
                led[name].append(tp)
        _even_nodes(actors, led, moved_at, now, policy, moves)
        _fill_fresh(actors, led, moved_at, now, policy, moves)
    return moves


def _even_nodes(
    actors: Mapping[str, LiveActor], led: dict[str, list[TP]], moved_at: Mapping[TP, float], now: float,
    policy: RebalancePolicy, moves: dict[TP, str],
) -> None:
    nodes = sorted({a.node_id or "" for a in actors.values()})
    if len(nodes) < 2:
        return
    node_load = Counter({n: 0 for n in nodes})
    for name, tps in led.items():
        node_load[actors[name].node_id or ""] += len(tps)
    sources = set(nodes)  # nodes that may still give a partition away
    while len(moves) < policy.max_moves and sources:
        src = max(sources, key=lambda n: (node_load[n], n))
        dst = min(nodes, key=lambda n: (node_load[n], n))
        if node_load[src] - node_load[dst] <= 1:
            break
        new = min(_on(actors, dst), key=lambda a: (len(led[a.name]), a.name))
        on_src = sorted(_on(actors, src), key=lambda a: (-len(led[a.name]), a.name))
        tp = _movable(on_src, led, moved_at, now, policy.cooldown, new.fresh)
        if tp is None:
            sources.discard(src)
            continue
        _move(tp, new.name, led, moves)
        node_load[src] -= 1
        node_load[dst] += 1


def _fill_fresh(
    actors: Mapping[str, LiveActor], led: dict[str, list[TP]], moved_at: Mapping[TP, float], now: float,
    policy: RebalancePolicy, moves: dict[TP, str],
) -> None:
    for node in sorted({a.node_id or "" for a in actors.values() if a.fresh}):
        on_node = _on(actors, node)
        fresh = [a for a in on_node if a.fresh]
        while len(moves) < policy.max_moves:
            new = min(fresh, key=lambda a: (len(led[a.name]), a.name))
            old = max(on_node, key=lambda a: (len(led[a.name]), a.name))
            if len(led[old.name]) - len(led[new.name]) <= 1:
                break
            tp = _movable([old], led, moved_at, now, policy.cooldown, fresh=True)
            assert tp is not None  # a fresh actor takes any partition
            _move(tp, new.name, led, moves)


def _on(actors: Mapping[str, LiveActor], node: str) -> list[LiveActor]:
    return [a for a in actors.values() if (a.node_id or "") == node]


def _move(tp: TP, new: str, led: dict[str, list[TP]], moves: dict[TP, str]) -> None:
    old = next(name for name, tps in led.items() if tp in tps)
    led[old].remove(tp)
    led[new].append(tp)
    moves[tp] = new


def _movable(
    actors: Sequence[LiveActor], led: Mapping[str, list[TP]], moved_at: Mapping[TP, float], now: float,
    cooldown: float, fresh: bool,
) -> TP | None:
    """The last partition past its cooldown of the first of `actors` (busiest first) that has one;
    for a `fresh` destination, else the one of the first that leads any that moved longest ago
    (so that a partition moves twice in a row only when every other one has just moved too)."""
    for actor in actors:
        for tp in reversed(led[actor.name]):
            if now - moved_at.get(tp, float("-inf")) >= cooldown:
                return tp
    if fresh:
        for actor in actors:
            if led[actor.name]:
                return min(reversed(led[actor.name]), key=lambda tp: moved_at.get(tp, float("-inf")))
    return None


def rebalance_due(
    leaders: Mapping[TP, str], live: Sequence[LiveActor], moved_at: Mapping[TP, float], now: float, policy: RebalancePolicy = RebalancePolicy()
) -> float | None:
    """When a rebalance held back only by cooldowns could go on: the earliest cooldown's end among
    partitions a rebalance would move if none were cooling down; None if nothing waits."""
    waiting = [t for t in moved_at.values() if now - t < policy.cooldown]
    if not waiting or not rebalance(leaders, live, {}, now, policy):
        return None
    return min(waiting) + policy.cooldown


def actors_to_start(wanted: int, running: Mapping[str, int], nodes: Sequence[str]) -> Counter[str]:
    """How many actors of one kind to start on each live node: one on every node that has none (so
    that a node that joins can take partitions), and more, on the nodes with fewest, until the
    cluster runs `wanted`. Actors are never stopped for balance: an extra one costs little."""
    counts = Counter({n: running.get(n, 0) for n in nodes})
    start: Counter[str] = Counter()
    for node in sorted(nodes):
        if counts[node] == 0:
            start[node] += 1
            counts[node] += 1
    while nodes and sum(counts.values()) < wanted:
        node = min(sorted(nodes), key=lambda n: counts[n])
        start[node] += 1
        counts[node] += 1
    return start


def actors_by_node(
    wanted: Mapping[ActorKind, int], alive: Iterable[tuple[ActorKind, str | None]], nodes: Sequence[str]
) -> dict[ActorKind, Counter[str | None]]:
    """`actors_to_start` for each kind, given the (kind, node) of every actor alive or starting."""
    alive = list(alive)
    missing: dict[ActorKind, Counter[str | None]] = {}
    for kind, n in wanted.items():
        running = Counter(node for k, node in alive if k is kind and node in nodes)
        start = actors_to_start(n, running, nodes)
        if start:
            missing[kind] = Counter(start)
    return missing


def missing_actors(wanted: Mapping[ActorKind, int], running: Mapping[ActorKind, int]) -> dict[ActorKind, int]:
    """How many actors of each kind to start so that `wanted` of each are starting or running."""
    return {kind: n - running.get(kind, 0) for kind, n in wanted.items() if n > running.get(kind, 0)}


def retry_delay(failures: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Seconds before the next try after `failures` failed ones in a row: doubling, capped, so that
    a full disk is retried often at first and a long outage costs a try every `cap` seconds."""
    return min(cap, base * 2 ** max(0, failures - 1))
