"""DescribeGroups (Kafka 4.x GroupMetadataManager.describeGroups): classic groups only; ListGroups and
DeleteGroups, which reach every group kind, are in coordinator/admin.py."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import DescribedGroup, DescribedMember
from coordinator.classic.state import ClassicGroupState as S
from coordinator.context import OperationContext



def describe_group(ctx: OperationContext, group_id: str) -> DescribedGroup:
    group = ctx.group(group_id)
    if not isinstance(group, ClassicGroup):
        # DescribeGroups v0-v5: an unknown group is described as Dead, not as an error. Kafka 4.x
        # answers the same for a share group (describeGroups looks up a *classic* group, and its
        # GroupIdNotFoundException becomes Dead with no error below v6).
        return DescribedGroup(group_id, ErrorCode.none, S.DEAD.value, "", "")
    stable = group.is_in(S.STABLE)
    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=m.metadata(group.protocol_name) if stable else b"",
            assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        group_id=group_id,
        error_code=ErrorCode.none,
        state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol=(group.protocol_name or "") if stable else "",
        members=members,
    )
