"""CI's share of the composed coordinator simulation (tests/sim/coordinator_world.py): share-group
and consumer-group (KIP-848) members through the gateway's real clients, two group coordinators, a
share coordinator behind real Persisters, and the real Reconciler replacing killed actors and
moving partitions.

A failure prints the seed; `python -m tests.sim --kind coordinator --seed N -v` replays it step by
step. The planted-bug tests re-introduce bugs on purpose and require the seeds to find them, so
that a world which stopped looking would fail here.
"""

from __future__ import annotations

from collections import Counter

import pytest

from cluster.actors.coordinator_host import CoordinatorHost
from coordinator.consumer import reconciliation
from coordinator.consumer.group import NO_EPOCH, ConsumerGroup
from coordinator.consumer.records import ConsumerGroupCurrentMemberAssignmentKey
from coordinator.shard import GroupCoordinatorShard
from coordinator.share import heartbeat
from coordinator.share.share_state import EMPTY_SHARE_STATE, assignable_partitions
from tests.sim import consumer_checks, consumer_members
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
    replaced, partitions move between live actors; consumer-protocol members join, are asked to
    revoke and revoke, wait for partitions others still own, are fenced (an epoch the coordinator
    refuses, a member it no longer knows, a session expired, a revocation past the rebalance
    timeout), leave, lose answers, and their groups fail over to leaders that replay them."""
    # 30 seeds: since an operation waiting for its commit past its call is answered Deferred and
    # collected on a call of its own (one more message through the world's network), the paths
    # moved, and "consumer fenced" is first reached at seed 20-29 (one seed in forty reaches it).
    traces = [run(seed, steps=400) for seed in range(30)]
    assert sum(w.assigned() > 0 for w in traces) >= 5
    lines = [line for w in traces for line in w.trace]
    assert any("controller failover" in line for line in lines)
    assert any(line.startswith("move ") for line in lines)
    reached = Counter()
    for w in traces:
        reached.update(w.coverage())
    assert sum(any(c.owned for c in w.consumers) for w in traces) >= 10, "consumers own partitions in most seeds"
    for what, at_least in {
        "consumer joined": 60,
        "consumer revocations asked": 10,
        "consumer revocations": 10,
        "consumer waits for unreleased partitions": 20,
        "consumer fenced": 1,
        "consumer unknown member": 5,
        "consumer sessions expired": 5,
        "consumer members fenced while revoking": 2,
        "consumer leaves": 1,
        "consumer answers lost": 3,
        "consumer-group failovers": 20,
        "failovers compared": 20,
        "consumer beliefs checked": 1000,
    }.items():
        assert reached[what] >= at_least, (what, reached)


def test_kafkas_window_is_counted_not_judged(monkeypatch):
    """Seed 430 reaches the window Kafka's consumer leaves (consumer_members.py): c0, still
    reconciling the assignment of its join, reports owning nothing in a full heartbeat; the
    coordinator applies it and lets events-1..3 go to c2, but dies before answering; c0 then takes
    them. The check counts it; judged like any other belief (a client that never doubts an
    assignment after an unanswered heartbeat), it would be a violation. The seed's schedule was
    found before operations waiting for their commit were answered Deferred (one message more
    through the world's network moves it): they are not deferred here, so that it stays the
    same (test_the_seeds_reach_assignments_failovers_and_moves runs them deferred)."""
    answered_together = CoordinatorHost.execute_within
    monkeypatch.setattr(CoordinatorHost, "execute_within",
                        lambda host, topic, items, within_s: answered_together(host, topic, items, None))
    assert run(430, steps=400).coverage()["consumer partitions taken after the coordinator let them go (Kafka's window)"] == 1
    monkeypatch.setattr(consumer_members.ConsumerMember, "doubtful", property(lambda self: False, lambda self, v: None))
    with pytest.raises(Violation, match="c0 believes it owns events-1,events-2,events-3, which the coordinator no longer"):
        run(430, steps=400)


def _finds_a_violation(seeds: range) -> str:
    for seed in seeds:
        try:
            run(seed, steps=400)
        except Violation as exc:
            return str(exc)
    pytest.fail(f"no seed of {seeds} found the planted bug")


def _violations(seeds: range) -> list[str]:
    """Every seed's violation (for a planted bug that more than one check can find first)."""
    found = []
    for seed in seeds:
        try:
            run(seed, steps=400)
        except Violation as exc:
            found.append(str(exc))
    return found


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


def test_finds_a_partition_taken_before_its_owner_revoked_it(monkeypatch):
    """Planted: the reconciliation counts what a member must revoke as revoked at once, without
    waiting for its heartbeat to show them gone, so the coordinator lets go of partitions their
    owner still holds and may give them to another member. Caught as a member believing it owns
    what the coordinator no longer holds for it; and, without that check, as two members
    believing they own one partition."""
    monkeypatch.setattr(reconciliation, "_owns_revoked_partitions", lambda owned, pending: False)
    assert "which the coordinator no longer holds for it" in _finds_a_violation(range(40))
    monkeypatch.setattr(consumer_checks.ConsumerChecks, "beliefs_within_holdings", False)
    assert "both believe they own" in _finds_a_violation(range(40))


def test_finds_a_partition_given_while_another_member_owns_it(monkeypatch):
    """Planted: the reconciliation sees every partition as free (currentPartitionEpoch -1), so it
    assigns a partition another member has not revoked yet. The group's replay refuses the record
    (its partition epochs), so the heartbeat fails: the world reports an operation that raised."""
    monkeypatch.setattr(ConsumerGroup, "current_partition_epoch", lambda self, topic_id, partition: NO_EPOCH)
    assert "raised PartitionEpochError" in _finds_a_violation(range(40))


def test_finds_a_failed_write_left_in_a_consumer_group(monkeypatch):
    """Planted: a consumer group's copy is the group itself, so a failed append cannot put back what
    its batch changed: the leader keeps state its log never got, and a failover would lose it."""
    monkeypatch.setattr(ConsumerGroup, "copy", lambda self: self)
    assert "the leader holds cg-" in _finds_a_violation(range(40))


def test_finds_a_load_that_loses_what_the_old_leader_held(monkeypatch):
    """Planted: loading replays a log batch at a time, and drops the members' current assignments
    of a batch of several records (what a live write replays one record at a time keeps them): the
    new leader after a failover is not the old one."""
    replay_all = GroupCoordinatorShard.replay_all

    def planted(self, records):
        records = list(records)
        if len(records) > 1:
            records = [r for r in records if not isinstance(r.key, ConsumerGroupCurrentMemberAssignmentKey)]
        replay_all(self, records)

    monkeypatch.setattr(GroupCoordinatorShard, "replay_all", planted)
    # The lossy load also differs from the log's replay, which a seed may check first (when the log
    # grew since the old leader's last state at rest); the failover comparison must find it too.
    assert any("after a failover the new leader holds cg-" in v for v in _violations(range(40)))
