"""The group coordinator shard: every group one `__consumer_offsets` partition holds (Kafka's GroupCoordinatorShard).

Operations take a request (and the request's token, for those that may park) and return a Result:
records and a response. They never change state; `replay` does, for the records they return,
exactly as it does when a partition is loaded after a failover. Timer expiries are operations too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordinator.classic import admin, heartbeat_leave, join, offsets, rebalance, sync
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
from coordinator.config import GroupCoordinatorConfig
from coordinator.records import (
    SHARE_GROUP_KEYS,
    ClassicGroupStateKey,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kernel.result import RequestToken, Result
from coordinator.share import admin as share_admin
from coordinator.share import group as share_group
from coordinator.share import heartbeat as share_heartbeat
from coordinator.share import share_state
from coordinator.share.group import ShareGroup
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
from coordinator.txn import Txn

OFFSETS_CLEANUP_KEY = ("offsets-cleanup",)


class GroupCoordinatorShard:
    def __init__(
        self,
        tp: tuple[str, int],
        clock: Clock,
        legacy_timer: object = None,  # ignored: timers are values in each Result now
        config: GroupCoordinatorConfig = GroupCoordinatorConfig(),
        new_member_id: Callable[[str], str] = str,
    ) -> None:
        self.tp = tp
        self.clock = clock
        self.config = config
        # Kafka: clientId (or group.instance.id) + "-" + a random UUID. Injected: tests pass a counter.
        self.new_member_id = new_member_id
        self.groups: dict[str, Any] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        # The cluster's topic metadata (Kafka's metadata image): given by update_topics, not logged.
        self.topics_image: TopicsImage = EMPTY_IMAGE
        self._topics_known = False
        self.touched = TouchedKeys()

    # -- classic group operations ----------------------------------------------------------------

    def join_group(self, req: JoinGroupRequest, token: RequestToken) -> Result:
        txn = Txn(self, token)
        return txn.result(join.join_group(txn, req, token))

    def sync_group(self, req: SyncGroupRequest, token: RequestToken) -> Result:
        txn = Txn(self, token)
        return txn.result(sync.sync_group(txn, req, token))

    def heartbeat(self, req: HeartbeatRequest, token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        return txn.result(heartbeat_leave.heartbeat(txn, req))

    def leave_group(self, req: LeaveGroupRequest, token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        return txn.result(heartbeat_leave.leave_group(txn, req))

    def commit_offsets(self, req: OffsetCommitRequest, token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        return txn.result(offsets.commit_offsets(txn, req))

    def fetch_offsets(self, req: OffsetFetchRequest, token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        return txn.result(offsets.fetch_offsets(txn, req))

    def describe_groups(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        described: list[DescribedGroup] = [admin.describe_group(txn, g) for g in group_ids]
        return txn.result(described)

    def list_groups(
        self, states: tuple[str, ...] = (), types: tuple[str, ...] = (), token: RequestToken | None = None
    ) -> Result:
        txn = Txn(self, token)
        listed: list[ListedGroup] = admin.list_groups(txn, states, types)
        return txn.result(listed)

    def delete_groups(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        deleted: list[DeletedGroup] = [admin.delete_group(txn, g) for g in group_ids]
        return txn.result(deleted)

    # -- share group operations (coordinator/share/) -------------------------------------------------

    def share_group_heartbeat(self, req: ShareGroupHeartbeatRequest, token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        outcome: ShareHeartbeatOutcome = share_heartbeat.share_group_heartbeat(txn, req)
        return txn.result(outcome)

    def share_state_initialized(
        self, group_id: str, results: tuple[ShareStateInitResult, ...], token: RequestToken | None = None
    ) -> Result:
        txn = Txn(self, token)
        share_state.share_state_initialized(txn, group_id, results)
        return txn.result()

    def share_group_describe(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        described: list[DescribedShareGroup] = [share_admin.describe_share_group(txn, g) for g in group_ids]
        return txn.result(described)

    def share_group_topics(self, group_ids: tuple[str, ...], token: RequestToken | None = None) -> Result:
        txn = Txn(self, token)
        return txn.result([share_admin.share_group_topics(txn, g) for g in group_ids])

    def update_topics(self, topics: tuple[TopicImage, ...], token: RequestToken | None = None) -> Result:
        """The cluster's topic metadata changed (Kafka's onMetadataUpdate + maybeCleanupShareGroupState).

        The image is not a record: it is the cluster's, given again after a failover. Topics that
        vanished are forgotten by every share group's share-state metadata (records), and their share
        partitions are answered (ShareStateDelete) for the cluster to delete. The first image given to
        a shard deletes nothing: an empty or partial first image must not wipe share state."""
        new_image = TopicsImage.of(topics)
        txn = Txn(self, token)
        deletes: tuple[ShareStateDelete, ...] = ()
        if self._topics_known:
            deletes = share_state.cleanup_deleted_topics(txn, share_state.vanished_topic_ids(self.groups, new_image))
        self.topics_image = new_image
        self._topics_known = True
        return txn.result(deletes)

    def expire_share_session(self, group_id: str, member_id: str) -> Result:
        txn = Txn(self)
        share_heartbeat.expire_session(txn, group_id, member_id)
        return txn.result()

    # -- timer operations (scheduled by the operations above) ---------------------------------------

    def _on_classic_group(self, group_id: str, action: Callable[[Txn, ClassicGroup], None]) -> Result:
        txn = Txn(self)
        if isinstance(self.groups.get(group_id), ClassicGroup):
            action(txn, txn.edit(group_id))
        return txn.result()

    def expire_heartbeat(self, group_id: str, member_id: str) -> Result:
        return self._on_classic_group(group_id, lambda txn, g: rebalance.expire_heartbeat(txn, g, member_id))

    def complete_join_on_timeout(self, group_id: str) -> Result:
        def complete(txn: Txn, group: ClassicGroup) -> None:
            if group.is_in(S.PREPARING_REBALANCE):
                rebalance.complete_join(txn, group)

        return self._on_classic_group(group_id, complete)

    def try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> Result:
        def attempt(txn: Txn, group: ClassicGroup) -> None:
            if group.is_in(S.PREPARING_REBALANCE):
                rebalance.try_complete_initial_rebalance(txn, group, delay_ms, remaining_ms)

        return self._on_classic_group(group_id, attempt)

    def expire_pending_sync(self, group_id: str, generation_id: int) -> Result:
        return self._on_classic_group(group_id, lambda txn, g: rebalance.expire_pending_sync(txn, g, generation_id))

    def cleanup_offsets(self) -> Result:
        txn = Txn(self)
        offsets.expire_offsets(txn)
        txn.timers.append(self._offsets_cleanup())
        return txn.result()

    def _offsets_cleanup(self) -> Schedule:
        return Schedule(OFFSETS_CLEANUP_KEY, self.config.offsets_retention_check_interval_ms, ShardCall("cleanup_offsets"))

    # -- replay (the only code that changes state) -------------------------------------------------

    def replay(self, record: Record) -> None:
        key = record.key
        # Before the first change to a group in a batch: its group and offsets, to put back if the
        # batch's write fails. Every record names one group, and changes only that group's state.
        group_id = key.group_id
        self.touched.save(group_id, lambda: (_copy_group(self.groups.get(group_id)), dict(self.offsets.get(group_id, {}))))
        if isinstance(key, OffsetCommitKey):
            committed = self.offsets.setdefault(key.group_id, {})
            if record.value is None:
                committed.pop((key.topic, key.partition), None)
                if not committed:
                    del self.offsets[key.group_id]
            else:
                committed[(key.topic, key.partition)] = record.value
                if key.group_id not in self.groups:
                    # Offsets without group metadata: a simple group (Kafka creates it on replay too).
                    self.groups[key.group_id] = ClassicGroup(key.group_id, state_timestamp=record.value.commit_timestamp)
        elif isinstance(key, GroupMetadataKey):
            if record.value is None:
                self.groups.pop(key.group_id, None)
            else:
                self.groups[key.group_id] = group_from_record(key.group_id, record.value)
        elif isinstance(key, ClassicGroupStateKey):
            if record.value is None:
                self.groups.pop(key.group_id, None)
            else:
                self.groups[key.group_id] = record.value
        elif isinstance(key, SHARE_GROUP_KEYS):
            share_group.replay(self.groups, record)
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
        txn = Txn(self)
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    rebalance.reschedule_heartbeat(txn, group, member.member_id)
            elif isinstance(group, ShareGroup):
                for member_id in group.members:
                    share_heartbeat.schedule_session_timeout(txn, group.group_id, member_id)
        txn.timers.append(self._offsets_cleanup())
        return txn.result()

    # -- views for operators and tests ---------------------------------------------------------------

    def durable_view(self) -> dict[str, Any]:
        """What the log holds about each group: for comparing a live shard with one rebuilt by replay."""
        view: dict[str, Any] = {"offsets": {g: dict(o) for g, o in self.offsets.items()}, "groups": {}}
        for group_id, group in self.groups.items():
            if isinstance(group, ClassicGroup):
                view["groups"][group_id] = (
                    group.state.value,
                    group.generation_id,
                    group.protocol_type or None,
                    group.protocol_name,
                    group.leader_id,
                    tuple(
                        (m.member_id, m.group_instance_id, m.session_timeout_ms, m.rebalance_timeout_ms,
                         m.metadata(group.protocol_name), m.assignment)
                        for m in group.members.values()
                    ),
                )
            elif isinstance(group, ShareGroup):
                view["groups"][group_id] = group.durable_view()
        return view


def _copy_group(group: Any) -> Any:
    """A copy of the group that replay cannot change: classic groups are replaced whole by replay,
    share groups are changed in place."""
    return group.copy() if isinstance(group, ShareGroup) else group


def group_from_record(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
    """Kafka's replay of GroupMetadata: Stable if it has members, else Empty."""
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
    return group

