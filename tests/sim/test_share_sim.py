"""CI's share of the share-side simulation: a few hundred seeds of share partitions, their write
path and the share coordinator under faults.

A failure prints the seed; `python -m tests.sim --kind share --seed N -v` replays it step by step.
"""

from __future__ import annotations

import pytest

from tests.sim.share_world import run
from tests.sim.harness import Violation

SEEDS = range(200)


@pytest.mark.parametrize("seed", SEEDS)
def test_share_partitions_keep_their_invariants(seed):
    # Every other seed lets retention move the log start under the share partitions.
    world = run(seed, steps=300, retention=seed % 2 == 1)
    assert world.trace, seed


def test_a_share_seed_replays_exactly():
    assert run(7, steps=200).trace == run(7, steps=200).trace


def test_retention_past_the_share_partition_keeps_it_delivering():
    run(10, steps=300, retention=True)
