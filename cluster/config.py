"""Cluster configuration: Kafka's own names and defaults, plus raygroups.* (PROTOCOL.md §2).

Given as `--config name=value` (repeatable) or a `server.properties`-style file
(`--config-file F`); the command line wins over the file. An unknown name or a value that does
not parse is a usage error (exit 2) with one clear line, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.config_values import Bool, Choice, GatewayCount, Int, Text, port
from cluster.properties import PropertiesError, read_properties_text
from sharestate.offset_reset import OffsetReset


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    kind: Any  # a kind from cluster/config_values.py: convert(text), check(value), range_text
    doc: str

    def convert(self, text: str) -> Any:
        """The value text stands for, its type checked but not its range."""
        return self.kind.convert(text)

    def parse(self, text: str) -> Any:
        """The value text stands for, held to the setting's range (Kafka's, where Kafka has it)."""
        value = self.kind.convert(text)
        self.kind.check(value)
        return value

    @property
    def range(self) -> str:
        return self.kind.range_text


def _assignor_names(text: str) -> tuple[str, ...]:
    """group.consumer.assignors: a comma-separated list of known assignors, Kafka's short names or
    class names (org.apache.kafka.coordinator.group.assignor.UniformAssignor)."""
    from coordinator.consumer.assignors import ASSIGNORS

    classes = {"UniformAssignor": "uniform", "RangeAssignor": "range"}
    names = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name = classes.get(part.rsplit(".", 1)[-1], part)
        if name not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {part!r} (known: {', '.join(ASSIGNORS)})")
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("at least one assignor is needed")
    return tuple(names)


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        # classic groups (seed 000/002/004)
        Setting("group.initial.rebalance.delay.ms", 3000, Int(0), "InitialDelayedJoin delay for an Empty group"),
        Setting("group.min.session.timeout.ms", 6000, Int(1), "lowest session timeout a member may ask for"),
        Setting("group.max.session.timeout.ms", 1_800_000, Int(1), "highest session timeout a member may ask for"),
        Setting("group.max.size", 2_147_483_647, Int(1), "members per classic group"),
        Setting("offsets.topic.num.partitions", 50, Int(1), "partitions of __consumer_offsets"),
        Setting("offsets.retention.minutes", 10080, Int(1),
                "retention of offsets: an Empty group's (from when it became Empty), a simple group's and a Stable "
                "consumer group's of topics it no longer subscribes to (from their commit, KIP-496)"),
        Setting("offsets.retention.check.interval.ms", 600_000, Int(1, long=True), "how often expired offsets are removed"),
        Setting("offset.metadata.max.bytes", 4096, Int(0), "largest commit metadata string"),
        # share groups (seed 001)
        Setting("share.coordinator.state.topic.num.partitions", 50, Int(1), "partitions of __share_group_state"),
        Setting("group.share.record.lock.duration.ms", 30_000, Int(1000, 3_600_000), "acquisition lock duration, within the min and max below"),
        Setting("group.share.delivery.count.limit", 5, Int(2, 10), "deliveries before a record is archived"),
        # The bounds of a group's own share.record.lock.duration.ms and share.delivery.count.limit
        # (IncrementalAlterConfigs, cluster/group_configs.py). Kafka also holds the broker-wide values
        # above within them; raygroups does not, so a test may use a short lock (say 5 s) cluster-wide.
        Setting("group.share.min.record.lock.duration.ms", 15_000, Int(1000, 3_600_000),
                "lowest share.record.lock.duration.ms a group may set"),
        Setting("group.share.max.record.lock.duration.ms", 60_000, Int(1000, 3_600_000),
                "highest share.record.lock.duration.ms a group may set"),
        Setting("group.share.min.delivery.count.limit", 2, Int(2, 10), "lowest share.delivery.count.limit a group may set"),
        Setting("group.share.max.delivery.count.limit", 10, Int(2, 10), "highest share.delivery.count.limit a group may set"),
        Setting("group.share.partition.max.record.locks", 2000, Int(100, 10_000), "in-flight records per share partition"),
        Setting("group.share.max.size", 200, Int(1, 1000), "members per share group"),
        Setting("group.share.heartbeat.interval.ms", 5000, Int(1),
                "heartbeat interval given to share members (a group's share.heartbeat.interval.ms overrides it)"),
        Setting("group.share.session.timeout.ms", 45_000, Int(1),
                "share member session timeout (a group's share.session.timeout.ms overrides it)"),
        # The bounds of a group's own share.session.timeout.ms and share.heartbeat.interval.ms (Kafka's
        # defaults). The broker-wide values above may lie outside them (tests use short sessions):
        # the bounds then take them in (cluster/group_configs.py).
        Setting("group.share.min.session.timeout.ms", 45_000, Int(1), "lowest share.session.timeout.ms a group may set"),
        Setting("group.share.max.session.timeout.ms", 60_000, Int(1), "highest share.session.timeout.ms a group may set"),
        Setting("group.share.min.heartbeat.interval.ms", 5000, Int(1), "lowest share.heartbeat.interval.ms a group may set"),
        Setting("group.share.max.heartbeat.interval.ms", 15_000, Int(1), "highest share.heartbeat.interval.ms a group may set"),
        Setting("group.share.max.share.sessions", 2000, Int(1), "share sessions per gateway"),
        Setting("group.share.initialize.retry.interval.ms", 30_000, Int(1), "share-state initialization retry"),
        Setting("share.coordinator.snapshot.update.records.per.snapshot", 500, Int(0), "ShareUpdates between ShareSnapshots"),
        # Kafka sets this per group (a dynamic group config); here it is the cluster-wide default.
        Setting("share.auto.offset.reset", OffsetReset("latest"), Text(OffsetReset.parse, "latest, earliest, by_duration:<ISO-8601>"),
                "where a share group starts on a partition: latest, earliest or by_duration:<ISO-8601>"),
        # consumer groups (KIP-848), Kafka 4.2's names, defaults and bounds
        Setting("group.consumer.heartbeat.interval.ms", 5000, Int(1),
                "heartbeat interval given to consumer-protocol members (a group's consumer.heartbeat.interval.ms overrides it)"),
        Setting("group.consumer.session.timeout.ms", 45_000, Int(1),
                "consumer-protocol member session timeout (a group's consumer.session.timeout.ms overrides it)"),
        Setting("group.consumer.min.session.timeout.ms", 45_000, Int(1), "lowest consumer.session.timeout.ms a group may set"),
        Setting("group.consumer.max.session.timeout.ms", 60_000, Int(1), "highest consumer.session.timeout.ms a group may set"),
        Setting("group.consumer.min.heartbeat.interval.ms", 5000, Int(1), "lowest consumer.heartbeat.interval.ms a group may set"),
        Setting("group.consumer.max.heartbeat.interval.ms", 15_000, Int(1), "highest consumer.heartbeat.interval.ms a group may set"),
        Setting("group.consumer.max.size", 2_147_483_647, Int(1), "members per consumer group"),
        Setting("group.consumer.assignors", ("uniform", "range"), Text(_assignor_names, "uniform, range (a list; the first is the default)"),
                "server-side assignors consumer-protocol members may name; the first is the default"),
        Setting("group.consumer.regex.refresh.interval.ms", 600_000, Int(10_000),
                "longest time between two resolutions of a consumer group's subscription regexes"),
        Setting("group.consumer.migration.policy", "bidirectional", Choice(("disabled", "downgrade", "upgrade", "bidirectional")),
                "whether a classic group upgrades to a consumer group when a consumer-protocol member joins, and back"),
        # brokers and topics
        Setting("socket.request.max.bytes", 104_857_600, Int(1), "largest request frame a gateway reads"),
        Setting("num.partitions", 1, Int(1), "partitions of an auto-created topic"),
        Setting("auto.create.topics.enable", True, Bool(), "create unknown topics on Metadata requests"),
        Setting("message.max.bytes", 1_048_588, Int(0), "largest record batch a producer may send"),
        Setting("delete.topic.enable", True, Bool(), "allow DeleteTopics"),
        # replication (issue 25): where nodes keep logs in data directories of their own. A factor
        # is at most the number of such directories: 3 gives 3 where there are three, 1 on one node.
        Setting("offsets.topic.replication.factor", 3, Int(1),
                "replicas of each __consumer_offsets partition, at most one per data directory whose "
                "node runs a group coordinator; 1 keeps them in one copy in the controller's directory"),
        Setting("share.coordinator.state.topic.replication.factor", 3, Int(1),
                "replicas of each __share_group_state partition, at most one per data directory whose "
                "node runs a share coordinator; 1 keeps them in one copy in the controller's directory"),
        Setting("default.replication.factor", 3, Int(1),
                "replicas of a topic created with replication factor -1 (auto-created ones too), "
                "at most one per data directory"),
        Setting("min.insync.replicas", 2, Int(1),
                "in-sync replicas an acks=all write needs (at most the partition's replicas); below "
                "it the high watermark stops"),
        Setting("replica.lag.time.max.ms", 30_000, Int(0, long=True),
                "a follower that has not caught up to the leader's log end for this long leaves the ISR"),
        Setting("replica.fetch.wait.max.ms", 500, Int(0), "longest a follower's fetch waits at its leader"),
        Setting("replica.fetch.max.bytes", 1_048_576, Int(0), "bytes a follower fetches per partition per call"),
        Setting("replica.fetch.backoff.ms", 1_000, Int(0), "a follower's wait after a failed fetch"),
        Setting("broker.session.timeout.ms", 9_000, Int(1),
                "a replica host that has not answered the controller's pings for this long is fenced: its "
                "replicas count as gone (a paused or stalled process) until it answers again"),
        Setting("broker.heartbeat.interval.ms", 2_000, Int(1), "how often the controller pings each replica host"),
        Setting("offsets.commit.timeout.ms", 5_000, Int(1),
                "how long a group coordinator's write (offsets, group state) may wait to be committed by "
                "the in-sync replicas before its request is answered COORDINATOR_NOT_AVAILABLE"),
        Setting("share.coordinator.write.timeout.ms", 5_000, Int(1),
                "how long a share coordinator's write of share-group state may wait to be committed by "
                "the in-sync replicas before it fails"),
        Setting("auto.leader.rebalance.enable", True, Bool(),
                "give replicated partitions back to their preferred (first) replica once it is in sync again"),
        Setting("leader.imbalance.check.interval.seconds", 300, Int(1, long=True),
                "how often the preferred leaders are elected again"),
        Setting("raygroups.replica.replace.after.ms", 600_000, Int(-1, long=True, note="-1: never"),
                "a data directory no live actor has kept for this long is taken as gone for good: its "
                "partitions' copies are moved to live directories by reassignment"),
        Setting("raygroups.replica.balance.max.moves", 4, Int(0),
                "replicated partitions reassigned at a time to even out the replicas per data directory "
                "(a node that joins gets copies and its share of leaders); 0: never"),
        # raygroups' own
        Setting("raygroups.log.flush", "batch", Choice(("batch", "none")),
                "batch: fsync once per append batch; none: page cache only (survives a process kill, not a power loss)"),
        Setting("raygroups.log.sync", "filesystem", Choice(("filesystem", "file")),
                "with flush=batch, how a partition leader's or a coordinator's appends reach the disk: filesystem: one "
                "syncfs(2) for all its partitions on a file system (Linux 5.8+, else per file); file: one fsync per partition log "
                "(better when other programs write heavily to the same disk: syncfs writes theirs back too)"),
        Setting("raygroups.log.segment.bytes", 64 * 1024 * 1024, Int(1), "segment size of user-topic logs"),
        Setting("raygroups.coordinator.log.segment.bytes", 4 * 1024 * 1024, Int(1), "segment size of internal logs"),
        Setting("raygroups.coordinator.compaction.records", 20_000, Int(1), "records appended between compactions"),
        Setting("raygroups.log.tombstone.retention.ms", 86_400_000, Int(0, long=True), "how long compaction keeps tombstones"),
        Setting("raygroups.coordinators", 2, Int(1), "group coordinator actors"),
        Setting("raygroups.share.coordinators", 2, Int(1), "share coordinator actors"),
        Setting("raygroups.partition.leaders", 2, Int(1), "partition leader actors"),
        Setting("raygroups.gateways", "auto", GatewayCount(),
                "gateways (Kafka brokers as clients see them): a count, per-node (one on each Ray node), or "
                "auto (per-node when the Ray cluster has more than one node, else 1)"),
        # How the controller spreads partitions over Ray nodes (cluster/control/placement.py, docs/scale-out.md).
        Setting("raygroups.balance.max.moves", 8, Int(1),
                "partitions the controller moves at once to balance a node that joined; the rest wait for the next pass"),
        Setting("raygroups.balance.cooldown.ms", 30_000, Int(0),
                "how long a partition that moved stays where it is before a balance pass may move it again"),
        Setting("raygroups.node.poll.ms", 2000, Int(100), "how often the controller lists the Ray cluster's nodes"),
        Setting("raygroups.actor.replace", True, Bool(), "start a replacement when an actor dies"),
        Setting("raygroups.actor.start.timeout.ms", 120_000, Int(1),
                "how long an actor may take to answer after it is started; one that does not is killed and "
                "started again (Ray may never place it: its node went away, or no resources are free)"),
        Setting("raygroups.coordinator.defer.after.ms", 100, Int(-1, note="-1: never"),
                "how long a group coordinator's batch waits for an operation before answering it apart (Deferred): "
                "one waiting for a commit the replicas have not made does not hold the others"),
        Setting("raygroups.load.timeout.ms", 120_000, Int(1),
                "how long the controller waits for an actor to load partitions before it retries the load"),
        Setting("raygroups.cluster.id", "raygroups", Text(), "cluster id shown in Metadata and DescribeCluster"),
        # Kafka has no such broker settings: its controller only bounds the records of one operation
        # (MAX_RECORDS_PER_USER_OP, 10,000) and answers POLICY_VIOLATION beyond; hence raygroups.*.
        Setting("raygroups.max.partitions.per.topic", 10_000, Int(1),
                "partitions one topic may have; CreateTopics/CreatePartitions beyond answer POLICY_VIOLATION "
                "(not a Kafka setting)"),
        Setting("raygroups.max.partitions", 20_000, Int(1),
                "partitions the whole cluster may have, internal topics included; beyond: POLICY_VIOLATION "
                "(not a Kafka setting)"),
        # security and connection limits (issue 10); parsed and checked by cluster/gateway/auth/
        Setting("listeners", "", Text(),
                "the client listener, NAME://host:port (one per gateway; gateway i on port+i); empty: "
                "PLAINTEXT on --host/--port"),
        Setting("advertised.listeners", "", Text(),
                "the address clients are given for the client listener, NAME://host:port (gateway i on port+i; "
                "port 0: the port bound); empty: the listener's host, or the node's IP when it binds every interface"),
        Setting("listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", Text(),
                "listener name to security protocol"),
        # Kafka's default is GSSAPI, which raygroups does not speak.
        Setting("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", Text(),
                "SASL mechanisms a SASL listener offers"),
        Setting("super.users", "", Text(), "principals allowed everything, e.g. User:admin;User:ops"),
        Setting("ssl.keystore.type", "PEM", Text(), "only PEM is supported"),
        Setting("ssl.keystore.location", "", Text(), "PEM file with the certificate chain and the private key"),
        Setting("ssl.keystore.certificate.chain", "", Text(), "PEM certificate chain (instead of a location)"),
        Setting("ssl.keystore.key", "", Text(), "PEM private key (instead of a location)"),
        Setting("ssl.key.password", "", Text(), "password of an encrypted private key"),
        Setting("ssl.truststore.type", "PEM", Text(), "only PEM is supported"),
        Setting("ssl.truststore.location", "", Text(), "PEM file of CA certificates to verify clients with"),
        Setting("ssl.truststore.certificates", "", Text(), "PEM CA certificates (instead of a location)"),
        Setting("ssl.client.auth", "none", Choice(("none", "requested", "required")), "ask clients for a certificate"),
        # Kafka's default (-1) is unbounded; a bound is the point of issue 10, so raygroups sets one. Unlike
        # Kafka's pool, bytes count as they arrive, never a size a prefix only announced (issue 21).
        Setting("queued.max.request.bytes", 256 * 1024 * 1024, Int(-1, long=True, note="-1 or 0: no bound"),
                "request bytes (of partial frames and requests not answered yet) a gateway holds across connections; "
                "past it, a connection holding more than one request of about 1 MiB stops reading until memory "
                "comes back; -1 or 0: no bound"),
        Setting("connections.max.idle.ms", 600_000, Int(-1, long=True, note="-1: never"),
                "close a connection that sent and was sent nothing for this long, a frame left half sent "
                "included (a connection owed an answer is not idle); -1: never"),
        Setting("sasl.server.max.receive.size", 524_288, Int(1),
                "largest frame a SASL listener reads before a connection has authenticated; a larger one fails "
                "authentication and closes the connection"),
        Setting("connection.failed.authentication.delay.ms", 100, Int(0),
                "how long a failed authentication's answer and close are delayed"),
        Setting("max.connections.per.ip", 2_147_483_647, Int(0), "connections a gateway accepts from one address"),
        Setting("max.connections", 2_147_483_647, Int(0), "connections a gateway accepts in all"),
        Setting("raygroups.operator.host", "127.0.0.1", Text(),
                "where the operator listener (raygroups' kill/move/status API) binds; not a Kafka setting"),
        Setting("raygroups.operator.port", 0, port(),
                "operator listener port (gateway i on port+i); 0 picks a free one, found by the CLI through the gateway"),
        Setting("raygroups.metrics.port", -1, port(-1, "-1: none, 0: a free port"),
                "port of the Prometheus endpoint http://HOST:PORT/metrics on the driver's node; -1: none, 0: a free port"),
        Setting("raygroups.dashboard", False, Bool(), "start Ray's dashboard with an embedded Ray (needs the [dashboard] extra)"),
        Setting("raygroups.scram.credentials.file", "", Text(),
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
    def load(pairs: Iterable[str] = (), config_file: Path | None = None, *, check_ranges: bool = False) -> "Config":
        """Settings from a properties file and name=value pairs (these win). Types are always
        checked; ranges when check_ranges: the CLI holds what a user gives to Kafka's ranges,
        while programs (tests, simulations of deliberately tiny worlds) may go below them."""
        raw: dict[str, str] = {}
        if config_file is not None:
            raw.update(read_properties(config_file))
        raw.update(parse_pairs(pairs))
        return Config(parse_values(raw, check_ranges=check_ranges))


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    raw: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--config expects name=value, got {pair!r}")
        raw[name.strip()] = value.strip()
    return raw


def parse_values(raw: Mapping[str, str], check_ranges: bool = True) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, text in raw.items():
        setting = SETTINGS.get(name)
        if setting is None:
            raise ConfigError(f"unknown configuration {name!r} (`raygroups config` lists every setting)")
        try:
            values[name] = setting.parse(text) if check_ranges else setting.convert(text)
        except ValueError as exc:
            raise ConfigError(f"bad value for {name}: {exc}") from None
    return values


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file (Kafka's server.properties), as name -> value text."""
    try:
        text = path.read_text(encoding="latin-1" if _not_utf8(path) else "utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        return read_properties_text(text)
    except PropertiesError as exc:
        raise ConfigError(f"{path}:{exc.line}: {exc.reason}") from None


def _not_utf8(path: Path) -> bool:
    # Java 9+ reads properties files as UTF-8 and falls back to ISO-8859-1 when they are not.
    try:
        path.read_bytes().decode("utf-8")
    except (UnicodeDecodeError, OSError):
        return True
    return False
