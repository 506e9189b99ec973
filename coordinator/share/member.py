"""A share group's member as the group coordinator holds it (Kafka 4.x modern/share/ShareGroupMember,
modern MemberState). Members are immutable: a change makes a new member."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coordinator.member_state import MemberState
from coordinator.topic_partitions import TopicPartitions, freeze_partitions, partitions_view

__all__ = ["MemberState", "ShareGroupMember", "TopicPartitions", "freeze_partitions", "member_view", "partitions_view"]


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    """Kafka's ShareGroupMember (its Builder's defaults for a new member)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned_partitions: TopicPartitions = field(default_factory=dict)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch


def member_view(m: ShareGroupMember) -> tuple[Any, ...]:
    return (
        m.member_epoch,
        m.previous_member_epoch,
        int(m.state),
        m.rack_id,
        m.client_id,
        m.client_host,
        tuple(sorted(m.subscribed_topic_names)),
        partitions_view(m.assigned_partitions),
    )
