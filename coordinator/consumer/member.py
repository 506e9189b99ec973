"""A consumer group's member as the group coordinator holds it (Kafka's modern/MemberState and
modern/consumer/ConsumerGroupMember, KIP-848), as an immutable value: a change makes a new member,
through `dataclasses.replace` (Kafka's ConsumerGroupMember.Builder) or `update_member_epoch`.

Partitions are keyed by topic id, each topic's partitions a frozenset; a topic with no partitions
is not a key (Kafka's reconciliation never stores an empty set either, and its maps compare by
content, so `{t: {}}` and `{}` would differ there too). A member that joined with the classic
protocol (JoinGroup into a consumer group, or one a classic group had when it was upgraded) carries
its session timeout and JoinGroup protocols (Kafka's classicMemberMetadata).

The member's lifecycle is KIP-848's reconciliation (coordinator/consumer/reconciliation.py):

    STABLE                -> STABLE | UNREVOKED_PARTITIONS | UNRELEASED_PARTITIONS
    UNREVOKED_PARTITIONS  -> UNREVOKED_PARTITIONS | STABLE | UNRELEASED_PARTITIONS
    UNRELEASED_PARTITIONS -> UNRELEASED_PARTITIONS | STABLE | UNREVOKED_PARTITIONS
    UNKNOWN               -> STABLE | UNRELEASED_PARTITIONS     (after the member was fenced)

UNKNOWN is never entered: it is what a state value written by a newer coordinator reads as. A
member's epoch moves only to a target assignment epoch (Kafka 4.2, KAFKA-19974): it stays at its
epoch while it revokes, including what a subscription change takes away.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from coordinator.member_state import MemberState
from coordinator.topic_partitions import TopicPartitions, freeze_partitions
from kernel.lifecycle import validate_transition


def validate_member_transition(current: MemberState, target: MemberState) -> None:
    """Raise IllegalTransition, changing nothing, unless current -> target is a move the
    reconciliation can make."""
    validate_transition(_VALID_PREVIOUS, current, target, "consumer group member")


_S = MemberState
# target -> the states it may follow. Self-moves are real moves here (STABLE -> STABLE bumps the
# epoch, or drops the topics a subscription change left; UNREVOKED -> UNREVOKED revokes more, at the
# same epoch since Kafka 4.2), so they are listed, not implied.
_VALID_PREVIOUS: dict[MemberState, frozenset[MemberState]] = {
    _S.STABLE: frozenset({_S.STABLE, _S.UNREVOKED_PARTITIONS, _S.UNRELEASED_PARTITIONS, _S.UNKNOWN}),
    _S.UNREVOKED_PARTITIONS: frozenset({_S.STABLE, _S.UNREVOKED_PARTITIONS, _S.UNRELEASED_PARTITIONS}),
    _S.UNRELEASED_PARTITIONS: frozenset(
        {_S.STABLE, _S.UNREVOKED_PARTITIONS, _S.UNRELEASED_PARTITIONS, _S.UNKNOWN}
    ),
    _S.UNKNOWN: frozenset(),
}


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    """One (name, metadata) of a classic member's JoinGroup protocols."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """Kafka's ConsumerGroupMember (with ModernGroupMember's fields); the defaults are its
    Builder's for a new member. `server_assignor_name` None is Kafka's Optional.empty()."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str = ""
    server_assignor_name: str | None = None
    assigned_partitions: TopicPartitions = field(default_factory=dict)
    partitions_pending_revocation: TopicPartitions = field(default_factory=dict)
    classic_member_metadata: ClassicMemberMetadata | None = None

    @property
    def use_classic_protocol(self) -> bool:
        """Kafka's useClassicProtocol: the member speaks JoinGroup/SyncGroup/Heartbeat."""
        return self.classic_member_metadata is not None

    def __post_init__(self) -> None:
        # Canonical form whatever the caller passed (lists, sets, empty topics, a state as its
        # stored byte), so that two members with the same content compare equal, as Kafka's do.
        object.__setattr__(self, "state", MemberState.from_value(int(self.state)))
        object.__setattr__(self, "subscribed_topic_names", frozenset(self.subscribed_topic_names))
        object.__setattr__(self, "assigned_partitions", freeze_partitions(self.assigned_partitions))
        object.__setattr__(
            self, "partitions_pending_revocation", freeze_partitions(self.partitions_pending_revocation)
        )

    def update_member_epoch(self, member_epoch: int) -> "ConsumerGroupMember":
        """Kafka's Builder.updateMemberEpoch: the new epoch, the current one becoming the previous
        (which the heartbeat still accepts, in case the response carrying the new one was lost)."""
        return replace(self, member_epoch=member_epoch, previous_member_epoch=self.member_epoch)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        """Kafka's ModernGroupMember.isReconciledTo."""
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch


__all__ = ["ClassicMemberMetadata", "ClassicProtocol", "ConsumerGroupMember", "MemberState", "TopicPartitions", "freeze_partitions"]
