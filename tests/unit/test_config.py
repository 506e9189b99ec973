import pytest

from cluster.config import Config, ConfigError


def test_defaults_are_kafkas():
    config = Config()
    assert config["group.initial.rebalance.delay.ms"] == 3000
    assert config["offsets.topic.num.partitions"] == 50
    assert config["group.share.record.lock.duration.ms"] == 30000
    assert config["socket.request.max.bytes"] == 104857600
    assert config["auto.create.topics.enable"] is True


def test_command_line_overrides_file(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\nnum.partitions=3\ngroup.max.size: 10\n! other comment\n")
    config = Config.load(["num.partitions=4"], f)
    assert config["num.partitions"] == 4
    assert config["group.max.size"] == 10


@pytest.mark.parametrize(
    "pair, message",
    [
        ("no.such.setting=1", "unknown configuration"),
        ("num.partitions=zero", "bad value for num.partitions: expected an integer, got 'zero'"),
        ("num.partitions=0", "bad value for num.partitions: must be at least 1, got 0"),
        ("raygroups.log.flush=sometimes", "batch, none"),
        ("num.partitions", "name=value"),
    ],
)
def test_bad_settings_are_one_line_errors(pair, message):
    with pytest.raises(ConfigError, match=message):
        Config.load([pair], check_ranges=True)
