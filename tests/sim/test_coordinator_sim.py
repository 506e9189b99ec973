"""CI's share of the composed coordinator simulation (tests/sim/coordinator_world.py): share-group
members through the gateway's real clients, two group coordinators, a share coordinator behind
real Persisters, and the real Reconciler replacing killed actors and moving partitions.

A failure prints the seed; `python -m tests.sim --kind coordinator --seed N -v` replays it step by
step. The planted-bug tests re-introduce two bugs on purpose and require the seeds to find them, so
that a world which stopped looking would fail here.
"""

from __future__ import annotations

import pytest

from cluster.actors.coordinator_host import CoordinatorHost
from coordinator.share import heartbeat
from coordinator.share.share_state import EMPTY_SHARE_STATE, assignable_partitions
from tests.sim.coordinator_world import run
from tests.sim.harness import Violation

SEEDS = range(150)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_composed_coordinator_side_keeps_its_invariants(seed):
    world = run(seed, steps=400)
    assert world.trace, seed


def test_a_coordinator_seed_replays_exactly():
    assert run(3, steps=300).trace == run(3, steps=300).trace


def test_the_seeds_reach_assignments_failovers_and_moves():
    """The world exercises what it claims: members get share partitions, actors die and are
    replaced, partitions move between live actors."""
    traces = [run(seed, steps=400) for seed in range(20)]
    assert sum(w.assigned() > 0 for w in traces) >= 5
    lines = [line for w in traces for line in w.trace]
    assert any("controller failover" in line for line in lines)
    assert any(line.startswith("move ") for line in lines)


def _finds_a_violation(seeds: range) -> str:
    for seed in seeds:
        try:
            run(seed, steps=400)
        except Violation as exc:
            return str(exc)
    pytest.fail(f"no seed of {seeds} found the planted bug")


def test_finds_initializing_partitions_assigned(monkeypatch):
    """Planted: the assignor may hand out partitions whose share state is still initializing
    (Kafka assigns only initialized ones)."""

    def planted(group, image):
        out = dict(assignable_partitions(group, image))
        for topic_id, value in (group.share_state or EMPTY_SHARE_STATE).initializing.items():
            out[topic_id] = frozenset(out.get(topic_id, frozenset()) | set(value.partitions))
        return out

    monkeypatch.setattr(heartbeat, "assignable_partitions", planted)
    assert "which has no share state" in _finds_a_violation(range(40))


def test_finds_a_release_the_old_leader_ignores(monkeypatch):
    """Planted: a coordinator actor ignores the reconciler's unload, so a moved partition stays
    active on its old leader beside the new one."""

    async def ignore(self, items):
        return None

    monkeypatch.setattr(CoordinatorHost, "unload", ignore)
    assert "at once" in _finds_a_violation(range(40))
