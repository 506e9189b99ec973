"""CI's share of the simulation: a few hundred seeds of the group coordinator under faults.

A failure prints the seed; `python -m tests.sim --seed N -v` replays it step by step.
"""

from __future__ import annotations

import pytest

from tests.sim.world import run

SEEDS = range(200)


@pytest.mark.parametrize("seed", SEEDS)
def test_group_coordinator_keeps_its_invariants(seed):
    world = run(seed, steps=400)
    # The schedule really exercised what it is for (else the seed proves nothing).
    assert world.trace, seed


def test_a_seed_replays_exactly():
    assert run(7, steps=300).trace == run(7, steps=300).trace
