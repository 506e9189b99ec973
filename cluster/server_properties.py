"""What a user configures (`--config-file`, `--config`), read the way Kafka reads server.properties.

A stock Kafka server.properties starts a cluster: the broker settings raygroups has no use for
(process.roles, node.id, controller.quorum.*, replication factors, ...) are listed in one warning
instead of refused; `listeners`/`advertised.listeners` lose their KRaft controller listeners (the
names in controller.listener.names), which raygroups does not have; the first of `log.dirs` is the
data directory unless one is given on the command line. A name neither Kafka's nor raygroups' is
still an error, and every value is held to its range.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cluster.config import SETTINGS, Config, ConfigError, parse_pairs, parse_values, read_properties
from cluster.kafka_broker_names import is_kafka_setting

_LISTENER_SETTINGS = ("listeners", "advertised.listeners")
_LOG_DIRS = ("log.dirs", "log.dir")  # Kafka: log.dirs wins over log.dir


@dataclass
class UserConfig:
    config: Config
    warnings: list[str] = field(default_factory=list)
    data_dir: Path | None = None  # from log.dirs
    from_file: frozenset[str] = frozenset()  # the names the file set and the command line did not


def load_user_config(pairs: Iterable[str] = (), config_file: Path | None = None) -> UserConfig:
    """Raises ConfigError (one line) for an unknown name or a bad value; the command line wins."""
    raw: dict[str, str] = {}
    if config_file is not None:
        raw.update(read_properties(config_file))
    from_file = frozenset(raw)
    given = parse_pairs(pairs)
    raw.update(given)
    user = map_kafka_settings(raw)
    user.from_file = from_file - set(given)
    return user


def with_command_line_address(user: UserConfig, host: str | None, port: int | None) -> Config:
    """--host/--port win over the file's listeners, as the command line wins over the file; the
    file's advertised.listeners then keep their host and advertise the port bound."""
    config = user.config
    if host is None and port is None:
        return config
    listeners = config["listeners"]
    if "listeners" in user.from_file and listeners and "," not in listeners:
        name, _, address = listeners.partition("://")
        file_host, _, file_port = address.rpartition(":")
        config = config.with_overrides({"listeners": f"{name}://{file_host if host is None else host}:"
                                                     f"{file_port if port is None else port}"})
    advertised = config["advertised.listeners"]
    if port is not None and "advertised.listeners" in user.from_file and advertised and "," not in advertised:
        name, _, address = advertised.partition("://")
        config = config.with_overrides({"advertised.listeners": f"{name}://{address.rpartition(':')[0]}:0"})
    return config


def map_kafka_settings(raw: Mapping[str, str]) -> UserConfig:
    ours: dict[str, str] = {}
    ignored: list[str] = []
    warnings: list[str] = []
    controllers = {n.strip().upper() for n in raw.get("controller.listener.names", "").split(",") if n.strip()}
    for name, text in raw.items():
        if name in _LISTENER_SETTINGS:
            kept, dropped = _without_controllers(text, controllers)
            if dropped:
                warnings.append(f"{name}: {', '.join(dropped)} ignored (a KRaft controller listener; raygroups has none)")
            ours[name] = kept
        elif name in _LOG_DIRS:
            continue
        elif name in SETTINGS or not is_kafka_setting(name):
            ours[name] = text  # not Kafka's either: parse_values names it as unknown
        else:
            ignored.append(name)
    data_dir, note = _data_dir(raw)
    if note:
        warnings.append(note)
    if ignored:
        warnings.append(f"Kafka broker settings that do not apply to raygroups, ignored: {', '.join(ignored)}")
    config = Config(parse_values(ours, check_ranges=True))
    check_together(config)
    return UserConfig(config, warnings, data_dir)


# Kafka's checks across settings (GroupCoordinatorConfig's and ShareGroupConfig's `require`s), as
# (larger, smaller, strictly): the first must be at least (or, strictly, more than) the second.
_ORDERED = (
    ("group.max.session.timeout.ms", "group.min.session.timeout.ms", False),
    ("group.share.session.timeout.ms", "group.share.heartbeat.interval.ms", True),
    ("group.share.max.share.sessions", "group.share.max.size", False),
    ("group.share.max.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", False),
    ("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", False),
    ("group.share.max.record.lock.duration.ms", "group.share.record.lock.duration.ms", False),
    ("group.share.max.delivery.count.limit", "group.share.min.delivery.count.limit", False),
    ("group.share.max.session.timeout.ms", "group.share.min.session.timeout.ms", False),
    ("group.share.max.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", False),
    ("group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms", True),
    ("group.consumer.max.session.timeout.ms", "group.consumer.min.session.timeout.ms", False),
    ("group.consumer.max.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", False),
    ("connections.max.idle.ms", "connection.failed.authentication.delay.ms", True),
)
_NEVER = {"connections.max.idle.ms": -1}  # a value that turns the bound off: no order to check


def check_together(config: Config) -> None:
    for larger, smaller, strictly in _ORDERED:
        big, small = config[larger], config[smaller]
        if _NEVER.get(larger) == big:
            continue
        if big < small or (strictly and big == small):
            raise ConfigError(f"bad value for {larger}: must be {'more than' if strictly else 'at least'} "
                              f"{smaller} ({small}), got {big}")


def _without_controllers(text: str, controllers: set[str]) -> tuple[str, list[str]]:
    kept, dropped = [], []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name = item.partition("://")[0].upper()
        (dropped if name in controllers else kept).append(item)
    return ",".join(kept), dropped


def _data_dir(raw: Mapping[str, str]) -> tuple[Path | None, str]:
    for name in _LOG_DIRS:
        dirs = [d.strip() for d in raw.get(name, "").split(",") if d.strip()]
        if dirs:
            rest = f"; {', '.join(dirs[1:])} ignored (raygroups keeps one data directory)" if len(dirs) > 1 else ""
            return Path(dirs[0]), (f"{name}: data in {dirs[0]}{rest}" if rest else "")
    return None, ""
