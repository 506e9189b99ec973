"""Group configs (cluster/group_configs.py): Kafka's rules for IncrementalAlterConfigs of a GROUP,
the broker's bounds, and the overrides kept in the cluster metadata: pushed with the map and
replayed after a restart of the controller on the same data directory."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from cluster.calls.kinds import ActorKind
from cluster.control.controller import Controller
from cluster.config import Config
from cluster.group_configs import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    AlterOp,
    Refusal,
    apply,
    coordinator_group_configs,
    effective,
    lock_duration_ms,
)
from cluster.metadata import CODEC, ClusterMetadata
from coordinator.config import GroupConfig
from tests.unit.controller.fake_pool import FakeClock, FakePool
from tests.unit.controller.test_reconciler import SMALL

BROKER = Config({})


def test_set_and_delete_change_only_the_named_settings():
    new = apply(BROKER, {}, [AlterOp("share.auto.offset.reset", SET, "earliest"),
                             AlterOp("share.record.lock.duration.ms", SET, "20000")])
    assert new == {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}
    assert apply(BROKER, new, [AlterOp("share.auto.offset.reset", DELETE, None)]) == {
        "share.record.lock.duration.ms": "20000"}
    values = effective(BROKER, {"share.delivery.count.limit": "3"})
    assert values["share.delivery.count.limit"] == (3, True)
    assert values["share.record.lock.duration.ms"] == (30_000, False)
    assert str(values["share.auto.offset.reset"][0]) == "latest"


@pytest.mark.parametrize(
    "op, code, text",
    [
        (AlterOp("share.record.lock.duration.ms", APPEND, "1"), ErrorCode.invalid_config, "Can't APPEND to key"),
        (AlterOp("share.delivery.count.limit", SUBTRACT, "1"), ErrorCode.invalid_config, "not LIST"),
        (AlterOp("no.such.config", SET, "1"), ErrorCode.invalid_config, "Unknown group config name: no.such.config"),
        (AlterOp("share.record.lock.duration.ms", SET, "abc"), ErrorCode.invalid_config,
         "Invalid value abc for configuration share.record.lock.duration.ms: Not a number of type INT"),
        # Kafka's GroupConfig.validateValues messages name the bound's setting.
        (AlterOp("share.record.lock.duration.ms", SET, "14999"), ErrorCode.invalid_config,
         "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
        (AlterOp("share.record.lock.duration.ms", SET, "60001"), ErrorCode.invalid_config,
         "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
        (AlterOp("share.delivery.count.limit", SET, "1"), ErrorCode.invalid_config,
         "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
        (AlterOp("share.delivery.count.limit", SET, "11"), ErrorCode.invalid_config,
         "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
        (AlterOp("share.auto.offset.reset", SET, "middle"), ErrorCode.invalid_config, "share.auto.offset.reset"),
        (AlterOp("share.session.timeout.ms", SET, "44999"), ErrorCode.invalid_config,
         "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
        (AlterOp("share.session.timeout.ms", SET, "60001"), ErrorCode.invalid_config,
         "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
        (AlterOp("share.session.timeout.ms", SET, "0"), ErrorCode.invalid_config,
         "Invalid value 0 for configuration share.session.timeout.ms: Value must be at least 1"),
        (AlterOp("share.heartbeat.interval.ms", SET, "4999"), ErrorCode.invalid_config,
         "share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
        (AlterOp("share.heartbeat.interval.ms", SET, "15001"), ErrorCode.invalid_config,
         "share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"),
        (AlterOp("share.heartbeat.interval.ms", SET, "x"), ErrorCode.invalid_config, "Not a number of type INT"),
        (AlterOp("share.isolation.level", SET, "read_dirty"), ErrorCode.invalid_config,
         "Invalid value read_dirty for configuration share.isolation.level: String must be one of: "
         "read_committed, read_uncommitted"),
        (AlterOp("consumer.rebalance.timeout.ms", SET, "45000"), ErrorCode.invalid_config,
         "Unknown group config name: consumer.rebalance.timeout.ms"),
        (AlterOp("share.auto.offset.reset", SET, None), ErrorCode.invalid_request, "Null value not supported"),
        (AlterOp("share.auto.offset.reset", 7, "earliest"), ErrorCode.invalid_request, "Unknown operations type 7"),
    ],
)
def test_kafkas_refusals(op, code, text):
    refusal = apply(BROKER, {}, [op])
    assert isinstance(refusal, Refusal) and refusal.error_code == code and text in refusal.message


def test_the_share_session_settings_and_the_isolation_level_can_be_set():
    ops = [AlterOp("share.session.timeout.ms", SET, "60000"), AlterOp("share.heartbeat.interval.ms", SET, " 15000 "),
           AlterOp("share.isolation.level", SET, "read_committed")]
    new = apply(BROKER, {}, ops)
    assert new == {"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "15000",
                   "share.isolation.level": "read_committed"}
    values = effective(BROKER, new)
    assert values["share.session.timeout.ms"] == (60_000, True)
    assert values["share.heartbeat.interval.ms"] == (15_000, True)
    assert values["share.isolation.level"] == ("read_committed", True)
    assert effective(BROKER, {})["share.isolation.level"] == ("read_uncommitted", False)
    assert effective(BROKER, {})["share.session.timeout.ms"] == (45_000, False)


def test_the_session_timeout_must_exceed_the_heartbeat_interval_with_the_brokers_values_filling_in():
    """Kafka's validate merges the broker's values under the group's before validateValues."""
    broker = Config({"group.share.max.heartbeat.interval.ms": 50_000})
    refusal = apply(broker, {}, [AlterOp("share.heartbeat.interval.ms", SET, "45000")])  # the broker's session: 45 s
    assert refusal == Refusal(ErrorCode.invalid_config,
                              "share.session.timeout.ms must be greater than share.heartbeat.interval.ms")
    stored = apply(broker, {}, [AlterOp("share.session.timeout.ms", SET, "60000")])
    assert apply(broker, stored, [AlterOp("share.heartbeat.interval.ms", SET, "45000")]) == {
        "share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "45000"}
    # Deleting the session override brings the broker's 45 s back under a 45 s interval.
    with_interval = {"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "45000"}
    assert isinstance(apply(broker, with_interval, [AlterOp("share.session.timeout.ms", DELETE, None)]), Refusal)


def test_the_group_coordinator_gets_each_groups_session_settings_within_the_brokers_bounds():
    """Kafka's GroupConfigManager.updateGroupConfig evaluates (caps) values set under wider bounds."""
    broker = Config({"group.share.max.session.timeout.ms": 50_000, "group.share.min.heartbeat.interval.ms": 6_000,
                     "group.share.heartbeat.interval.ms": 6_000})
    configs = coordinator_group_configs(broker, {
        "a": {"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "5000"},
        "b": {"share.heartbeat.interval.ms": "7000", "share.auto.offset.reset": "earliest"},
        "c": {"share.auto.offset.reset": "earliest"},
    })
    assert configs == {
        "a": GroupConfig(share_session_timeout_ms=50_000, share_heartbeat_interval_ms=6_000),
        "b": GroupConfig(share_heartbeat_interval_ms=7_000),
    }


def test_duplicate_keys_are_an_invalid_request():
    refusal = apply(BROKER, {}, [AlterOp("share.delivery.count.limit", SET, "3")] * 2)
    assert refusal == Refusal(ErrorCode.invalid_request, "Error due to duplicate config keys")


def test_the_bounds_take_in_the_brokers_own_value():
    broker = Config({"group.share.record.lock.duration.ms": 5000})
    assert apply(broker, {}, [AlterOp("share.record.lock.duration.ms", SET, "5000")]) == {
        "share.record.lock.duration.ms": "5000"}
    assert isinstance(apply(broker, {}, [AlterOp("share.record.lock.duration.ms", SET, "4999")]), Refusal)
    assert lock_duration_ms(broker, None) == 5000
    assert lock_duration_ms(broker, {"share.record.lock.duration.ms": "20000"}) == 20_000


def test_the_bounds_are_the_brokers_min_and_max_settings():
    broker = Config({"group.share.min.record.lock.duration.ms": 2000, "group.share.max.record.lock.duration.ms": 90_000,
                     "group.share.max.delivery.count.limit": 6})
    assert apply(broker, {}, [AlterOp("share.record.lock.duration.ms", SET, "2000")]) == {
        "share.record.lock.duration.ms": "2000"}
    assert apply(broker, {}, [AlterOp("share.record.lock.duration.ms", SET, "90000")]) == {
        "share.record.lock.duration.ms": "90000"}
    refusal = apply(broker, {}, [AlterOp("share.delivery.count.limit", SET, "7")])
    assert isinstance(refusal, Refusal) and "group.share.max.delivery.count.limit" in refusal.message


def test_a_min_above_its_max_is_refused_at_start():
    from cluster.config import ConfigError
    from cluster.server_properties import check_together

    with pytest.raises(ConfigError, match="group.share.max.record.lock.duration.ms: must be at least"):
        check_together(Config({"group.share.min.record.lock.duration.ms": 70_000}))


@pytest.mark.parametrize("lock_ms,message", [
    (10_000, "group.share.record.lock.duration.ms: must be at least group.share.min.record.lock.duration.ms"),
    (70_000, "group.share.max.record.lock.duration.ms: must be at least group.share.record.lock.duration.ms"),
])
def test_the_broker_lock_duration_lies_within_its_bounds(lock_ms, message):
    # Kafka's ShareGroupConfig requires min <= group.share.record.lock.duration.ms <= max.
    from cluster.config import ConfigError
    from cluster.server_properties import check_together

    with pytest.raises(ConfigError, match=message):
        check_together(Config({"group.share.record.lock.duration.ms": lock_ms}))
    check_together(Config({"group.share.record.lock.duration.ms": lock_ms,
                           "group.share.min.record.lock.duration.ms": 1_000,
                           "group.share.max.record.lock.duration.ms": 70_000}))


def test_group_config_records_replay_and_revert():
    meta = ClusterMetadata()
    result = meta.set_group_configs("g", {"share.auto.offset.reset": "earliest"})
    (record,) = result.records
    meta.replay(CODEC.decode(*CODEC.encode(record)))
    assert meta.group_configs == {"g": {"share.auto.offset.reset": "earliest"}}
    assert meta.set_group_configs("g", {"share.auto.offset.reset": "earliest"}).records == []  # no change
    (tombstone,) = meta.set_group_configs("g", {}).records
    assert tombstone.value is None
    meta.replay(tombstone)
    assert meta.group_configs == {}
    meta.restore({("group_config", "g"): {"share.delivery.count.limit": "3"}})  # a failed append undone
    assert meta.group_configs == {"g": {"share.delivery.count.limit": "3"}}


def test_overrides_are_pushed_with_the_map_and_survive_a_controller_restart(tmp_path):
    async def main() -> None:
        changes = [("g1", [AlterOp("share.auto.offset.reset", SET, "earliest")]),
                   ("g2", [AlterOp("share.record.lock.duration.ms", SET, "1")]),
                   ("g3", [AlterOp("share.delivery.count.limit", SET, "4")])]
        controller = Controller(Config(SMALL), tmp_path, "127.0.0.1", 0, "test", pool=FakePool(), clock=FakeClock())
        pool = controller.pool
        await controller.start()
        try:
            assert await controller.alter_group_configs(changes[2:], validate_only=True) == [(0, None)]
            assert controller._meta().group_configs == {}
            answers = await controller.alter_group_configs(changes)
            assert [a[0] for a in answers] == [0, ErrorCode.invalid_config.value, 0]
            leaders = [a for a in pool.spawned if a.kind is ActorKind.PARTITION_LEADER]
            assert leaders and all(
                a.leadership.group_configs == {"g1": {"share.auto.offset.reset": "earliest"},
                                               "g3": {"share.delivery.count.limit": "4"}}
                for a in leaders
            )
        finally:
            await controller.shutdown()
            controller.executor.shutdown()
        again = Controller(Config(SMALL), tmp_path, "127.0.0.1", 0, "test", pool=FakePool(), clock=FakeClock())
        await again.start()
        try:
            assert again.snapshot().group_configs["g1"] == {"share.auto.offset.reset": "earliest"}
            assert again._meta().group_configs["g3"] == {"share.delivery.count.limit": "4"}
        finally:
            await again.shutdown()
            again.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_failed_write_still_publishes_the_groups_written_before_it(tmp_path):
    async def main() -> None:
        controller = Controller(Config(SMALL), tmp_path, "127.0.0.1", 0, "test", pool=FakePool(), clock=FakeClock())
        await controller.start()
        try:
            real, writes = controller.metadata.write, []

            async def second_fails(*args):
                writes.append(args)
                if len(writes) == 2:
                    raise OSError("disk full")
                return await real(*args)

            controller.metadata.write = second_fails
            changes = [(g, [AlterOp("share.delivery.count.limit", SET, "4")]) for g in ("a", "b")]
            with pytest.raises(OSError):
                await controller.alter_group_configs(changes)
            leaders = [a for a in controller.pool.spawned if a.kind is ActorKind.PARTITION_LEADER]
            assert all(a.leadership.group_configs == {"a": {"share.delivery.count.limit": "4"}} for a in leaders)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("name", ["group.share.min.session.timeout.ms", "group.share.min.heartbeat.interval.ms"])
def test_a_share_session_or_heartbeat_min_above_its_max_is_refused_at_start(name):
    # Kafka's GroupCoordinatorConfig requires each max at least its min.
    from cluster.config import ConfigError
    from cluster.server_properties import check_together

    maximum = name.replace(".min.", ".max.")
    with pytest.raises(ConfigError, match=f"{maximum}: must be at least {name}"):
        check_together(Config({name: 100_000}))


def test_a_failed_authentication_delay_not_below_the_idle_timeout_is_refused_at_start():
    # Kafka's KafkaConfig: connection.failed.authentication.delay.ms must be lower than connections.max.idle.ms
    # (a delayed close would otherwise race the idle close).
    from cluster.config import ConfigError
    from cluster.server_properties import check_together

    with pytest.raises(ConfigError, match="connections.max.idle.ms: must be more than connection.failed.authentication.delay.ms"):
        check_together(Config({"connections.max.idle.ms": 1000, "connection.failed.authentication.delay.ms": 1000}))
    check_together(Config({"connections.max.idle.ms": -1}))  # never closed for idleness: nothing to order


def test_consumer_group_configs_are_bounded_and_reach_the_coordinator():
    from cluster.group_configs import coordinator_group_configs

    assert apply(BROKER, {}, [AlterOp("consumer.session.timeout.ms", SET, "50000")]) == {"consumer.session.timeout.ms": "50000"}
    refusal = apply(BROKER, {}, [AlterOp("consumer.session.timeout.ms", SET, "70000")])
    assert isinstance(refusal, Refusal)
    assert refusal.message == "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"
    refusal = apply(BROKER, {}, [AlterOp("consumer.heartbeat.interval.ms", SET, "4000")])
    assert refusal.message == "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"
    own = coordinator_group_configs(BROKER, {"g": {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}})
    assert own["g"].consumer_session_timeout_ms == 50000 and own["g"].consumer_heartbeat_interval_ms == 6000
    assert own["g"].share_session_timeout_ms is None
