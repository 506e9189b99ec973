"""A share group's own share.session.timeout.ms and share.heartbeat.interval.ms (Kafka's
GroupMetadataManager.shareGroupSessionTimeoutMs / shareGroupHeartbeatIntervalMs, which read the
GroupConfigManager): the member's session and the interval its heartbeat answer carries follow the
group's values, other groups keep the broker's, and a change applies from the member's next heartbeat."""

from __future__ import annotations

from coordinator.config import GroupConfig
from coordinator.share.heartbeat import session_key
from kernel.timer import ManualTimer
from tests.unit.share.context import ShareContext, topic

BROKER_SESSION, BROKER_INTERVAL = 45_000, 5_000


def context() -> ShareContext:
    return ShareContext(topic("foo", 2), share_session_timeout_ms=BROKER_SESSION,
                        share_heartbeat_interval_ms=BROKER_INTERVAL)


def deadline(ctx: ShareContext, member_id: str, group_id: str = "g", timer: ManualTimer | None = None) -> int:
    return (timer or ctx.timer).deadline(session_key(group_id, member_id)) - ctx.clock.now


def test_a_members_session_and_heartbeat_interval_follow_its_groups_configs():
    ctx = context()
    ctx.shard.group_config_manager.update({"g": GroupConfig(share_session_timeout_ms=50_000,
                                                             share_heartbeat_interval_ms=8_000)})
    assert ctx.join("m1", ["foo"]).response.heartbeat_interval_ms == 8_000
    assert deadline(ctx, "m1") == 50_000
    other = ctx.join("m2", ["foo"], group_id="other")
    assert other.response.heartbeat_interval_ms == BROKER_INTERVAL
    assert deadline(ctx, "m2", "other") == BROKER_SESSION


def test_one_override_leaves_the_other_setting_the_brokers():
    ctx = context()
    ctx.shard.group_config_manager.update({"g": GroupConfig(share_heartbeat_interval_ms=8_000)})
    assert ctx.join("m1", ["foo"]).response.heartbeat_interval_ms == 8_000
    assert deadline(ctx, "m1") == BROKER_SESSION


def test_the_groups_session_timeout_decides_when_a_silent_member_is_fenced():
    ctx = context()
    ctx.shard.group_config_manager.update({"g": GroupConfig(share_session_timeout_ms=50_000)})
    ctx.join("m1", ["foo"])
    ctx.advance(BROKER_SESSION + 1_000)
    assert "m1" in ctx.group().members  # the broker's 45 s would have fenced it
    ctx.advance(50_000 - BROKER_SESSION - 1_000)
    assert "m1" not in ctx.group().members


def test_a_change_applies_from_the_members_next_heartbeat():
    ctx = context()
    joined = ctx.join("m1", ["foo"])
    assert joined.response.heartbeat_interval_ms == BROKER_INTERVAL
    ctx.advance(1_000)
    ctx.shard.group_config_manager.update({"g": GroupConfig(share_session_timeout_ms=55_000,
                                                             share_heartbeat_interval_ms=9_000)})
    assert deadline(ctx, "m1") == BROKER_SESSION - 1_000  # the session armed before the change
    again = ctx.heartbeat("m1", joined.response.member_epoch)
    assert again.response.heartbeat_interval_ms == 9_000 and deadline(ctx, "m1") == 55_000
    ctx.shard.group_config_manager.update({})  # the overrides deleted: the broker's again
    assert ctx.heartbeat("m1", joined.response.member_epoch).response.heartbeat_interval_ms == BROKER_INTERVAL
    assert deadline(ctx, "m1") == BROKER_SESSION


def test_sessions_restarted_after_a_load_use_the_groups_timeout():
    ctx = context()
    ctx.join("m1", ["foo"])
    fresh_timer = ManualTimer(ctx.clock)
    fresh = ctx.replayed()
    fresh.group_config_manager.update({"g": GroupConfig(share_session_timeout_ms=58_000)})
    fresh_timer.apply(fresh.on_loaded().timers, fresh)
    assert deadline(ctx, "m1", timer=fresh_timer) == 58_000
