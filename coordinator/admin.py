"""ListGroups and DeleteGroups over every group kind (Kafka 4.x GroupMetadataManager.listGroups,
deleteGroups; GroupCoordinatorService.deleteShareGroups), through the Group protocol only."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import DeletedGroup, ListedGroup
from coordinator.context import OperationContext


def list_groups(ctx: OperationContext, states: tuple[str, ...], types: tuple[str, ...]) -> list[ListedGroup]:
    """Kafka's listGroups: states and types compared case-insensitively; an unknown type or state
    matches nothing. A share group lists with protocol type and group type "share"."""
    wanted_states = {s.strip().lower() for s in states}
    wanted_types = {t.strip().lower() for t in types}
    out = []
    for _group_id, group in sorted(ctx.state.groups.items()):
        listed = group.listed()
        if types and listed.group_type not in wanted_types:
            continue
        if states and listed.state.lower() not in wanted_states:
            continue
        out.append(listed)
    return out


def delete_group(ctx: OperationContext, group_id: str) -> DeletedGroup:
    """Only an Empty group may go: its offsets and records are tombstoned.

    A share group is Kafka's third step: its share state was deleted first (coordinator/share/
    deletion.py moved its partitions to `deleting` in the operation that checked it Empty), and the
    Empty check here is made again, so a member that joined meanwhile keeps the group
    (GROUP_NOT_EMPTY). Partitions still initialized or initializing, which only a delete without
    that first step leaves, are answered for the cluster to delete afterwards."""
    group = ctx.group(group_id)
    if group is None:
        return DeletedGroup(group_id, ErrorCode.group_id_not_found)
    error = group.validate_delete()
    if error is not None:
        return DeletedGroup(group_id, error)
    deletes = group.share_state_deletes(ctx.state.topics_image)
    for record in group.delete_records(ctx.state.offsets.get(group_id, {})):
        ctx.write(record)
    ctx.drop(group_id)
    return DeletedGroup(group_id, ErrorCode.none, share_state_deletes=deletes)
