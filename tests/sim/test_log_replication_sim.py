"""CI's share of the log-backed replication simulation: LogReplicas over real PartitionLogs (record
batches, follower appends, truncations, recovery after crashes, wiped directories) under the same
faults and invariants as the state machines' simulation.

A failure prints the seed; `python -m tests.sim --kind log-replication --seed N -v` replays it.
"""

from __future__ import annotations

import pytest

from tests.sim.log_replication_world import LogReplicationWorld, run

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_replicated_logs_keep_kafkas_invariants(seed, tmp_path):
    # run() raises Violation on the first broken invariant, or if the healed logs do not converge.
    assert run(seed, tmp_path, steps=400).trace


def test_a_log_replication_seed_replays_exactly(tmp_path):
    assert run(3, tmp_path / "a", steps=200).trace == run(3, tmp_path / "b", steps=200).trace


def test_the_seeds_reach_what_they_are_for(tmp_path):
    totals: dict[str, int] = {}
    for seed in range(12):
        for what, n in run(seed, tmp_path / str(seed), steps=400).counts.items():
            totals[what] = totals.get(what, 0) + n
    for what in ("acknowledged writes", "elections", "truncations", "wiped", "refused for too small an ISR"):
        assert totals.get(what, 0) > 0, (what, totals)


def test_a_world_cut_short_leaves_its_logs_closed(tmp_path):
    world = LogReplicationWorld(5, tmp_path)
    for _ in range(50):
        world.step()
    world.close()
    assert all(r.replica is None for r in world.replicas.values())
