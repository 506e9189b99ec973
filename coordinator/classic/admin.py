"""DescribeGroups, ListGroups, DeleteGroups (Kafka 4.x GroupMetadataManager), for classic groups and,
where these APIs reach them, share groups (the same `groups` dict holds both, keyed by group id)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.messages import DeletedGroup, DescribedGroup, DescribedMember, ListedGroup
from coordinator.classic.state import ClassicGroupState as S
from coordinator.records import group_tombstone, offset_tombstone
from coordinator.share.admin import delete_share_group
from coordinator.share.group import ShareGroup
from coordinator.share.messages import SHARE_PROTOCOL_TYPE
from coordinator.txn import Txn

CLASSIC = "classic"
SHARE = "share"


def describe_group(txn: Txn, group_id: str) -> DescribedGroup:
    group = txn.group(group_id)
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


def list_groups(txn: Txn, states: tuple[str, ...], types: tuple[str, ...]) -> list[ListedGroup]:
    """Kafka's listGroups: states and types compared case-insensitively; an unknown type or state
    matches nothing. A share group lists with protocol type and group type "share"."""
    wanted_states = {s.strip().lower() for s in states}
    wanted_types = {t.strip().lower() for t in types}
    out = []
    for group_id, group in sorted(txn.shard.groups.items()):
        if isinstance(group, ClassicGroup):
            listed = ListedGroup(group_id, group.protocol_type or "", group.state.value, CLASSIC)
        elif isinstance(group, ShareGroup):
            listed = ListedGroup(group_id, SHARE_PROTOCOL_TYPE, group.state.value, SHARE)
        else:
            continue
        if types and listed.group_type not in wanted_types:
            continue
        if states and listed.state.lower() not in wanted_states:
            continue
        out.append(listed)
    return out


def delete_group(txn: Txn, group_id: str) -> DeletedGroup:
    group = txn.group(group_id)
    if isinstance(group, ShareGroup):
        return delete_share_group(txn, group)
    if not isinstance(group, ClassicGroup) or group.is_in(S.DEAD):
        return DeletedGroup(group_id, ErrorCode.group_id_not_found)
    if not group.is_in(S.EMPTY):
        return DeletedGroup(group_id, ErrorCode.non_empty_group)
    for topic, partition in sorted(txn.shard.offsets.get(group_id, {})):
        txn.write(offset_tombstone(group_id, topic, partition))
    txn.write(group_tombstone(group_id))
    txn.drop(group_id)
    return DeletedGroup(group_id, ErrorCode.none)
