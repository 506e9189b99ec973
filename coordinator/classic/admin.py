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
        # Kafka's describeGroups looks up a *classic* group; its GroupIdNotFoundException (no such
        # group, or a group of another type) is a Dead group with GROUP_ID_NOT_FOUND and the
        # exception's message from DescribeGroups v6 (KIP-1043), and a Dead group with no error
        # below (the gateway drops the error there: it knows the version).
        message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a classic group."
        return DescribedGroup(group_id, ErrorCode.group_id_not_found, S.DEAD.value, "", "", error_message=message)
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
