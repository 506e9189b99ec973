"""CI's share of the replication simulation: a few hundred seeds of one partition on three replicas
under crashes, wiped disks, pauses, isolations and a network that reorders and drops; and the
issue's scenarios played step by step on the same world.

A failure prints the seed; `python -m tests.sim --kind replication --seed N -v` replays it.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from cluster.replication import registration
from cluster.replication.epochs import UNDEFINED_EPOCH
from cluster.replication.follower import FollowerState
from cluster.replication.leader import LeaderState
from cluster.replication.registration import NO_LEADER, reassign
from tests.sim.harness import Violation
from tests.sim.replication_world import ReplicationWorld, run

SEEDS = range(300)


@pytest.mark.parametrize("seed", SEEDS)
def test_replicas_keep_kafkas_invariants(seed):
    world = run(seed, steps=1000)
    assert world.converged()


def test_a_replication_seed_replays_exactly():
    assert run(11, steps=600).trace == run(11, steps=600).trace


def test_the_seeds_reach_what_they_are_for():
    """The schedule is worth its seeds only if it reaches the hard cases: elections, truncation of
    divergent tails, wiped replicas catching up, partitions moved to another node (and moves an
    operator changed or cancelled midway), writes refused for too small an ISR and writes a
    leader took but never answered."""
    totals: dict[str, int] = {}
    for seed in range(40):
        for what, n in run(seed, steps=1000).counts.items():
            totals[what] = totals.get(what, 0) + n
    for what in ("acknowledged writes", "elections", "truncations", "wiped", "reassignments completed",
                 "reassignments changed mid-move", "reassignments cancelled",
                 "refused for too small an ISR", "writes never answered"):
        assert totals.get(what, 0) > 0, (what, totals)


# -- the scenarios, step by step -----------------------------------------------------------

def settle(world: ReplicationWorld, rounds: int = 200) -> None:
    """Deliver everything and let every follower fetch, the clock still."""
    for _ in range(rounds):
        for rid in world.replicas:
            world.send_fetch(rid)
            world.tick(rid)
        for _ in range(len(world.network)):  # what is in flight now (answers bring new fetches)
            world.deliver()
            world.answer_acks()
        world.controller_tick()
        for rid in world.replicas:
            world.metadata(rid)
        world.answer_acks()
        world.check()


def test_an_isolated_leader_cannot_acknowledge_acks_all_writes_once_its_isr_is_too_small():
    world = ReplicationWorld(0)
    settle(world, 5)
    world.produce(0)
    settle(world, 20)
    acked_before = dict(world.acked)
    assert acked_before and world.registration.isr == (0, 1, 2)

    # Cut the leader off from its followers (not from the controller): its ISR shrinks to itself
    # after the lag time. The acks=all write it took meanwhile is never acknowledged: the high
    # watermark stops below it while the ISR is under the minimum (KAFKA-15583), so its producer
    # times out; the next write is refused before it is appended.
    leader = world.replicas[0]
    leader.isolated_until = world.now() + 10_000
    high_watermark = leader.leader.high_watermark
    world.produce(0)
    waiting = list(leader.waiting)
    assert waiting
    world.advance(400)
    settle(world, 20)
    assert world.registration.isr == (0,)
    assert set(world.acked) == set(acked_before)
    assert leader.waiting == waiting and leader.leader.high_watermark == high_watermark
    assert leader.leader.check_append(acks_all=True) is ErrorCode.not_enough_replicas

    # Now pause it past its session: the controller elects from the ISR it recorded, (0,), so the
    # partition has no leader while 0 is away; unclean election is off.
    leader.paused_since = world.now()
    world.advance(500)
    world.controller_tick()
    assert world.registration.leader == -1
    # It returns: it leads again (its log holds everything committed), and the followers, which
    # never had its unacknowledged tail, catch up; nothing acknowledged is lost.
    leader.paused_since = None
    leader.isolated_until = 0
    settle(world, 20)
    world.heal_and_converge()
    assert set(acked_before) <= set(world.acked)


def test_a_paused_leader_is_replaced_and_truncates_its_tail_when_it_resumes():
    world = ReplicationWorld(0)
    settle(world, 5)
    world.produce(0)
    settle(world, 20)
    committed = len(world.committed)
    old = world.replicas[0]
    old.paused_since = world.now()
    world.advance(500)
    world.controller_tick()
    assert world.registration.leader == 1 and world.registration.leader_epoch == 1
    for rid in (1, 2):
        world.metadata(rid)
    settle_without(world, 0, 20)
    world.produce(1)
    settle_without(world, 0, 20)
    new_ids = {i for _, i in world.replicas[1].log[committed:]}
    assert new_ids and new_ids <= set(world.acked)

    # The zombie resumes still believing it leads epoch 0: it takes a write (its producers are
    # not told otherwise yet) but cannot commit it: its followers fetch from epoch 1's leader.
    old.paused_since = None
    world.produce(0)
    zombie_tail = [i for _, i in old.log[committed:]]
    assert zombie_tail and not set(zombie_tail) & set(world.acked)
    # The metadata reaches it: it follows epoch 1, truncates the tail it alone had, and catches up.
    world.metadata(0)
    assert old.follower is not None and old.follower.leader == 1
    settle(world, 10)
    assert world.replicas[0].log == world.replicas[1].log
    assert not set(zombie_tail) & {i for _, i in world.replicas[0].log}
    assert world.counts.get("truncations", 0) >= 1


def test_a_wiped_replica_catches_up_from_the_leader():
    world = ReplicationWorld(0)
    settle(world, 5)
    for _ in range(5):
        world.produce(0)
    settle(world, 20)
    victim = world.replicas[2]
    world.crash(victim)
    world.controller_tick()
    assert 2 not in world.registration.isr
    world.restart(victim, wipe=True)
    world.controller_tick()
    assert victim.log == []
    settle(world, 30)
    assert victim.log == world.replicas[0].log
    assert world.registration.isr == (0, 1, 2)


def settle_without(world: ReplicationWorld, away: int, rounds: int) -> None:
    """settle() while replica `away` is paused: its mail waits."""
    for _ in range(rounds):
        for rid in world.replicas:
            if rid != away:
                world.send_fetch(rid)
                world.tick(rid)
        for _ in range(len(world.network)):
            world.deliver()
        world.answer_acks()
        world.check()


def test_a_partition_moves_to_another_node_by_copying_its_log():
    """Kafka's reassignment: node 3 gets a replica, catches up from the leader and joins the ISR;
    then node 0, the leader, leaves the assignment, hands over to 3 and deletes its log."""
    world = ReplicationWorld(0)
    settle(world, 5)
    for _ in range(6):
        world.produce(0)
    settle(world, 20)
    acked = set(world.acked)
    assert acked and world.replicas[3].log == []
    reg, error = reassign(world.registration, (3, 1, 2), world.controller_alive)
    assert error is ErrorCode.none and reg.adding == (3,) and reg.removing == (0,)
    world._register(reg, "reassign to (3, 1, 2)")
    settle(world, 30)
    reg = world.registration
    assert (reg.replicas, reg.leader, reg.reassigning) == ((3, 1, 2), 3, False)
    assert world.replicas[0].log == [] and world.replicas[0].leader is None
    assert {i for _, i in world.replicas[3].log} >= acked
    world.produce(3)
    settle(world, 20)
    world.heal_and_converge()
    assert world.replicas[3].log == world.replicas[1].log == world.replicas[2].log


# -- planted bugs: the seeds must find them ---------------------------------------------------------


def _finds_a_violation(seeds: range) -> str:
    for seed in seeds:
        try:
            run(seed, steps=1000)
        except Violation as exc:
            return str(exc)
    pytest.fail(f"no seed of {seeds} found the planted bug")


def test_finds_an_unclean_election(monkeypatch):
    """Planted: the controller elects any live replica, in sync or not (unclean election on)."""

    def unclean(replicas, isr, alive):
        return next((r for r in replicas if r in alive), NO_LEADER)

    monkeypatch.setattr(registration, "_elect", unclean)
    _finds_a_violation(range(60))


def test_finds_a_leader_that_ignores_divergence(monkeypatch):
    """Planted: the leader never tells a follower its log diverged (no KIP-320 check), so a
    follower keeps a tail the leader never had."""
    original = LeaderState.follower_fetch

    def blind(self, replica, incarnation, current_leader_epoch, fetch_offset, last_fetched_epoch, now_ms):
        return original(self, replica, incarnation, current_leader_epoch, fetch_offset, UNDEFINED_EPOCH, now_ms)

    monkeypatch.setattr(LeaderState, "follower_fetch", blind)
    _finds_a_violation(range(150))


def test_finds_a_follower_that_takes_any_answer(monkeypatch):
    """Planted: a follower applies every answer whose position still matches, duplicates and
    answers to earlier fetches included (the bug the review found)."""

    def credulous(self, sent):
        return sent.current_leader_epoch == self.leader_epoch and sent.fetch_offset == self.log_end_offset

    monkeypatch.setattr(FollowerState, "take", credulous)
    _finds_a_violation(range(3000))
