"""Every setting's value held to Kafka's range, with one line naming the setting."""

import pytest

from cluster.config import SETTINGS, Config, ConfigError, parse_values


@pytest.mark.parametrize("name, bad, message", [
    ("group.share.delivery.count.limit", "100", "must be between 2 and 10, got 100"),
    ("group.share.delivery.count.limit", "1", "must be between 2 and 10, got 1"),
    ("group.share.record.lock.duration.ms", "999", "must be between 1000 and 3600000"),
    ("group.share.record.lock.duration.ms", "3600001", "must be between 1000 and 3600000"),
    ("group.share.partition.max.record.locks", "99", "must be between 100 and 10000"),
    ("group.share.max.size", "1001", "must be between 1 and 1000"),
    ("offsets.topic.num.partitions", "0", "must be at least 1"),
    ("share.coordinator.state.topic.num.partitions", "-3", "must be at least 1"),
    ("num.partitions", "abc", "expected an integer, got 'abc'"),
    ("num.partitions", "1.5", "expected an integer, got '1.5'"),
    ("num.partitions", "1_000", "expected an integer, got '1_000'"),
    ("group.max.size", "2147483648", "does not fit a Java int"),
    ("raygroups.coordinators", "0", "must be at least 1"),
    ("raygroups.operator.port", "65536", "must be between 0 and 65535"),
    ("raygroups.metrics.port", "-2", "must be between -1 and 65535"),
    ("max.connections", "-1", "must be at least 0"),
    ("auto.create.topics.enable", "maybe", "expected true or false"),
    ("raygroups.gateways", "0", "expected auto, per-node or a positive integer"),
    ("share.auto.offset.reset", "sometime", "share.auto.offset.reset"),
])
def test_out_of_range_is_one_line_naming_the_setting(name, bad, message):
    with pytest.raises(ConfigError) as caught:
        parse_values({name: bad})
    text = str(caught.value)
    assert text.startswith(f"bad value for {name}: ")
    assert message in text
    assert "\n" not in text and "int()" not in text and "invalid literal" not in text


@pytest.mark.parametrize("name, good, value", [
    ("group.share.delivery.count.limit", "2", 2),
    ("group.share.delivery.count.limit", " 10 ", 10),
    ("group.share.record.lock.duration.ms", "3600000", 3_600_000),
    ("offsets.retention.check.interval.ms", "9999999999", 9_999_999_999),  # a Java long
    ("queued.max.request.bytes", "-1", -1),
    ("raygroups.gateways", "per-node", "per-node"),
    ("raygroups.gateways", "3", 3),
])
def test_values_within_range(name, good, value):
    assert parse_values({name: good})[name] == value


def test_every_default_is_within_its_own_range():
    for setting in SETTINGS.values():
        setting.kind.check(setting.default)


def test_every_setting_shows_a_range_or_is_free_text():
    ranged = {n for n, s in SETTINGS.items() if s.range}
    assert "group.share.delivery.count.limit" in ranged
    assert SETTINGS["group.share.delivery.count.limit"].range == "[2,...,10]"
    assert SETTINGS["num.partitions"].range == "[1,...]"
    assert SETTINGS["raygroups.log.flush"].range == "batch, none"


def test_programs_may_go_below_kafkas_ranges_but_not_past_types():
    # Simulations of deliberately tiny worlds build Config.load without check_ranges.
    assert Config.load(["group.share.partition.max.record.locks=8"])["group.share.partition.max.record.locks"] == 8
    with pytest.raises(ConfigError, match="expected an integer"):
        Config.load(["group.share.partition.max.record.locks=eight"])
    with pytest.raises(ConfigError, match="between 100 and 10000"):
        Config.load(["group.share.partition.max.record.locks=8"], check_ranges=True)


def test_unknown_setting_points_to_raygroups_config():
    with pytest.raises(ConfigError, match=r"unknown configuration 'no.such' \(`raygroups config` lists every setting\)"):
        parse_values({"no.such": "1"})
