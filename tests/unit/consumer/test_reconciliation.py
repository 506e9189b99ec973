"""KIP-848's reconciliation (coordinator/consumer/reconciliation.py): every case of Kafka's
CurrentAssignmentBuilderTest (trunk of October 2024), then the member's lifecycle, then properties
of a small group driven through random target assignments by clients that acknowledge revocations
late: no partition is ever held by two members, epochs never go back, and once the target stops
changing and the clients report what they own, every member ends STABLE at the target epoch with
exactly its target.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.consumer.member import ConsumerGroupMember, validate_member_transition
from coordinator.member_state import MemberState
from coordinator.consumer.reconciliation import FencedMemberEpochError, reconcile
from kernel.lifecycle import IllegalTransition

# Kafka draws random topic ids; fixed ones keep the runs identical.
TOPIC_ID_1 = uuid.UUID(int=1)
TOPIC_ID_2 = uuid.UUID(int=2)


def mk_topic_assignment(topic_id, *partitions):
    """Kafka's AssignmentTestUtil.mkTopicAssignment."""
    return topic_id, frozenset(partitions)


def mk_assignment(*topic_assignments):
    """Kafka's AssignmentTestUtil.mkAssignment."""
    return dict(topic_assignments)


def owned(*topic_partitions):
    """A heartbeat's owned partitions: Kafka's list of ConsumerGroupHeartbeatRequestData.TopicPartitions."""
    return [(topic_id, list(partitions)) for topic_id, partitions in topic_partitions]


def epoch(value):
    """withCurrentPartitionEpoch((topicId, partitionId) -> value)."""
    return lambda topic_id, partition: value


def member(state, member_epoch, previous_member_epoch, assigned, pending=None):
    return ConsumerGroupMember(
        "member",
        state=state,
        member_epoch=member_epoch,
        previous_member_epoch=previous_member_epoch,
        assigned_partitions=assigned,
        partitions_pending_revocation=pending or {},
    )


# -- Kafka's CurrentAssignmentBuilderTest -------------------------------------------------------------


def test_stable_to_stable():
    m = member(MemberState.STABLE, 10, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)))
    updated = reconcile(m, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)), epoch(10))
    assert updated == member(MemberState.STABLE, 11, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)))


def test_stable_to_stable_with_new_partitions():
    m = member(MemberState.STABLE, 10, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)))
    updated = reconcile(m, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6, 7)), epoch(-1))
    assert updated == member(MemberState.STABLE, 11, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6, 7)))


def test_stable_to_unrevoked_partitions():
    m = member(MemberState.STABLE, 10, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)))
    updated = reconcile(m, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 5, 6, 7)), epoch(-1))
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1), mk_topic_assignment(TOPIC_ID_2, 4)),
    )


def test_stable_to_unreleased_partitions():
    m = member(MemberState.STABLE, 10, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)))
    updated = reconcile(m, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6, 7)), epoch(10))
    assert updated == member(MemberState.UNRELEASED_PARTITIONS, 11, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)))


def test_stable_to_unreleased_partitions_with_owned_partitions_not_having_revoked_partitions():
    m = member(MemberState.STABLE, 10, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 6)))
    updated = reconcile(
        m, 11,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5, 7)),
        lambda topic_id, _: 10 if topic_id == TOPIC_ID_2 else -1,
        owned(),
    )
    assert updated == member(MemberState.UNRELEASED_PARTITIONS, 11, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 4, 5)))


def test_unrevoked_partitions_to_stable():
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1), mk_topic_assignment(TOPIC_ID_2, 4)),
    )
    updated = reconcile(
        m, 11,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)),
        epoch(-1),
        owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [5, 6])),
    )
    assert updated == member(MemberState.STABLE, 11, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))


def test_remains_in_unrevoked_partitions():
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1), mk_topic_assignment(TOPIC_ID_2, 4)),
    )
    target = mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6))

    assert reconcile(m, 12, target, epoch(-1), None) == m
    assert reconcile(m, 12, target, epoch(-1), owned((TOPIC_ID_1, [1, 2, 3]), (TOPIC_ID_2, [5, 6]))) == m
    assert reconcile(m, 12, target, epoch(-1), owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [4, 5, 6]))) == m


def test_unrevoked_partitions_to_unrevoked_partitions():
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1), mk_topic_assignment(TOPIC_ID_2, 4)),
    )
    updated = reconcile(
        m, 12,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6)),
        epoch(-1),
        owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [5, 6])),
    )
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, 11, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2), mk_topic_assignment(TOPIC_ID_2, 5)),
    )


def test_unrevoked_partitions_to_unreleased_partitions():
    m = member(MemberState.UNREVOKED_PARTITIONS, 11, 10, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))
    updated = reconcile(
        m, 11,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 5, 6, 7)),
        epoch(10),
        owned((TOPIC_ID_1, [2, 3]), (TOPIC_ID_2, [5, 6])),
    )
    assert updated == member(MemberState.UNRELEASED_PARTITIONS, 11, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))


def test_unreleased_partitions_to_stable():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))
    updated = reconcile(m, 12, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)), epoch(10))
    assert updated == member(MemberState.STABLE, 12, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))


def test_unreleased_partitions_to_stable_with_new_partitions():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))
    updated = reconcile(m, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 5, 6, 7)), epoch(-1))
    assert updated == member(MemberState.STABLE, 11, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 5, 6, 7)))


def test_unreleased_partitions_to_unreleased_partitions():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))
    updated = reconcile(m, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3, 4), mk_topic_assignment(TOPIC_ID_2, 5, 6, 7)), epoch(10))
    assert updated == m


def test_unreleased_partitions_to_unrevoked_partitions():
    m = member(MemberState.UNRELEASED_PARTITIONS, 11, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 2, 3), mk_topic_assignment(TOPIC_ID_2, 5, 6)))
    updated = reconcile(m, 12, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6)), epoch(10))
    assert updated == member(
        MemberState.UNREVOKED_PARTITIONS, 11, 11,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2), mk_topic_assignment(TOPIC_ID_2, 5)),
    )


def test_unknown_state():
    m = member(
        MemberState.UNKNOWN, 11, 11,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2), mk_topic_assignment(TOPIC_ID_2, 5)),
    )
    target = mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6))

    # In an unknown state the member is first fenced, to force a reset of its client-side state.
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 12, target, epoch(10))

    # Then it rejoins owning no partitions.
    updated = reconcile(m, 12, target, epoch(11), owned())
    assert updated == member(MemberState.STABLE, 12, 11, mk_assignment(
        mk_topic_assignment(TOPIC_ID_1, 3), mk_topic_assignment(TOPIC_ID_2, 6)))


# -- beyond Kafka's cases ------------------------------------------------------------------------------


def test_unknown_state_fenced_while_it_reports_partitions():
    # Kafka's test only leaves ownedTopicPartitions unset; a non-empty list fences too.
    m = member(MemberState.UNKNOWN, 11, 11, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3)))
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 12, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 3)), epoch(-1), owned((TOPIC_ID_1, [3])))
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 12, {}, epoch(-1), owned((TOPIC_ID_1, [])))  # a topic with no partitions is not empty


def test_stable_at_target_epoch_is_returned_unchanged():
    m = member(MemberState.STABLE, 11, 10, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1)))
    # Even with a different target: only a new epoch restarts the reconciliation.
    assert reconcile(m, 11, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)), epoch(-1)) is m


def test_revocation_already_acknowledged_skips_unrevoked_partitions():
    # The heartbeat that brings the new target already shows the partitions gone: nothing to wait for.
    m = member(MemberState.STABLE, 10, 9, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2)))
    updated = reconcile(m, 11, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)), epoch(-1), owned((TOPIC_ID_1, [2])))
    assert updated == member(MemberState.STABLE, 11, 10, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)))


def test_own_partition_pending_revocation_back_in_target_is_unreleased():
    # Kafka's trunk of October 2024 asks the epoch of every partition it does not assign yet, the
    # member's own partitions pending revocation included: one given back waits a round.
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 9,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1)),
    )
    mine = {(TOPIC_ID_1, 1): 10, (TOPIC_ID_1, 2): 10}
    updated = reconcile(
        m, 12, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1, 2)),
        lambda t, p: mine.get((t, p), -1), owned((TOPIC_ID_1, [2])),
    )
    # (The previous epoch is the one the member had, 10: Kafka bumps from the member, not from 11.)
    assert updated == member(
        MemberState.UNRELEASED_PARTITIONS, 12, 10, mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2))
    )


def test_owned_partitions_as_a_mapping():
    m = member(
        MemberState.UNREVOKED_PARTITIONS, 10, 10,
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2)),
        mk_assignment(mk_topic_assignment(TOPIC_ID_1, 1)),
    )
    target = mk_assignment(mk_topic_assignment(TOPIC_ID_1, 2))
    assert reconcile(m, 11, target, epoch(-1), {TOPIC_ID_1: {1, 2}}) is m
    assert reconcile(m, 11, target, epoch(-1), {TOPIC_ID_1: {2}}).state is MemberState.STABLE


def test_member_canonical_form_and_builder():
    m = ConsumerGroupMember(
        "m", assigned_partitions={TOPIC_ID_1: [1, 2], TOPIC_ID_2: []}, subscribed_topic_names=["a"], state=2,
    )
    assert m.assigned_partitions == {TOPIC_ID_1: frozenset({1, 2})}
    assert m.subscribed_topic_names == frozenset({"a"})
    assert m.state is MemberState.UNRELEASED_PARTITIONS
    assert (m.member_epoch, m.previous_member_epoch, m.rebalance_timeout_ms) == (0, -1, -1)
    bumped = replace(m, member_epoch=5).update_member_epoch(6)
    assert (bumped.member_epoch, bumped.previous_member_epoch) == (6, 5)
    assert MemberState.from_value(3) is MemberState.UNKNOWN
    assert MemberState.from_value(1) is MemberState.UNREVOKED_PARTITIONS
    assert not m.is_reconciled_to(0)
    assert replace(m, state=MemberState.STABLE).is_reconciled_to(0)


def test_member_lifecycle():
    S = MemberState
    for src in (S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS):
        for dst in (S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS):
            validate_member_transition(src, dst)
    validate_member_transition(S.UNKNOWN, S.STABLE)
    validate_member_transition(S.UNKNOWN, S.UNRELEASED_PARTITIONS)
    for src, dst in [(S.UNKNOWN, S.UNREVOKED_PARTITIONS), (S.STABLE, S.UNKNOWN), (S.UNKNOWN, S.UNKNOWN)]:
        with pytest.raises(IllegalTransition):
            validate_member_transition(src, dst)


# -- properties: a small group, random targets, clients that acknowledge late -----------------------------

TOPICS = (TOPIC_ID_1, TOPIC_ID_2)
PARTITIONS_PER_TOPIC = 3
ALL_PARTITIONS = tuple((t, p) for t in TOPICS for p in range(PARTITIONS_PER_TOPIC))
MEMBER_IDS = ("m0", "m1", "m2", "m3")


class PartitionEpochs:
    """Kafka's ConsumerGroup.currentPartitionEpoch with its checks (addPartitionEpochs and
    removePartitionEpochs throw IllegalStateException): a partition gets an epoch only when it has
    none, and loses it only at the epoch it was given."""

    def __init__(self) -> None:
        self.epochs: dict[tuple[uuid.UUID, int], int] = {}

    def __call__(self, topic_id, partition) -> int:
        return self.epochs.get((topic_id, partition), -1)

    def update(self, old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
        for partitions in (old.assigned_partitions, old.partitions_pending_revocation):
            for t, ps in partitions.items():
                for p in ps:
                    assert self.epochs.pop((t, p), None) == old.member_epoch, f"{t}-{p} owned at another epoch"
        for partitions in (new.assigned_partitions, new.partitions_pending_revocation):
            for t, ps in partitions.items():
                for p in ps:
                    assert (t, p) not in self.epochs, f"{t}-{p} given to {new.member_id} but still owned"
                    self.epochs[(t, p)] = new.member_epoch


@dataclass
class Client:
    """The consumer: it owns the assignment it last took, and takes the one the last heartbeat
    response carried only when it acknowledges (late, at random)."""

    owned: frozenset[tuple[uuid.UUID, int]] = frozenset()
    received: frozenset[tuple[uuid.UUID, int]] = frozenset()

    def report(self) -> list[tuple[uuid.UUID, list[int]]]:
        return [(t, sorted(p for tt, p in self.owned if tt == t)) for t in sorted({t for t, _ in self.owned})]


def flat(partitions) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((t, p) for t, ps in partitions.items() for p in ps)


@dataclass
class Group:
    member_ids: tuple[str, ...]
    target_epoch: int = 0
    target: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    clients: dict[str, Client] = field(default_factory=dict)
    epochs: PartitionEpochs = field(default_factory=PartitionEpochs)

    def __post_init__(self) -> None:
        self.members = {m: ConsumerGroupMember(m) for m in self.member_ids}
        self.clients = {m: Client() for m in self.member_ids}

    def new_target(self, owners: tuple[int | None, ...]) -> None:
        """A new target assignment (exclusive, as an assignor's is) at the next epoch."""
        self.target_epoch += 1
        self.target = {m: {} for m in self.member_ids}
        for (t, p), owner in zip(ALL_PARTITIONS, owners):
            if owner is not None and owner < len(self.member_ids):
                mid = self.member_ids[owner]
                self.target[mid][t] = self.target[mid].get(t, frozenset()) | {p}

    def heartbeat(self, mid: str, ack: bool, report: bool) -> None:
        client = self.clients[mid]
        if ack:
            client.owned = client.received
        old = self.members[mid]
        new = reconcile(
            old, self.target_epoch, self.target.get(mid, {}), self.epochs, client.report() if report else None
        )
        assert reconcile(
            old, self.target_epoch, self.target.get(mid, {}), self.epochs, client.report() if report else None
        ) == new  # a pure function
        self.epochs.update(old, new)
        self.members[mid] = new
        client.received = flat(new.assigned_partitions)  # the response carries the assigned partitions

        assert new.member_epoch >= old.member_epoch, f"{mid}'s epoch went back"
        assert new.member_epoch <= self.target_epoch
        self.check_exclusive()

    def check_exclusive(self) -> None:
        held: dict[tuple[uuid.UUID, int], str] = {}
        for mid, m in self.members.items():
            # The coordinator's view: what a member is assigned or still revoking is its own.
            for tp in flat(m.assigned_partitions) | flat(m.partitions_pending_revocation):
                assert tp not in held, f"{tp} held by {held[tp]} and {mid}"
                held[tp] = mid
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for mid, c in self.clients.items():
            # The clients' view: no partition consumed by two clients at once.
            for tp in c.owned:
                assert tp not in owners, f"{tp} owned by clients {owners[tp]} and {mid}"
                owners[tp] = mid
            assert c.owned <= flat(self.members[mid].assigned_partitions) | flat(
                self.members[mid].partitions_pending_revocation
            )


owners_st = st.tuples(*[st.one_of(st.none(), st.integers(0, len(MEMBER_IDS) - 1)) for _ in ALL_PARTITIONS])
step_st = st.one_of(
    st.tuples(st.just("target"), owners_st),
    st.tuples(st.just("heartbeat"), st.integers(0, len(MEMBER_IDS) - 1), st.booleans(), st.booleans()),
)

# Once the target is fixed and every heartbeat acknowledges and reports, three rounds suffice. In
# the first, a member reconciles towards the last target and may have to revoke (again, if the
# target moved while it was revoking). In the second it has acknowledged that and holds only
# partitions of its target; partitions others (or it itself: one it was revoking, given back by
# the target) still held when it heartbeat are unreleased. In the third nobody holds them any more.
CONVERGENCE_ROUNDS = 3


@settings(max_examples=150, deadline=None)
@given(
    n_members=st.integers(1, len(MEMBER_IDS)),
    first_target=owners_st,
    steps=st.lists(step_st, max_size=60),
)
def test_random_targets_keep_partitions_exclusive_and_converge(n_members, first_target, steps):
    group = Group(MEMBER_IDS[:n_members])
    group.new_target(first_target)
    for step in steps:
        if step[0] == "target":
            group.new_target(step[1])
        else:
            _, who, ack, report = step
            if who < n_members:
                group.heartbeat(MEMBER_IDS[who], ack, report)

    # The target stops changing; every client takes its latest assignment and says what it owns.
    for _ in range(CONVERGENCE_ROUNDS):
        for mid in group.member_ids:
            group.heartbeat(mid, ack=True, report=True)

    for mid in group.member_ids:
        m = group.members[mid]
        assert m.state is MemberState.STABLE, (mid, m)
        assert m.member_epoch == group.target_epoch
        assert m.is_reconciled_to(group.target_epoch)
        assert m.assigned_partitions == group.target[mid]
        assert m.partitions_pending_revocation == {}
        assert group.clients[mid].received == flat(group.target[mid])  # what the last response carried


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(step_st, min_size=1, max_size=60))
def test_clients_that_never_report_never_lose_partitions_they_were_asked_to_revoke(steps):
    """Without owned partitions in the heartbeat (Kafka's null) a member never leaves
    UNREVOKED_PARTITIONS: a partition it was asked to revoke is never given to anyone else."""
    group = Group(MEMBER_IDS)
    group.new_target(tuple(i % len(MEMBER_IDS) for i in range(len(ALL_PARTITIONS))))
    for mid in group.member_ids:
        group.heartbeat(mid, ack=True, report=True)
    stuck: dict[str, ConsumerGroupMember] = {}
    for step in steps:
        if step[0] == "target":
            group.new_target(step[1])
        else:
            mid = MEMBER_IDS[step[1]]
            group.heartbeat(mid, ack=step[2], report=False)
            m = group.members[mid]
            if mid in stuck:
                assert m == stuck[mid]
            elif m.state is MemberState.UNREVOKED_PARTITIONS:
                stuck[mid] = m
