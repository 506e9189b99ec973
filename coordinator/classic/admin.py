"""DescribeGroups, ListGroups, DeleteGroups for classic groups (Kafka 4.x GroupMetadataManager)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import DeletedGroup, DescribedGroup, DescribedMember, ListedGroup
from coordinator.classic.state import ClassicGroupState as S
from coordinator.classic.state import parse_state
from coordinator.records import group_tombstone, offset_tombstone
from coordinator.txn import Txn

CLASSIC = "classic"


def describe_group(txn: Txn, group_id: str) -> DescribedGroup:
    group = txn.group(group_id)
    if not isinstance(group, ClassicGroup):
        # DescribeGroups v0-v5: an unknown group is described as Dead, not as an error.
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


def list_groups(txn: Txn, states: tuple[str, ...], types: tuple[str, ...]) -> list[ListedGroup]:
    wanted_states = {parse_state(s) for s in states}
    if types and CLASSIC not in {t.lower() for t in types}:
        return []
    out = []
    for group_id, group in sorted(txn.shard.groups.items()):
        if not isinstance(group, ClassicGroup):
            continue
        if states and group.state not in wanted_states:
            continue
        out.append(ListedGroup(group_id, group.protocol_type or "", group.state.value, CLASSIC))
    return out


def delete_group(txn: Txn, group_id: str) -> DeletedGroup:
    group = txn.group(group_id)
    if not isinstance(group, ClassicGroup) or group.is_in(S.DEAD):
        return DeletedGroup(group_id, ErrorCode.group_id_not_found)
    if not group.is_in(S.EMPTY):
        return DeletedGroup(group_id, ErrorCode.non_empty_group)
    for topic, partition in sorted(txn.shard.offsets.get(group_id, {})):
        txn.write(offset_tombstone(group_id, topic, partition))
    txn.write(group_tombstone(group_id))
    txn.drop(group_id)
    return DeletedGroup(group_id, ErrorCode.none)
