"""The controller's record of one replicated partition, and the changes only the controller makes.

Kafka's PartitionRegistration and the parts of ReplicationControlManager / PartitionChangeBuilder
this needs (KRaft; unclean leader election off):
- a replica the controller takes as gone (its node left, its actor died, its session lapsed) leaves
  the ISR, unless it is the last member: the last member keeps its place so that it, and only it,
  can lead again when it returns with its log;
- a partition whose leader is gone gets the first replica (in assignment order) that is alive and
  in the ISR, under a new leader epoch; with none, it has no leader (NO_LEADER) until one returns;
- a replica that returns without the log it had (a wiped data directory: its directory id changed,
  as KIP-858 tells) leaves the ISR even as the last member: electing it would lose what was
  committed;
- the leader changes the ISR through AlterPartition (KIP-497), fenced by its leader epoch and the
  partition epoch, and may name only replicas that are alive, in the incarnation whose fetches it
  saw (KIP-903's broker epochs): a replica that restarted since, perhaps with an empty data
  directory, is not added on the strength of what its previous life had fetched.

- a partition moves by reassignment (KIP-455, Kafka's PartitionReassignmentReplicas): the target
  replicas join the assignment (`adding`) beside the ones leaving (`removing`); the added ones
  fetch and are taken into the ISR as any follower is; once the ISR holds every target replica
  the reassignment completes in that same change: the leaving replicas go from the assignment and
  the ISR, and a leader among them hands over to a target replica.

Every change bumps the partition epoch; a change of leader bumps the leader epoch too, and so does
a replica leaving the assignment (Kafka's triggerLeaderEpochBumpForReplicaReassignmentIfNeeded:
the one that left must not be taken for a follower of the epoch it knew). Kafka no longer bumps it
when the ISR only shrinks. Functions return the new registration (the record the controller
appends to its metadata log), or the same one when nothing changes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]  # assignment order: the preferred leader first (targets, then leaving)
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...] = ()  # a reassignment's new replicas, still catching up
    removing: tuple[int, ...] = ()  # a reassignment's leaving replicas

    @classmethod
    def new(cls, replicas: tuple[int, ...]) -> PartitionRegistration:
        """A new partition: every replica in sync (all logs are empty), the first one leading."""
        if not replicas or len(set(replicas)) != len(replicas):
            raise ValueError(f"replicas must be distinct and not empty: {replicas}")
        return cls(tuple(replicas), tuple(replicas), replicas[0], 0, 0)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True, slots=True)
class AlterPartition:
    """The leader's request to change the ISR (Kafka's AlterPartitionRequest, one partition)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    # For each member of new_isr, the incarnation (Kafka's broker epoch) of its fetches the leader
    # judged it by; the controller refuses to add one that has restarted since.
    incarnations: tuple[int, ...]
    # The leader's count of its proposals (a copy sent again keeps it): see `answer_alter_partition`.
    sequence: int = 0


@dataclass(frozen=True, slots=True)
class AlterAnswer:
    """The controller's answer to one AlterPartition, kept (per partition) to answer copies of it."""

    leader: int
    leader_epoch: int
    sequence: int
    error: ErrorCode
    registration: PartitionRegistration


def _change(
    reg: PartitionRegistration,
    isr: tuple[int, ...],
    alive: Collection[int],
    replicas: tuple[int, ...] | None = None,
    adding: tuple[int, ...] | None = None,
    removing: tuple[int, ...] | None = None,
) -> PartitionRegistration:
    """Kafka's PartitionChangeBuilder.build: complete a reassignment the ISR now allows, elect if
    the leader cannot stay, and bump the epochs the change calls for."""
    replicas = reg.replicas if replicas is None else replicas
    adding = reg.adding if adding is None else adding
    removing = reg.removing if removing is None else removing
    if adding or removing:
        target = tuple(r for r in replicas if r not in removing)
        target_isr = tuple(r for r in target if r in isr)  # in the new assignment's order
        if target_isr and set(target) <= set(target_isr):
            replicas, isr, adding, removing = target, target_isr, (), ()
    leader = reg.leader
    # A leaving leader leads on until the reassignment completes (Kafka's tryElection keeps any
    # leader still in the assignment and the ISR); the targets come first in the election order.
    if leader not in replicas or leader not in isr or leader not in alive:
        leader = _elect(replicas, isr, alive)
    if (replicas, isr, leader, adding, removing) == (reg.replicas, reg.isr, reg.leader, reg.adding, reg.removing):
        return reg
    bump = leader != reg.leader or not set(reg.replicas) <= set(replicas)
    return PartitionRegistration(
        replicas, isr, leader, reg.leader_epoch + 1 if bump else reg.leader_epoch, reg.partition_epoch + 1,
        adding, removing,
    )


def _elect(replicas: tuple[int, ...], isr: tuple[int, ...], alive: Collection[int]) -> int:
    for replica in replicas:
        if replica in isr and replica in alive:
            return replica
    return NO_LEADER


def reconcile(reg: PartitionRegistration, alive: Collection[int]) -> PartitionRegistration:
    """After replicas came or went: dead ones leave the ISR (the last member stays), and a
    partition without a live leader elects one from the ISR."""
    isr = tuple(r for r in reg.isr if r in alive)
    if not isr:
        isr = reg.isr  # every member is gone: all keep their claim, any of them holds the committed log
    return _change(reg, isr, alive)


def elect_preferred(reg: PartitionRegistration, alive: Collection[int]) -> PartitionRegistration:
    """Kafka's preferred leader election (PartitionChangeBuilder with Election.PREFERRED, run by
    `auto.leader.rebalance.enable`): the first replica of the assignment leads again once it is
    alive and in the ISR, so that leaderships moved away by a failure return to where placement
    spread them. Not during a reassignment (its completion decides the leader)."""
    preferred = reg.replicas[0]
    if reg.reassigning or reg.leader == preferred or preferred not in reg.isr or preferred not in alive:
        return reg
    return PartitionRegistration(
        reg.replicas, reg.isr, preferred, reg.leader_epoch + 1, reg.partition_epoch + 1, reg.adding, reg.removing
    )


def restarted(reg: PartitionRegistration, replicas: Collection[int], alive: Collection[int]) -> PartitionRegistration:
    """Replicas that restarted since the controller last looked (a new incarnation, however short
    the gap): fenced and back, as KRaft fences a broker's old registration when it registers again.
    They leave the ISR (the last member stays) and one that led hands over under a new epoch; its
    new life may lack what the old one appended and never made durable."""
    if not replicas:
        return reg
    return reconcile(reconcile(reg, [r for r in alive if r not in replicas]), alive)


def registered_again(
    reg: PartitionRegistration, replica: int, alive: Collection[int], log_lost: bool
) -> PartitionRegistration:
    """A replica that started again registers before it acts (a new incarnation in `alive`):
    without its log if its data directory changed (`lost_log`), fenced and back in any case
    (`restarted`), then the partition reconciled to who lives."""
    if log_lost:
        reg = lost_log(reg, replica, alive)
    return reconcile(restarted(reg, [replica], alive), alive)


def lost_log(reg: PartitionRegistration, replica: int, alive: Collection[int]) -> PartitionRegistration:
    """`replica` came back with an empty log where it had one: it is out of the ISR, whatever it
    was, and leads only after it has caught up and the leader added it again."""
    return _change(reg, tuple(r for r in reg.isr if r != replica), tuple(a for a in alive if a != replica))


def reassign(
    reg: PartitionRegistration, target: tuple[int, ...], alive: Collection[int]
) -> tuple[PartitionRegistration, ErrorCode]:
    """Start moving the partition to `target` (AlterPartitionReassignments, KIP-455): the target
    replicas first in the assignment, the leaving ones after them until the target is in sync."""
    if not target or len(set(target)) != len(target):
        return reg, ErrorCode.invalid_replica_assignment
    if reg.reassigning:
        return reg, ErrorCode.reassignment_in_progress
    return change_reassignment(reg, target, alive)  # on an idle partition: the move from its replicas


def change_reassignment(
    reg: PartitionRegistration, target: tuple[int, ...] | None, alive: Collection[int]
) -> tuple[PartitionRegistration, ErrorCode]:
    """An operator's AlterPartitionReassignments for one partition (Kafka's
    ReplicationControlManager.changePartitionReassignment and cancelPartitionReassignment).

    None cancels the move in progress (NO_REASSIGNMENT_IN_PROGRESS if there is none), as Kafka's
    PartitionReassignmentRevert: the replicas being added leave; refused with
    INVALID_REPLICA_ASSIGNMENT where only they are in sync (that would need an unclean election).
    A target is computed from the current assignment, a move in progress included, as KRaft's
    PartitionReassignmentReplicas(current, target): the current replicas not in the target are
    removed, the target's not yet assigned added, and a replica being added that the target keeps
    is still being added; so sending the same target again changes nothing."""
    if target is None:
        if not reg.reassigning:
            return reg, ErrorCode.no_reassignment_in_progress
        replicas = tuple(r for r in reg.replicas if r not in reg.adding)
        isr = tuple(r for r in reg.isr if r not in reg.adding)
        if not isr:
            return reg, ErrorCode.invalid_replica_assignment
        return _change(reg, isr, alive, replicas, (), ()), ErrorCode.none
    if not target or len(set(target)) != len(target):
        return reg, ErrorCode.invalid_replica_assignment
    removing = tuple(r for r in reg.replicas if r not in target)
    adding = tuple(r for r in target if r not in reg.replicas or r in reg.adding)
    return _change(reg, reg.isr, alive, tuple(target) + removing, adding, removing), ErrorCode.none


def alter_partition(
    reg: PartitionRegistration, request: AlterPartition, alive: Mapping[int, int]
) -> tuple[PartitionRegistration, ErrorCode]:
    """Kafka's ReplicationControlManager.alterPartition for one partition: (registration, error),
    checked in validateAlterPartitionData's order. `alive` maps each replica the controller takes
    as alive to its current incarnation; every member of the new ISR must be alive, and in the
    incarnation the leader names for it (-1: not checked, as for the leader itself)."""
    if request.leader_epoch > reg.leader_epoch or request.partition_epoch > reg.partition_epoch:
        return reg, ErrorCode.not_controller  # epochs this controller never issued: it is stale
    if request.leader_epoch < reg.leader_epoch:
        return reg, ErrorCode.fenced_leader_epoch
    if request.leader != reg.leader:
        return reg, ErrorCode.invalid_request
    if request.partition_epoch < reg.partition_epoch:
        return reg, ErrorCode.invalid_update_version
    new_isr = request.new_isr
    if (
        request.leader not in new_isr
        or len(set(new_isr)) != len(new_isr)
        or not set(new_isr) <= set(reg.replicas)
        or len(request.incarnations) != len(new_isr)
    ):
        return reg, ErrorCode.invalid_request
    for replica, incarnation in zip(new_isr, request.incarnations):
        if replica not in alive or (incarnation != -1 and alive[replica] != incarnation):
            return reg, ErrorCode.ineligible_replica
    ordered = tuple(r for r in reg.replicas if r in new_isr)
    return _change(reg, ordered, alive), ErrorCode.none


def answer_alter_partition(
    reg: PartitionRegistration, request: AlterPartition, alive: Mapping[int, int], last: AlterAnswer | None
) -> tuple[PartitionRegistration, AlterAnswer]:
    """alter_partition, answering every copy of one request alike: a copy of the request last
    answered (sent again after its answer was lost, or delivered twice) gets that same answer, and
    one older than it (the leader has had its answer and moved on) is not applied
    (OPERATION_NOT_ATTEMPTED, which that leader no longer waits for). Kafka has no copies (one
    request in flight per partition, over TCP); here a call can be sent again, and a refused
    request applied later, after its leader dropped it on the refusal, would put a replica in the
    ISR that the leader's high watermark no longer waits for."""
    if last is not None and (last.leader, last.leader_epoch) == (request.leader, request.leader_epoch):
        if request.sequence == last.sequence:
            return reg, last
        if request.sequence < last.sequence:
            return reg, AlterAnswer(request.leader, request.leader_epoch, request.sequence,
                                    ErrorCode.operation_not_attempted, reg)
    new, error = alter_partition(reg, request, alive)
    return new, AlterAnswer(request.leader, request.leader_epoch, request.sequence, error, new)
