"""Cluster configuration: Kafka's own names and defaults, plus raygroups.* (PROTOCOL.md §2).

Given as `--config name=value` (repeatable) or a `server.properties`-style file
(`--config-file F`); the command line wins over the file. An unknown name or a value that does
not parse is a usage error (exit 2) with one clear line, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharestate.offset_reset import OffsetReset


class ConfigError(ValueError):
    pass


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {text!r}")
        return value

    return parse


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {text!r}")
    return value


def _gateway_count(text: str) -> int | str:
    """auto (one per node on a multi-node cluster, else one), per-node, or a positive count."""
    value = text.strip().lower()
    if value in ("auto", "per-node"):
        return value
    try:
        return _positive(value)
    except ValueError:
        raise ValueError(f"expected auto, per-node or a positive integer, got {text!r}") from None


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"expected a non-negative integer, got {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    parse: Callable[[str], Any]
    doc: str


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        # classic groups (seed 000/002/004)
        Setting("group.initial.rebalance.delay.ms", 3000, _non_negative, "InitialDelayedJoin delay for an Empty group"),
        Setting("group.min.session.timeout.ms", 6000, _positive, "lowest session timeout a member may ask for"),
        Setting("group.max.session.timeout.ms", 1_800_000, _positive, "highest session timeout a member may ask for"),
        Setting("group.max.size", 2_147_483_647, _positive, "members per classic group"),
        Setting("offsets.topic.num.partitions", 50, _positive, "partitions of __consumer_offsets"),
        Setting("offsets.retention.minutes", 10080, _positive, "how long an Empty group's offsets are kept"),
        Setting("offsets.retention.check.interval.ms", 600_000, _positive, "how often expired offsets are removed"),
        Setting("offset.metadata.max.bytes", 4096, _positive, "largest commit metadata string"),
        # share groups (seed 001)
        Setting("share.coordinator.state.topic.num.partitions", 50, _positive, "partitions of __share_group_state"),
        Setting("group.share.record.lock.duration.ms", 30_000, _positive, "acquisition lock duration"),
        Setting("group.share.delivery.count.limit", 5, _positive, "deliveries before a record is archived"),
        Setting("group.share.partition.max.record.locks", 2000, _positive, "in-flight records per share partition"),
        Setting("group.share.max.size", 200, _positive, "members per share group"),
        Setting("group.share.heartbeat.interval.ms", 5000, _positive, "heartbeat interval given to share members"),
        Setting("group.share.session.timeout.ms", 45_000, _positive, "share member session timeout"),
        Setting("group.share.max.share.sessions", 2000, _positive, "share sessions per gateway"),
        Setting("group.share.initialize.retry.interval.ms", 30_000, _positive, "share-state initialization retry"),
        Setting("share.coordinator.snapshot.update.records.per.snapshot", 500, _non_negative, "ShareUpdates between ShareSnapshots"),
        # Kafka sets this per group (a dynamic group config); here it is the cluster-wide default.
        Setting("share.auto.offset.reset", OffsetReset("latest"), OffsetReset.parse,
                "where a share group starts on a partition: latest, earliest or by_duration:<ISO-8601>"),
        # brokers and topics
        Setting("socket.request.max.bytes", 104_857_600, _positive, "largest request frame a gateway reads"),
        Setting("num.partitions", 1, _positive, "partitions of an auto-created topic"),
        Setting("auto.create.topics.enable", True, _bool, "create unknown topics on Metadata requests"),
        Setting("message.max.bytes", 1_048_588, _positive, "largest record batch a producer may send"),
        Setting("delete.topic.enable", True, _bool, "allow DeleteTopics"),
        # raygroups' own
        Setting("raygroups.log.flush", "batch", _choice("batch", "none"),
                "batch: fsync once per append batch; none: page cache only (survives a process kill, not a power loss)"),
        Setting("raygroups.log.segment.bytes", 64 * 1024 * 1024, _positive, "segment size of user-topic logs"),
        Setting("raygroups.coordinator.log.segment.bytes", 4 * 1024 * 1024, _positive, "segment size of internal logs"),
        Setting("raygroups.coordinator.compaction.records", 20_000, _positive, "records appended between compactions"),
        Setting("raygroups.log.tombstone.retention.ms", 86_400_000, _non_negative, "how long compaction keeps tombstones"),
        Setting("raygroups.coordinators", 2, _positive, "group coordinator actors"),
        Setting("raygroups.share.coordinators", 2, _positive, "share coordinator actors"),
        Setting("raygroups.partition.leaders", 2, _positive, "partition leader actors"),
        Setting("raygroups.gateways", "auto", _gateway_count,
                "gateways (Kafka brokers as clients see them): a count, per-node (one on each Ray node), or "
                "auto (per-node when the Ray cluster has more than one node, else 1)"),
        Setting("raygroups.actor.replace", True, _bool, "start a replacement when an actor dies"),
        Setting("raygroups.load.timeout.ms", 120_000, _positive,
                "how long the controller waits for an actor to load partitions before it retries the load"),
        Setting("raygroups.cluster.id", "raygroups", str, "cluster id shown in Metadata and DescribeCluster"),
        # Kafka has no such broker settings: its controller only bounds the records of one operation
        # (MAX_RECORDS_PER_USER_OP, 10,000) and answers POLICY_VIOLATION beyond; hence raygroups.*.
        Setting("raygroups.max.partitions.per.topic", 10_000, _positive,
                "partitions one topic may have; CreateTopics/CreatePartitions beyond answer POLICY_VIOLATION "
                "(not a Kafka setting)"),
        Setting("raygroups.max.partitions", 20_000, _positive,
                "partitions the whole cluster may have, internal topics included; beyond: POLICY_VIOLATION "
                "(not a Kafka setting)"),
        # security and connection limits (issue 10); parsed and checked by cluster/gateway/auth/
        Setting("listeners", "", str,
                "the client listener, NAME://host:port (one per gateway; gateway i on port+i); empty: "
                "PLAINTEXT on --host/--port"),
        Setting("advertised.listeners", "", str,
                "the address clients are given for the client listener, NAME://host:port (gateway i on port+i; "
                "port 0: the port bound); empty: the listener's host, or the node's IP when it binds every interface"),
        Setting("listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", str,
                "listener name to security protocol"),
        # Kafka's default is GSSAPI, which raygroups does not speak.
        Setting("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", str,
                "SASL mechanisms a SASL listener offers"),
        Setting("super.users", "", str, "principals allowed everything, e.g. User:admin;User:ops"),
        Setting("ssl.keystore.type", "PEM", str, "only PEM is supported"),
        Setting("ssl.keystore.location", "", str, "PEM file with the certificate chain and the private key"),
        Setting("ssl.keystore.certificate.chain", "", str, "PEM certificate chain (instead of a location)"),
        Setting("ssl.keystore.key", "", str, "PEM private key (instead of a location)"),
        Setting("ssl.key.password", "", str, "password of an encrypted private key"),
        Setting("ssl.truststore.type", "PEM", str, "only PEM is supported"),
        Setting("ssl.truststore.location", "", str, "PEM file of CA certificates to verify clients with"),
        Setting("ssl.truststore.certificates", "", str, "PEM CA certificates (instead of a location)"),
        Setting("ssl.client.auth", "none", _choice("none", "requested", "required"), "ask clients for a certificate"),
        # Kafka's default (-1) is unbounded; a bound is the point of issue 10, so raygroups sets one.
        Setting("queued.max.request.bytes", 256 * 1024 * 1024, int,
                "request bytes (partial and queued) a gateway holds across connections before it stops reading; -1: no bound"),
        Setting("max.connections.per.ip", 2_147_483_647, _non_negative, "connections a gateway accepts from one address"),
        Setting("max.connections", 2_147_483_647, _non_negative, "connections a gateway accepts in all"),
        Setting("raygroups.operator.host", "127.0.0.1", str,
                "where the operator listener (raygroups' kill/move/status API) binds; not a Kafka setting"),
        Setting("raygroups.operator.port", 0, _non_negative,
                "operator listener port (gateway i on port+i); 0 picks a free one, found by the CLI through the gateway"),
        Setting("raygroups.metrics.port", -1, int,
                "port of the Prometheus endpoint http://HOST:PORT/metrics on the driver's node; -1: none, 0: a free port"),
        Setting("raygroups.dashboard", False, _bool, "start Ray's dashboard with an embedded Ray (needs the [dashboard] extra)"),
        Setting("raygroups.scram.credentials.file", "", str,
                "the SCRAM credential store; empty: scram-credentials.json in the data directory"),
    ]
}


@dataclass(frozen=True)
class Config:
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        return SETTINGS[name].default

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Config":
        return Config({**self.values, **overrides})

    def explicit(self) -> dict[str, Any]:
        return dict(self.values)

    @staticmethod
    def load(pairs: Iterable[str] = (), config_file: Path | None = None) -> "Config":
        raw: dict[str, str] = {}
        if config_file is not None:
            raw.update(read_properties(config_file))
        for pair in pairs:
            name, sep, value = pair.partition("=")
            if not sep:
                raise ConfigError(f"--config expects name=value, got {pair!r}")
            raw[name.strip()] = value.strip()
        return Config(parse_values(raw))


def parse_values(raw: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, text in raw.items():
        setting = SETTINGS.get(name)
        if setting is None:
            raise ConfigError(f"unknown configuration {name!r} (see `raygroups up --help` and PROTOCOL.md §2)")
        try:
            values[name] = setting.parse(text)
        except ValueError as exc:
            raise ConfigError(f"bad value for {name}: {exc}") from None
    return values


def read_properties(path: Path) -> dict[str, str]:
    """Java properties as Kafka's server.properties uses them: key=value or key: value, # or ! comments."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in stripped:
                name, _, value = stripped.partition(sep)
                out[name.strip()] = value.strip()
                break
        else:
            raise ConfigError(f"{path}:{lineno}: expected name=value")
    return out
