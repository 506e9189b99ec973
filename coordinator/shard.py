"""The group coordinator shard: every group one `__consumer_offsets` partition holds (Kafka's GroupCoordinatorShard).

Operations take a request (and the request's token, for those that may park) and return a Result:
records and a response. They never change state; `replay` does, for the records they return,
exactly as it does when a partition is loaded after a failover. Timer expiries are operations too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from coordinator import admin
from coordinator.classic import admin as classic_admin
from coordinator.classic import heartbeat_leave, join, offset_delete, offsets, rebalance, sync
from coordinator.classic.group import ClassicGroup, ClassicMember
from coordinator.classic.messages import (
    DeletedGroup,
    DescribedGroup,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListedGroup,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from coordinator.classic.state import ClassicGroupState as S
from kernel.clock import Clock
from kernel.codec import Record
from coordinator.config import GroupConfigManager, GroupCoordinatorConfig
from coordinator.group import Group
from coordinator.classic.records import ClassicGroupStateKey, GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from coordinator.share.records import SHARE_GROUP_KEYS
from coordinator.consumer import admin as consumer_admin
from coordinator.consumer import classic_members
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer import heartbeat as consumer_heartbeat
from coordinator.consumer import replay as consumer_replay
from coordinator.consumer.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DescribedConsumerGroup
from coordinator.consumer.records import CONSUMER_GROUP_KEYS
from kernel.result import RequestToken, Result
from coordinator.share import deletion
from coordinator.share import admin as share_admin
from coordinator.share import offsets_admin as share_offsets
from coordinator.share import group as share_group
from coordinator.share import heartbeat as share_heartbeat
from coordinator.share import share_state
from coordinator.share.messages import (
    DescribedShareGroup,
    ShareGroupHeartbeatRequest,
    ShareHeartbeatOutcome,
    ShareStateDelete,
    ShareStateInitResult,
    TopicImage,
)
from coordinator.share.metadata import EMPTY_IMAGE, TopicsImage
from kernel.snapshot import TouchedKeys
from kernel.timer import Schedule, ShardCall
from coordinator.context import OperationContext

OFFSETS_CLEANUP_KEY = ("offsets-cleanup",)


class GroupCoordinatorShard:
    def __init__(
        self,
        tp: tuple[str, int],
        clock: Clock,
        config: GroupCoordinatorConfig = GroupCoordinatorConfig(),
        new_member_id: Callable[[str], str] = str,
        group_config_manager: GroupConfigManager | None = None,
    ) -> None:
        self.tp = tp
        self.clock = clock
        self.config = config
        # Per-group configs (share session settings), shared by the host's shards and replaced by it.
        self.group_config_manager = group_config_manager if group_config_manager is not None else GroupConfigManager()
        # Kafka: clientId (or group.instance.id) + "-" + a random UUID. Injected: tests pass a counter.
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        # The cluster's topic metadata (Kafka's metadata image): given by update_topics, not logged.
        self.topics_image: TopicsImage = EMPTY_IMAGE
        # When the image last gained a topic (Kafka's lastMetadataImageWithNewTopics, a metadata
        # version there): consumer groups resolve their regexes again when theirs are older. A
        # time, not a counter, so that it still orders after a failover to another host.
        self.topics_new_at = -1
        self._topics_known = False
        self.touched = TouchedKeys()

    # -- classic group operations ----------------------------------------------------------------

    # A consumer group serves the classic protocol's calls of its classic members (KIP-848's online
    # migration, coordinator/consumer/classic_members.py), as Kafka's classicGroupJoin dispatches.

    def join_group(self, req: JoinGroupRequest, token: RequestToken) -> Result:
        ctx = OperationContext(self, token)
        group = self.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup) and req.group_id and self._valid_session(req.session_timeout_ms):
            return ctx.result(classic_members.join(ctx, group, req))
        return ctx.result(join.join_group(ctx, req, token))

    def _valid_session(self, session_timeout_ms: int) -> bool:
        return self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms

    def sync_group(self, req: SyncGroupRequest, token: RequestToken) -> Result:
        ctx = OperationContext(self, token)
        group = self.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            return ctx.result(classic_members.sync(ctx, group, req))
        return ctx.result(sync.sync_group(ctx, req, token))

    def heartbeat(self, req: HeartbeatRequest, token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        group = self.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            return ctx.result(classic_members.heartbeat(ctx, group, req))
        return ctx.result(heartbeat_leave.heartbeat(ctx, req))

    def leave_group(self, req: LeaveGroupRequest, token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        group = self.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            return ctx.result(classic_members.leave(ctx, group, req))
        return ctx.result(heartbeat_leave.leave_group(ctx, req))

    def commit_offsets(self, req: OffsetCommitRequest, token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        return ctx.result(offsets.commit_offsets(ctx, req))

    def fetch_offsets(self, req: OffsetFetchRequest, token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        return ctx.result(offsets.fetch_offsets(ctx, req))

    def delete_offsets(self, req: offset_delete.OffsetDeleteRequest, token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        return ctx.result(offset_delete.delete_offsets(ctx, req))

    def describe_groups(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        described: list[DescribedGroup] = [classic_admin.describe_group(ctx, g) for g in group_ids]
        return ctx.result(described)

    def list_groups(
        self, states: tuple[str, ...] = (), types: tuple[str, ...] = (), token: RequestToken | None = None
    ) -> Result:
        ctx = OperationContext(self, token)
        listed: list[ListedGroup] = admin.list_groups(ctx, states, types)
        return ctx.result(listed)

    def delete_groups(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        deleted: list[DeletedGroup] = [admin.delete_group(ctx, g) for g in group_ids]
        return ctx.result(deleted)

    # -- share group operations (coordinator/share/) -------------------------------------------------

    def share_group_heartbeat(self, req: ShareGroupHeartbeatRequest, token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        outcome: ShareHeartbeatOutcome = share_heartbeat.share_group_heartbeat(ctx, req)
        return ctx.result(outcome)

    def share_state_initialized(
        self, group_id: str, results: tuple[ShareStateInitResult, ...], token: RequestToken | None = None
    ) -> Result:
        ctx = OperationContext(self, token)
        share_state.share_state_initialized(ctx, group_id, results)
        return ctx.result()

    def share_group_describe(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        described: list[DescribedShareGroup] = [share_admin.describe_share_group(ctx, g) for g in group_ids]
        return ctx.result(described)

    def share_group_topics(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        return ctx.result([share_admin.share_group_topics(ctx, g) for g in group_ids])

    def share_group_delete_prepare(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        """DeleteGroups' first step: Empty checked and share partitions moved to deleting, in one operation."""
        ctx = OperationContext(self, token)
        return ctx.result(deletion.prepare_share_group_deletes(ctx, group_ids))

    def alter_share_group_offsets(
        self, req: share_offsets.AlterShareOffsetsRequest, token: RequestToken | None = None
    ) -> Result:
        ctx = OperationContext(self, token)
        return ctx.result(share_offsets.alter_share_group_offsets(ctx, req))

    def share_offsets_initialized(
        self, req: share_offsets.ShareOffsetsInitialized, token: RequestToken | None = None
    ) -> Result:
        """AlterShareGroupOffsets' initializations answered: as a heartbeat's (share_state.py)."""
        ctx = OperationContext(self, token)
        share_state.share_state_initialized(ctx, req.group_id, req.results)
        return ctx.result()

    def share_offsets_delete_initiate(
        self, req: share_offsets.DeleteShareOffsetsRequest, token: RequestToken | None = None
    ) -> Result:
        ctx = OperationContext(self, token)
        return ctx.result(share_offsets.initiate_delete_share_group_offsets(ctx, req))

    def share_offsets_delete_complete(
        self, req: share_offsets.CompleteShareOffsetsDelete, token: RequestToken | None = None
    ) -> Result:
        ctx = OperationContext(self, token)
        return ctx.result(share_offsets.complete_delete_share_group_offsets(ctx, req))

    def start_with_topics(self, topics: tuple[TopicImage, ...]) -> None:
        """The cluster's topics as the shard is made, before its log is replayed (Kafka hands a
        coordinator shard the metadata image in onLoaded, before it serves). An operation that runs
        before the first update_topics then sees the topics, not an empty image, whose hash would
        bump every consumer group's epoch and empty every member's target. Not the first image
        update_topics counts (that one still decides, after the load, which topics vanished)."""
        self.topics_image = TopicsImage.of(topics)

    def update_topics(self, topics: tuple[TopicImage, ...], token: RequestToken | None = None) -> Result:
        """The cluster's topic metadata changed (Kafka's onMetadataUpdate + maybeCleanupShareGroupState).

        The image is not a record: it is the cluster's, given again after a failover. Topics that
        vanished are forgotten by every share group's share-state metadata (records), and their share
        partitions are answered (ShareStateDelete) for the cluster to delete. The first image given to
        a shard deletes nothing: an empty or partial first image must not wipe share state."""
        new_image = TopicsImage.of(topics)
        ctx = OperationContext(self, token)
        deletes: tuple[ShareStateDelete, ...] = ()
        if self._topics_known:
            deletes = share_state.cleanup_deleted_topics(ctx, share_state.vanished_topic_ids(self.groups, new_image))
        if not self._topics_known or any(name not in self.topics_image.by_name for name in new_image.by_name):
            self.topics_new_at = ctx.now
        self.topics_image = new_image
        self._topics_known = True
        return ctx.result(deletes)

    def expire_share_session(self, group_id: str, member_id: str) -> Result:
        ctx = OperationContext(self)
        share_heartbeat.expire_session(ctx, group_id, member_id)
        return ctx.result()

    # -- consumer group operations (coordinator/consumer/, KIP-848) ------------------------------------

    def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, token: RequestToken | None = None
    ) -> Result:
        ctx = OperationContext(self, token)
        response: ConsumerGroupHeartbeatResponse = consumer_heartbeat.consumer_group_heartbeat(ctx, req, req.api_version)
        return ctx.result(response)

    def consumer_group_describe(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        ctx = OperationContext(self, token)
        described: list[DescribedConsumerGroup] = [consumer_admin.describe_consumer_group(ctx, g) for g in group_ids]
        return ctx.result(described)

    def expire_consumer_session(self, group_id: str, member_id: str) -> Result:
        ctx = OperationContext(self)
        consumer_heartbeat.expire_session(ctx, group_id, member_id)
        return ctx.result()

    def expire_consumer_rebalance(self, group_id: str, member_id: str, member_epoch: int) -> Result:
        ctx = OperationContext(self)
        consumer_heartbeat.expire_rebalance(ctx, group_id, member_id, member_epoch)
        return ctx.result()

    def expire_consumer_classic_timer(self, group_id: str, member_id: str) -> Result:
        ctx = OperationContext(self)
        classic_members.expire_timer(ctx, group_id, member_id)
        return ctx.result()

    # -- timer operations (scheduled by the operations above) ---------------------------------------

    def _on_classic_group(self, group_id: str, action: Callable[[OperationContext, ClassicGroup], None]) -> Result:
        ctx = OperationContext(self)
        if isinstance(self.groups.get(group_id), ClassicGroup):
            action(ctx, ctx.edit(group_id))
        return ctx.result()

    def expire_heartbeat(self, group_id: str, member_id: str) -> Result:
        return self._on_classic_group(group_id, lambda ctx, g: rebalance.expire_heartbeat(ctx, g, member_id))

    def complete_join_on_timeout(self, group_id: str) -> Result:
        def complete(ctx: OperationContext, group: ClassicGroup) -> None:
            if group.is_in(S.PREPARING_REBALANCE):
                rebalance.complete_join(ctx, group)

        return self._on_classic_group(group_id, complete)

    def try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> Result:
        def attempt(ctx: OperationContext, group: ClassicGroup) -> None:
            if group.is_in(S.PREPARING_REBALANCE):
                rebalance.try_complete_initial_rebalance(ctx, group, delay_ms, remaining_ms)

        return self._on_classic_group(group_id, attempt)

    def expire_pending_sync(self, group_id: str, generation_id: int) -> Result:
        return self._on_classic_group(group_id, lambda ctx, g: rebalance.expire_pending_sync(ctx, g, generation_id))

    def cleanup_offsets(self) -> Result:
        ctx = OperationContext(self)
        offsets.expire_offsets(ctx)
        ctx.timers.append(self._offsets_cleanup())
        return ctx.result()

    def _offsets_cleanup(self) -> Schedule:
        return Schedule(OFFSETS_CLEANUP_KEY, self.config.offsets_retention_check_interval_ms, ShardCall("cleanup_offsets"))

    # -- replay (the only code that changes state) -------------------------------------------------

    def replay(self, record: Record) -> None:
        self.replay_all((record,))

    def replay_all(self, records: Iterable[Record]) -> None:
        """replay() of each record in order; loading calls it once per log batch (issue 12).

        OffsetCommit, most of a log, is applied inline. Before the first change to a group in a
        batch: its group and offsets, to put back if the batch's write fails. Every record names one
        group, and changes only that group's state. Within a run of one group's OffsetCommits only
        the first save can keep anything, and nothing else changes that group's entries, so the
        run looks them up once.
        """
        offsets, groups, touched = self.offsets, self.groups, self.touched
        current = committed = None
        grouped = False
        for record in records:
            key = record.key
            if type(key) is not OffsetCommitKey:
                self._replay_group_record(record)
                current = None
                continue
            group_id = key.group_id
            if group_id != current:
                touched.save(group_id, lambda g=group_id: (_copy_group(groups.get(g)), dict(offsets.get(g, {}))))
                current, committed, grouped = group_id, offsets.get(group_id), group_id in groups
            value = record.value
            if value is not None:
                if committed is None:
                    committed = offsets[group_id] = {}
                committed[(key.topic, key.partition)] = value
                if not grouped:
                    # Offsets without group metadata: a simple group (Kafka creates it on replay too).
                    groups[group_id] = ClassicGroup(group_id, state_timestamp=value.commit_timestamp)
                    grouped = True
            elif committed is not None:
                committed.pop((key.topic, key.partition), None)
                if not committed:
                    del offsets[group_id]
                    committed = None

    def _replay_group_record(self, record: Record) -> None:
        key = record.key
        group_id = key.group_id
        self.touched.save(group_id, lambda: (_copy_group(self.groups.get(group_id)), dict(self.offsets.get(group_id, {}))))
        if isinstance(key, GroupMetadataKey):
            if record.value is None:
                self.groups.pop(key.group_id, None)
            else:
                self.groups[key.group_id] = group_from_record(key.group_id, record.value)
        elif isinstance(key, ClassicGroupStateKey):
            if record.value is None:
                self.groups.pop(key.group_id, None)
            else:
                record.value.compact()
                self.groups[key.group_id] = record.value
        elif isinstance(key, SHARE_GROUP_KEYS):
            share_group.replay(self.groups, record)
        elif isinstance(key, CONSUMER_GROUP_KEYS):
            consumer_replay.replay(self.groups, record)
        else:
            raise TypeError(f"group coordinator cannot replay {type(key).__name__}")

    def restore(self, saved: dict[str, Any]) -> None:
        """Put back the groups a failed batch touched, as they were before it (see `replay`)."""
        for group_id, (group, committed) in saved.items():
            if group is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = group
            if committed:
                self.offsets[group_id] = committed
            else:
                self.offsets.pop(group_id, None)

    def on_loaded(self) -> Result:
        """After load (and failover): every member's session restarts now, so live members keep
        their generation with no rebalance (SPEC §1, Kafka's test_broker_failure)."""
        ctx = OperationContext(self)
        for group in self.groups.values():
            group.arm_sessions(ctx)
        for group_id in sorted(self.groups):
            rebalance.rebalance_if_over_capacity(ctx, group_id)
        ctx.timers.append(self._offsets_cleanup())
        return ctx.result()

    # -- views for operators and tests ---------------------------------------------------------------

    def durable_view(self) -> dict[str, Any]:
        """What the log holds about each group: for comparing a live shard with one rebuilt by replay."""
        view: dict[str, Any] = {"offsets": {g: dict(o) for g, o in self.offsets.items()}, "groups": {}}
        for group_id, group in self.groups.items():
            view["groups"][group_id] = group.durable_view()
        return view


def _copy_group(group: Group | None) -> Group | None:
    """A copy of the group that replay cannot change (share groups are changed in place by replay)."""
    return None if group is None else group.copy()


def group_from_record(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
    """Kafka's replay of GroupMetadata: Stable if it has members, else Empty; its subscribed topics
    computed from the members' subscriptions."""
    group = ClassicGroup(
        group_id,
        state=S.STABLE if value.members else S.EMPTY,
        state_timestamp=value.current_state_timestamp,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
    )
    for m in value.members:
        group.add(
            ClassicMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms if m.rebalance_timeout_ms >= 0 else m.session_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=((value.protocol or "", m.subscription),),
                assignment=m.assignment,
            )
        )
    group.leader_id = value.leader
    group.subscribed_topics = group.compute_subscribed_topics()
    return group

