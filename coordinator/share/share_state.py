"""Which share partitions of a share group have their share state initialized (seed 001 §5-2-2; SPEC §3;
Kafka 4.x GroupMetadataManager: subscribedTopicsChangeMap, maybeCreateInitializeShareGroupStateRequest,
addInitializingTopicsRecords, combineInitMaps, initializeShareGroupState, uninitializeShareGroupState,
maybeCleanupShareGroupState, shareGroupBuildPartitionDeleteRequest).

    (not known) --heartbeat--> initializing --share coordinator OK--> initialized (assignable)
    initializing --share coordinator error--> (not known): the next heartbeat asks again
    initializing --no answer for group.share.initialize.retry.interval.ms--> asked again
    initializing | initialized --topic deleted--> (not known)

Only initialized partitions are assigned (Kafka's topicAssignablePartitionsMap): a member must not
fetch from a share partition whose durable state does not exist yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from coordinator.share.records import share_state_partition_metadata_record
from coordinator.share.group import ShareGroup
from coordinator.share.partition_metadata import (  # noqa: F401  (the three helpers re-exported)
    EMPTY_SHARE_STATE,
    InitMapValue,
    ShareStatePartitionMetadata,
    combine_init_maps,
    deletes_for,
    partitions_to_delete,
)
from coordinator.share.messages import ShareStateDelete, ShareStateInit, ShareStateInitResult
from coordinator.share.metadata import TopicsImage
from coordinator.context import OperationContext


def assignable_partitions(group: ShareGroup, image: TopicsImage) -> dict[UUID, frozenset[int]]:
    """The initialized share partitions of topics that exist: all the assignor may hand out.

    Partitions beyond a topic's current count cannot be assigned either (they cannot exist in Kafka,
    whose topics only grow; here they would otherwise make initialized_assignment_pending true forever).
    """
    initialized = (group.share_state or EMPTY_SHARE_STATE).initialized
    out: dict[UUID, frozenset[int]] = {}
    for topic_id, value in initialized.items():
        topic = image.by_id.get(topic_id)
        if topic is not None:
            partitions = frozenset(p for p in value.partitions if p < topic.partitions)
            if partitions:
                out[topic_id] = partitions
    return out


def initialized_assignment_pending(group: ShareGroup, image: TopicsImage) -> bool:
    """Kafka's initializedAssignmentPending: some initialized partition of a subscribed topic is not
    in the target assignment yet (it was initialized after the last assignment), so the epoch must
    be bumped to assign it.

    Kafka compares against all initialized partitions of subscribed topics; we compare against those
    the assignor can actually assign (topics in the image), so a missing or late metadata image does
    not bump the epoch on every heartbeat.
    """
    if not group.members or group.share_state is None or not group.share_state.initialized:
        return False
    subscribed = group.subscribed_topic_names()
    if not subscribed:
        return False
    assigned: dict[UUID, set[int]] = {}
    for partitions in group.target_assignment.values():
        for topic_id, ps in partitions.items():
            assigned.setdefault(topic_id, set()).update(ps)
    assignable = assignable_partitions(group, image)
    for topic_id, value in group.share_state.initialized.items():
        if value.name in subscribed and topic_id in assignable:
            if assigned.get(topic_id) != set(assignable[topic_id]):
                return True
    return False


def subscribed_topics_change_map(
    group: ShareGroup, subscribed: frozenset[str], image: TopicsImage, now: int, retry_interval_ms: int
) -> dict[UUID, InitMapValue]:
    """Kafka's subscribedTopicsChangeMap: subscribed partitions neither initialized nor initializing,
    plus those initializing for longer than the retry interval (their answer never came)."""
    if not subscribed:
        return {}
    info = group.share_state
    if info is None:
        already: Mapping[UUID, InitMapValue] = {}
    else:
        fresh = {tid: v for tid, v in info.initializing.items() if now - v.timestamp < retry_interval_ms}
        already = combine_init_maps(info.initialized, fresh)
    change: dict[UUID, InitMapValue] = {}
    for name in sorted(subscribed):
        topic = image.by_name.get(name)
        if topic is None:
            continue
        known = already[topic.topic_id].partitions if topic.topic_id in already else frozenset()
        if not known or len(known) < topic.partitions:
            missing = frozenset(range(topic.partitions)) - known
            if missing:
                change[topic.topic_id] = InitMapValue(topic.name, missing, now)
    return change


def maybe_initialize(ctx: OperationContext, group: ShareGroup, group_epoch: int, subscribed: frozenset[str]) -> tuple[ShareStateInit, ...]:
    """Kafka's maybeCreateInitializeShareGroupStateRequest: record the missing partitions as
    initializing and return them for the cluster to initialize (state epoch = group epoch)."""
    image = ctx.state.topics_image
    if not subscribed or image.is_empty():
        return ()
    change = subscribed_topics_change_map(group, subscribed, image, ctx.now, ctx.config.share_initialize_retry_interval_ms)
    if not change:
        return ()
    info = group.share_state
    if info is None:
        ctx.write(share_state_partition_metadata_record(group.group_id, change, {}, {}))
    else:
        # A topic initializing again is no longer being deleted (Kafka logs and drops it from deleting).
        deleting = {tid: name for tid, name in info.deleting.items() if tid not in change}
        ctx.write(
            share_state_partition_metadata_record(
                group.group_id, combine_init_maps(info.initializing, change), info.initialized, deleting
            )
        )
    return tuple(
        ShareStateInit(group.group_id, topic_id, partition, group_epoch, -1)
        for topic_id in sorted(change)
        for partition in sorted(change[topic_id].partitions)
    )


def _without(topics: Mapping[UUID, InitMapValue], remove: Mapping[UUID, set[int]]) -> dict[UUID, InitMapValue]:
    out: dict[UUID, InitMapValue] = {}
    for topic_id, value in topics.items():
        left = value.partitions - remove.get(topic_id, set())
        if left:
            out[topic_id] = InitMapValue(value.name, left, value.timestamp)
    return out


def share_state_initialized(ctx: OperationContext, group_id: str, results: tuple[ShareStateInitResult, ...]) -> None:
    """The share coordinators answered initializations: successes become initialized (Kafka's
    initializeShareGroupState), failures are dropped from initializing (uninitializeShareGroupState)
    so that the next heartbeat asks again.

    Kafka treats one failed partition as failing the whole batch; we take each answer on its own,
    and only for partitions still initializing (a late or repeated answer, or one for a topic deleted
    meanwhile, changes nothing).
    """
    group = ctx.state.groups.get(group_id)
    if not isinstance(group, ShareGroup) or group.share_state is None:
        return
    info = group.share_state
    done: dict[UUID, set[int]] = {}
    failed: dict[UUID, set[int]] = {}
    for result in results:
        value = info.initializing.get(result.topic_id)
        if value is None or result.partition not in value.partitions:
            continue
        target = done if result.error_code == ErrorCode.none else failed
        target.setdefault(result.topic_id, set()).add(result.partition)
    if not done and not failed:
        return
    newly = {
        tid: InitMapValue(info.initializing[tid].name, frozenset(ps), ctx.now) for tid, ps in done.items()
    }
    answered = {tid: done.get(tid, set()) | failed.get(tid, set()) for tid in set(done) | set(failed)}
    initializing = _without(info.initializing, answered)
    ctx.write(
        share_state_partition_metadata_record(
            group_id, initializing, combine_init_maps(info.initialized, newly), info.deleting
        )
    )


def vanished_topic_ids(groups: Mapping[str, Any], image: TopicsImage) -> frozenset[UUID]:
    """Topics some share group's share-state metadata names that the image no longer has. Taken from
    the metadata rather than from the previous image, so a cleanup whose records were lost (a failed
    append) is done again by the next update."""
    ids: set[UUID] = set()
    for group in groups.values():
        if isinstance(group, ShareGroup) and group.share_state is not None:
            info = group.share_state
            ids |= set(info.initializing) | set(info.initialized) | set(info.deleting)
    return frozenset(ids - set(image.by_id))


def cleanup_deleted_topics(ctx: OperationContext, deleted: frozenset[UUID]) -> tuple[ShareStateDelete, ...]:
    """Kafka's maybeCleanupShareGroupState: forget deleted topics in every share group's share-state
    metadata; their share partitions' state is to be deleted (by the cluster, from the answer)."""
    if not deleted:
        return ()
    deletes: list[ShareStateDelete] = []
    for group_id, group in sorted(ctx.state.groups.items()):
        if not isinstance(group, ShareGroup) or group.share_state is None:
            continue
        info = group.share_state
        gone = deleted & (set(info.initializing) | set(info.initialized) | set(info.deleting))
        if not gone:
            continue
        initializing = {tid: v for tid, v in info.initializing.items() if tid not in gone}
        initialized = {tid: v for tid, v in info.initialized.items() if tid not in gone}
        deleting = {tid: name for tid, name in info.deleting.items() if tid not in gone}
        ctx.write(share_state_partition_metadata_record(group_id, initializing, initialized, deleting))
        vanished = combine_init_maps(
            {tid: v for tid, v in info.initialized.items() if tid in gone},
            {tid: v for tid, v in info.initializing.items() if tid in gone},
        )
        deletes += deletes_for(group_id, {tid: v.partitions for tid, v in vanished.items()})
    return tuple(deletes)
