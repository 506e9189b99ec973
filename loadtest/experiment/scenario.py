"""A scenario: what an experiment runs (topics, groups, share groups, producers, faults, checks).

Written in TOML (examples/demo.toml is the documented example). Parsing is strict: an unknown
key, a wrong type or a fault that cannot happen (a group that does not exist, a partition past
the topic's count, a node kill on a one-node cluster) is refused before anything starts, with
one line naming the field, as `ScenarioError`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from collections.abc import Callable
from typing import Literal

import msgspec

from loadtest.experiment.fault_kinds import KINDS, FaultKind

Assignor = Literal["range", "roundrobin", "cooperative-sticky"]
Protocol = Literal["classic", "consumer"]  # Kafka's group.protocol
ServerAssignor = Literal["uniform", "range"]  # group.consumer.assignors
Action = Literal["kill", "pause", "move", "restart-cluster", "kill-node"]
ActorKindName = Literal["group-coordinator", "share-coordinator", "partition-leader", "gateway"]
SettingValue = str | int | float | bool


class ScenarioError(ValueError):
    """A scenario that cannot run; the message names the field."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


Storage = Literal["per-node", "shared"]


class ClusterSpec(_Strict):
    gateways: int = 2
    # One gateway on each Ray node instead (raygroups.gateways=per-node), as a deployment whose
    # clients reach every node: FindCoordinator and Metadata then name the gateway on the node of
    # the coordinator or leader, and requests stay on that node. `gateways` is then not used.
    gateways_per_node: bool = False
    nodes: int = 1
    # With several nodes: a data directory on each node (as machines' own disks: user topics
    # replicated across them, issue 25) or one every node shares (as NFS: one copy of everything).
    storage: Storage = "per-node"
    coordinators: int = 2
    share_coordinators: int = 2
    partition_leaders: int = 3
    # Kafka's configuration names, as `raygroups up --config name=value`.
    config: dict[str, SettingValue] = {}

    @property
    def gateway_count(self) -> int:
        """How many gateways the cluster runs once every node is up (gateway i on port + i)."""
        return self.nodes if self.gateways_per_node else self.gateways


class TopicSpec(_Strict):
    name: str
    partitions: int = 6


class GroupSpec(_Strict):
    """Consumer groups: `count` groups named `name-0..` (or `name` when count is 1), of the classic
    protocol (JoinGroup/SyncGroup, the leader assigns) or of KIP-848's consumer protocol
    (ConsumerGroupHeartbeat, the coordinator assigns), as Kafka's group.protocol says."""

    name: str
    topics: list[str]  # what the group reads (a regex subscription must match exactly these)
    count: int = 1
    members: int = 3
    protocol: Protocol = "classic"
    assignor: Assignor = "range"  # classic: the leader's assignor
    server_assignor: ServerAssignor | None = None  # consumer: the coordinator's (None: the group's default)
    topic_regex: str | None = None  # consumer: subscribe by this RE2 regular expression instead of by names
    # Classic only: a consumer group's are the coordinator's (group.consumer.session.timeout.ms and
    # group.consumer.heartbeat.interval.ms in [cluster.config]).
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 30_000
    commit_interval_ms: int = 5_000  # Kafka's auto.commit.interval.ms
    processing_ms: float = 0.0  # per fetched batch, before the next fetch
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    # Every churn_every_s one member of each group leaves and a fresh one joins (0: no churn).
    churn_every_s: float = 0.0


class ShareGroupSpec(_Strict):
    name: str
    topics: list[str]
    count: int = 1
    members: int = 3
    accept: float = 1.0  # weights of the acknowledgement mix
    release: float = 0.0
    reject: float = 0.0
    processing_ms: float = 0.0  # per fetched batch, before acknowledging
    max_records: int = 500
    max_wait_ms: int = 500
    piggyback: bool = True  # acknowledge on the next ShareFetch, else with ShareAcknowledge


class ProducerSpec(_Strict):
    name: str
    topic: str
    count: int = 1
    rate: float = 100.0  # records/s, each producer
    value_bytes: int = 100
    linger_ms: int = 20


class SharePartitionTarget(_Strict):
    group: str
    topic: str
    partition: int


class PartitionTarget(_Strict):
    topic: str
    partition: int


class FaultSpec(_Strict):
    at_s: float
    action: Action
    # What the fault hits (exactly one for kill, pause and move):
    coordinator_of: str | None = None  # a group: the group coordinator leading its partition
    share_coordinator_of: SharePartitionTarget | None = None
    leader_of: PartitionTarget | None = None
    gateway: int | None = None
    actor: str | None = None  # an actor by name, as `raygroups actors` lists it
    random: bool | list[ActorKindName] = False  # a random actor (of these kinds)
    duration_s: float | None = None  # pause
    to: str | None = None  # move: the new leader (default: another live actor of the kind)
    down_s: float = 1.0  # restart-cluster: seconds between the kill and the restart
    node: int | None = None  # kill-node: index of a non-head node

    def selectors(self) -> list[str]:
        """The selector fields that are set (gateway 0 is set: compare with `is`, not `in`)."""
        return [name for name in _SELECTORS if _is_set(getattr(self, name))]

    def selector(self) -> str | None:
        chosen = self.selectors()
        return chosen[0] if chosen else None


_SELECTORS = ("coordinator_of", "share_coordinator_of", "leader_of", "gateway", "actor", "random")
_PARTITION_SELECTORS = ("coordinator_of", "share_coordinator_of", "leader_of")


def _is_set(value: object) -> bool:
    return not (value is None or value is False or value == [])


class Checks(_Strict):
    stable_within_s: float = 30.0  # every group Stable again this long after each fault
    drain_timeout_s: float = 60.0  # after the load, how long groups may take to read to the end


class Scenario(_Strict):
    name: str
    duration_s: float
    seed: int = 1
    ramp_s: float = 5.0  # members and producers start spread over this long
    cluster: ClusterSpec = msgspec.field(default_factory=ClusterSpec)
    topics: list[TopicSpec] = []
    groups: list[GroupSpec] = []
    share_groups: list[ShareGroupSpec] = []
    producers: list[ProducerSpec] = []
    faults: list[FaultSpec] = []
    checks: Checks = msgspec.field(default_factory=Checks)

    # -- derived ----------------------------------------------------------------------------------

    def classic_groups(self) -> dict[str, GroupSpec]:
        return {name: spec for spec in self.groups if spec.protocol == "classic"
                for name in expand(spec.name, spec.count)}

    def consumer_groups(self) -> dict[str, GroupSpec]:
        """The groups of KIP-848's consumer protocol."""
        return {name: spec for spec in self.groups if spec.protocol == "consumer"
                for name in expand(spec.name, spec.count)}

    def all_groups(self) -> dict[str, GroupSpec | ShareGroupSpec]:
        return {**self.classic_groups(), **self.consumer_groups(), **self.share_group_specs()}

    def share_group_specs(self) -> dict[str, ShareGroupSpec]:
        return {name: spec for spec in self.share_groups for name in expand(spec.name, spec.count)}

    def partitions(self) -> dict[str, int]:
        return {t.name: t.partitions for t in self.topics}

    def to_dict(self) -> dict:
        return msgspec.to_builtins(self)


def expand(name: str, count: int) -> list[str]:
    return [name] if count == 1 else [f"{name}-{i}" for i in range(count)]


def load_scenario(path: Path, external_cluster: bool = False) -> Scenario:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_scenario(raw, str(path), external_cluster)


def parse_scenario(raw: bytes | str, source: str = "scenario", external_cluster: bool = False) -> Scenario:
    text = raw.decode() if isinstance(raw, bytes) else raw
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: not valid TOML: {exc}") from None
    try:
        scenario = msgspec.convert(data, type=Scenario)
    except msgspec.ValidationError as exc:
        raise ScenarioError(f"{source}: {_field_message(str(exc))}") from None
    problem = validate(scenario, external_cluster)
    if problem:
        raise ScenarioError(f"{source}: {problem}")
    return scenario


def _field_message(text: str) -> str:
    """msgspec's 'Expected `int`, got `str` - at `$.groups[0].members`' as 'groups[0].members: ...'."""
    message, sep, where = text.rpartition(" - at `")
    if not sep:
        return text
    path = where.rstrip("`").removeprefix("$").lstrip(".") or "(top level)"
    message = message.replace("Object contains unknown field", "unknown key")
    return f"{path}: {message[0].lower()}{message[1:]}"


def validate(s: Scenario, external_cluster: bool = False) -> str | None:
    """The first reason the scenario cannot run, naming its field; None when it can."""
    if s.duration_s <= 0:
        return "duration_s: must be above 0"
    if s.ramp_s < 0 or s.ramp_s >= s.duration_s:
        return "ramp_s: must be at least 0 and below duration_s"
    c = s.cluster
    for name in ("gateways", "nodes", "coordinators", "share_coordinators", "partition_leaders"):
        if getattr(c, name) < 1:
            return f"cluster.{name}: must be at least 1"
    topics = s.partitions()
    for i, t in enumerate(s.topics):
        if t.partitions < 1:
            return f"topics[{i}].partitions: must be at least 1"
        if t.name.startswith("__"):
            return f"topics[{i}].name: {t.name!r} is an internal topic name"
    if len(topics) != len(s.topics):
        return "topics: a topic is listed twice"
    seen: set[str] = set()
    for section, specs in (("groups", s.groups), ("share_groups", s.share_groups)):
        for i, g in enumerate(specs):
            where = f"{section}[{i}]"
            if g.count < 1 or g.members < 1:
                return f"{where}: count and members must be at least 1"
            if not g.topics:
                return f"{where}.topics: a group needs at least one topic"
            for topic in g.topics:
                if topic not in topics:
                    return f"{where}.topics: no topic named {topic!r} in topics"
            for name in expand(g.name, g.count):
                if name in seen:
                    return f"{where}.name: group {name!r} is defined twice"
                seen.add(name)
    for i, g in enumerate(s.groups):
        if g.heartbeat_interval_ms <= 0 or g.session_timeout_ms <= g.heartbeat_interval_ms:
            return f"groups[{i}]: heartbeat_interval_ms must be above 0 and below session_timeout_ms"
        problem = _validate_protocol(g, topics)
        if problem:
            return f"groups[{i}].{problem}"
    for i, g in enumerate(s.share_groups):
        if min(g.accept, g.release, g.reject) < 0 or g.accept + g.release + g.reject <= 0:
            return f"share_groups[{i}]: accept, release and reject are weights: at least 0, not all 0"
    for i, p in enumerate(s.producers):
        if p.topic not in topics:
            return f"producers[{i}].topic: no topic named {p.topic!r} in topics"
        if p.count < 1 or p.rate <= 0:
            return f"producers[{i}]: count must be at least 1 and rate above 0"
    for i, f in enumerate(s.faults):
        problem = _validate_fault(s, f, external_cluster)
        if problem:
            return f"faults[{i}].{problem}"
    if s.checks.stable_within_s <= 0 or s.checks.drain_timeout_s <= 0:
        return "checks: stable_within_s and drain_timeout_s must be above 0"
    return None


def _validate_fault(s: Scenario, f: FaultSpec, external_cluster: bool) -> str | None:
    if not 0 <= f.at_s < s.duration_s:
        return f"at_s: {f.at_s} is outside the run (0..duration_s={s.duration_s})"
    selector = f.selector()
    chosen = f.selectors()
    kind = KINDS[f.action]
    if kind.target in ("actor", "partition"):
        if len(chosen) != 1:
            return (f"action: {f.action} needs exactly one of "
                    f"{', '.join(_SELECTORS)}; got {', '.join(chosen) or 'none'}")
    elif chosen:
        return f"{chosen[0]}: {f.action} takes no target"
    if kind.lasts and (f.duration_s is None or f.duration_s <= 0):
        return f"duration_s: a {f.action} needs a duration above 0"
    if not kind.lasts and f.duration_s is not None:
        return f"duration_s: only {_actions(lambda k: k.lasts)} has a duration"
    if kind.target == "partition" and selector not in _PARTITION_SELECTORS:
        return f"{selector}: {f.action} needs a partition: coordinator_of, share_coordinator_of or leader_of"
    if f.to is not None and kind.target != "partition":
        return f"to: only {_actions(lambda k: k.target == 'partition')} has a destination"
    if kind.own_cluster and external_cluster:
        what = "Ray nodes" if kind.target == "node" else "cluster"
        return f"action: {f.action} needs the {what} the experiment starts itself (no --bootstrap)"
    if kind.target == "cluster" and f.down_s < 0:
        return "down_s: must be at least 0"
    if kind.target == "node":
        if s.cluster.nodes < 2:
            return f"action: {f.action} needs a cluster of several Ray nodes (cluster.nodes >= 2)"
        if f.node is None or not 1 <= f.node < s.cluster.nodes:
            return f"node: a non-head node index 1..{s.cluster.nodes - 1} (node 0 is the head)"
    elif f.node is not None:
        return f"node: only {_actions(lambda k: k.target == 'node')} takes a node"
    groups = s.all_groups()
    if f.coordinator_of is not None and f.coordinator_of not in groups:
        return f"coordinator_of: no group named {f.coordinator_of!r} ({_names(groups)})"
    if f.share_coordinator_of is not None:
        t = f.share_coordinator_of
        shares = s.share_group_specs()
        if t.group not in shares:
            return f"share_coordinator_of.group: no share group named {t.group!r} ({_names(shares)})"
        if t.topic not in shares[t.group].topics:
            return f"share_coordinator_of.topic: share group {t.group!r} does not consume {t.topic!r}"
        if not 0 <= t.partition < s.partitions()[t.topic]:
            return f"share_coordinator_of.partition: {t.topic!r} has partitions 0..{s.partitions()[t.topic] - 1}"
    if f.leader_of is not None:
        t = f.leader_of
        if t.topic not in s.partitions():
            return f"leader_of.topic: no topic named {t.topic!r} in topics"
        if not 0 <= t.partition < s.partitions()[t.topic]:
            return f"leader_of.partition: {t.topic!r} has partitions 0..{s.partitions()[t.topic] - 1}"
    if f.gateway is not None and not 0 <= f.gateway < s.cluster.gateway_count:
        return f"gateway: the cluster has gateways 0..{s.cluster.gateway_count - 1}"
    return None


def _validate_protocol(g: GroupSpec, topics: dict[str, int]) -> str | None:
    """What only one of the two protocols has, set on a group of the other."""
    defaults = GroupSpec(name=g.name, topics=g.topics)
    if g.protocol == "classic":
        for name in ("server_assignor", "topic_regex"):
            if getattr(g, name) is not None:
                return f"{name}: only a group of protocol = \"consumer\" has one"
        return None
    if g.assignor != defaults.assignor:
        return "assignor: a classic group's (the leader's); a consumer group's is server_assignor"
    for name, setting in (("session_timeout_ms", "group.consumer.session.timeout.ms"),
                          ("heartbeat_interval_ms", "group.consumer.heartbeat.interval.ms")):
        if getattr(g, name) != getattr(defaults, name):
            return f"{name}: a consumer group's is the coordinator's {setting} (in [cluster.config])"
    if g.topic_regex is not None:
        # Python's re stands in for RE2 here: the two agree on the patterns a scenario names topics with.
        try:
            pattern = re.compile(g.topic_regex)
        except re.error as exc:
            return f"topic_regex: not a regular expression ({exc})"
        matched = sorted(t for t in topics if pattern.fullmatch(t))
        if matched != sorted(g.topics):
            return f"topic_regex: matches {matched} of the scenario's topics, not the group's topics {sorted(g.topics)}"
    return None


def _actions(which: Callable[[FaultKind], bool]) -> str:
    """The actions of the kinds `which` picks, for a message: "a pause", "a move or a kill-node"."""
    return " or ".join(f"a {action}" for action, kind in KINDS.items() if which(kind))


def _names(groups: dict) -> str:
    names = sorted(groups)
    if not names:
        return "the scenario defines none"
    shown = ", ".join(names[:6])
    return f"defined: {shown}{', …' if len(names) > 6 else ''}"
