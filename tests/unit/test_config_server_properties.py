"""A real Kafka server.properties: broker settings raygroups has no use for are warned about, not
refused; listeners lose the KRaft controller listener; log.dirs gives the data directory."""

from pathlib import Path

import pytest

from cluster.config import ConfigError
from cluster.server_properties import load_user_config

STOCK = Path(__file__).parents[1] / "data" / "kafka-server.properties"


def test_the_stock_file_loads_with_warnings_only():
    user = load_user_config(config_file=STOCK)
    assert user.config["listeners"] == "PLAINTEXT://:9092"
    assert user.config["advertised.listeners"] == "PLAINTEXT://localhost:9092"
    assert user.config["num.partitions"] == 1
    assert user.config["socket.request.max.bytes"] == 104857600
    assert user.data_dir == Path("/tmp/kraft-combined-logs")
    ignored = [w for w in user.warnings if w.startswith("Kafka broker settings")]
    assert len(ignored) == 1
    for name in ("process.roles", "node.id", "controller.quorum.voters", "log.retention.hours",
                 "num.network.threads"):
        assert name in ignored[0]
    # What applies is taken: the stock file's one broker keeps its internal topics in one copy.
    assert user.config["offsets.topic.replication.factor"] == 1
    assert user.config["share.coordinator.state.topic.replication.factor"] == 1
    assert "offsets.topic.replication.factor" not in ignored[0]
    assert any("CONTROLLER://:9093 ignored" in w for w in user.warnings)
    assert all("\n" not in w for w in user.warnings)


def test_kafka_4_names_are_known_too():
    user = load_user_config(["controller.quorum.bootstrap.servers=localhost:9093", "group.coordinator.threads=4",
                             "listener.name.sasl_ssl.plain.sasl.jaas.config=x"])
    assert "controller.quorum.bootstrap.servers, group.coordinator.threads" in user.warnings[0]


def test_a_name_neither_kafkas_nor_ours_is_an_error(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("process.roles=broker\nnum.partitons=3\n")
    with pytest.raises(ConfigError, match="unknown configuration 'num.partitons'"):
        load_user_config(config_file=f)


def test_values_from_a_file_are_held_to_kafkas_ranges(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("group.share.delivery.count.limit = 100\n")
    with pytest.raises(ConfigError, match="bad value for group.share.delivery.count.limit: must be between 2 and 10"):
        load_user_config(config_file=f)


def test_the_command_line_wins_over_the_file(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("num.partitions=3\nlog.dirs=/a,/b\nlog.dir=/c\n")
    user = load_user_config(["num.partitions=4"], f)
    assert user.config["num.partitions"] == 4
    assert user.data_dir == Path("/a")
    assert any("/b ignored" in w for w in user.warnings)


def test_log_dir_alone_gives_the_data_directory():
    assert load_user_config(["log.dir=/data/k"]).data_dir == Path("/data/k")


def test_command_line_host_and_port_win_over_the_files_listeners():
    from cluster.server_properties import with_command_line_address

    user = load_user_config(config_file=STOCK)
    config = with_command_line_address(user, None, 0)
    assert config["listeners"] == "PLAINTEXT://:0"
    assert config["advertised.listeners"] == "PLAINTEXT://localhost:0"  # the port bound
    config = with_command_line_address(user, "127.0.0.1", None)
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert config["advertised.listeners"] == "PLAINTEXT://localhost:9092"
    assert with_command_line_address(user, None, None) is user.config


def test_listeners_given_with_config_are_not_overridden_by_port():
    from cluster.server_properties import with_command_line_address

    user = load_user_config(["listeners=SSL://:9093"], STOCK)
    assert with_command_line_address(user, None, 0)["listeners"] == "SSL://:9093"


@pytest.mark.parametrize("pairs, message", [
    (["group.min.session.timeout.ms=10000", "group.max.session.timeout.ms=9000"],
     "bad value for group.max.session.timeout.ms: must be at least group.min.session.timeout.ms (10000), got 9000"),
    (["group.share.heartbeat.interval.ms=45000"],
     "bad value for group.share.session.timeout.ms: must be more than group.share.heartbeat.interval.ms (45000), got 45000"),
    (["group.share.max.size=300", "group.share.max.share.sessions=250"],
     "bad value for group.share.max.share.sessions: must be at least group.share.max.size (300), got 250"),
    (["group.consumer.heartbeat.interval.ms=45000"],
     "bad value for group.consumer.session.timeout.ms: must be more than group.consumer.heartbeat.interval.ms (45000), got 45000"),
    (["group.consumer.min.heartbeat.interval.ms=20000"],
     "bad value for group.consumer.max.heartbeat.interval.ms: must be at least group.consumer.min.heartbeat.interval.ms (20000), got 15000"),
])
def test_settings_checked_together_as_kafka_does(pairs, message):
    with pytest.raises(ConfigError) as caught:
        load_user_config(pairs)
    assert str(caught.value) == message
