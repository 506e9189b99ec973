"""The group coordinator's settings, by Kafka's names (cluster/config.py maps them here), and the
per-group configs it applies (Kafka's GroupConfig and GroupConfigManager)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2_147_483_647  # group.max.size
    # Kafka's classicGroupNewMemberJoinTimeoutMs: a new member parked in JoinGroup cannot heartbeat,
    # so its JoinGroup is timed out instead (it retries if it is still alive).
    new_member_join_timeout_ms: int = 300_000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    share_heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    share_max_size: int = 200  # group.share.max.size
    share_initialize_retry_interval_ms: int = 30_000  # group.share.initialize.retry.interval.ms
    consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_max_size: int = 2_147_483_647  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default
    consumer_regex_refresh_interval_ms: int = 600_000  # group.consumer.regex.refresh.interval.ms
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A group's own values of the settings the coordinator reads per group (Kafka's GroupConfig),
    already within the broker's bounds (cluster/group_configs.py evaluates them); None: the broker's."""

    share_session_timeout_ms: int | None = None  # share.session.timeout.ms
    share_heartbeat_interval_ms: int | None = None  # share.heartbeat.interval.ms
    consumer_session_timeout_ms: int | None = None  # consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int | None = None  # consumer.heartbeat.interval.ms


class GroupConfigManager:
    """Kafka's GroupConfigManager: the GroupConfig of every group that has one, as the controller
    last published them. The host replaces them whole (`update`) when its Leadership push brings a
    change; operations only read them, so a shard stays free of I/O. Not logged: after a failover
    the new host holds the cluster's configs already. A share member's session and heartbeat
    interval follow a change from its next heartbeat."""

    def __init__(self, configs: Mapping[str, GroupConfig] | None = None) -> None:
        self._configs: dict[str, GroupConfig] = dict(configs or {})

    def update(self, configs: Mapping[str, GroupConfig]) -> None:
        self._configs = dict(configs)

    def group_config(self, group_id: str) -> GroupConfig | None:
        return self._configs.get(group_id)
