"""The controller's durable state: topics (ids, partition counts, configs), leader epochs, and
the producer ids handed out.

It runs on the coordinator runtime like any shard, on its own log `__cluster_metadata-0`, so
topics survive restarts and leader epochs only ever grow, across restarts too (a client that
cached an epoch is never told about an older one). Which actor leads a partition is not kept:
actors are new after every start, and the controller spreads partitions afresh.

Producer ids are handed to gateways in blocks, as Kafka's controller hands them to brokers
(`ProducerIdControlManager`, `ProducerIdsRecord`, blocks of `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`
= 1000): the record keeps the first id of the next block, so no id is handed out twice, across
restarts too. Ids of a block whose gateway dies unused are simply never used.

A replicated partition's registration (issue 25: replicas, ISR, leader, leader and partition
epochs, a reassignment under way) is kept as Kafka's controller keeps it, in the metadata log:
`Partition` records carry the full registration after each change (Kafka writes a PartitionRecord
then PartitionChangeRecords; a full image suits a compacted log), made by the changes of
cluster/replication/registration.py and never by hand.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kernel.codec import Record, RecordCodec
from kernel.result import Result
from kernel.snapshot import TouchedKeys

from cluster.replication.placement import assign_replicas, replication_factor_error
from cluster.replication.registration import NO_LEADER, PartitionRegistration

METADATA_TOPIC = "__cluster_metadata"
CONSUMER_OFFSETS = "__consumer_offsets"
SHARE_GROUP_STATE = "__share_group_state"
INTERNAL_TOPICS = (CONSUMER_OFFSETS, SHARE_GROUP_STATE)

_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249


@dataclass(frozen=True, slots=True)
class TopicKey:
    name: str


@dataclass(frozen=True, slots=True)
class TopicValue:
    topic_id: uuid.UUID
    partitions: int
    internal: bool = False
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionEpochKey:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class PartitionEpochValue:
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class PartitionKey:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class PartitionValue:
    """A replicated partition's registration (cluster/replication/registration.py), in full."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaDirectoryKey:
    """A data directory the controller has seen (cluster/log/data_directory.py)."""

    directory_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ReplicaDirectoryValue:
    replica_id: int  # the replica it holds logs as; ids are never reused


@dataclass(frozen=True, slots=True)
class ProducerIdsKey:
    """The single key of the producer id counter: compaction keeps its latest value."""


@dataclass(frozen=True, slots=True)
class ProducerIdsValue:
    assigned_to: str  # who got the block this record hands out (Kafka's brokerId)
    next_producer_id: int  # first id of the next block


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """A group's config overrides (Kafka's ConfigRecord of a GROUP resource; cluster/group_configs.py)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class GroupConfigValue:
    configs: dict[str, str]  # name -> value, as set; a group with none has no record (a tombstone)


CODEC = RecordCodec("cluster-metadata")
CODEC.register(TopicKey, TopicValue, name="Topic")
CODEC.register(PartitionEpochKey, PartitionEpochValue, name="PartitionEpoch")
CODEC.register(ProducerIdsKey, ProducerIdsValue, name="ProducerIds")
CODEC.register(GroupConfigKey, GroupConfigValue, name="GroupConfig")
CODEC.register(PartitionKey, PartitionValue, name="Partition")
CODEC.register(ReplicaDirectoryKey, ReplicaDirectoryValue, name="ReplicaDirectory")

PRODUCER_ID_BLOCK_SIZE = 1000
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids first_producer_id .. first_producer_id + size - 1, for one gateway to hand out."""

    assigned_to: str
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    internal: bool
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicOutcome:
    name: str
    error_code: ErrorCode
    message: str | None = None
    topic_id: uuid.UUID | None = None
    partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class Replication:
    """Where a replicated cluster (issue 25: data directories of their own on several nodes)
    puts new partitions' replicas: on these replica ids (the data directories live actors keep
    logs in), as many as asked, or `default_factor` for -1 (cluster/replication/placement.py).
    A cluster with one data directory (one node, or nodes sharing one) passes none: its partitions
    have one copy and no registration, as before replication."""

    replica_ids: tuple[int, ...]
    default_factor: int

    def factor(self, requested: int) -> int:
        return min(self.default_factor, len(self.replica_ids)) if requested == -1 else requested


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    """How many partitions a topic and the whole cluster may have (raygroups.max.partitions.per.topic,
    raygroups.max.partitions). Without them a client's count, up to 2^31 - 1, became that many
    records and leader placements, and the controller grew until it stopped answering."""

    per_topic: int
    cluster: int

    @classmethod
    def from_config(cls, config: Any) -> "PartitionLimits":
        return cls(config["raygroups.max.partitions.per.topic"], config["raygroups.max.partitions"])


class PartitionBudget:
    """What one request may still add under the limits: each topic it accepts counts for the next."""

    def __init__(self, limits: PartitionLimits, cluster_partitions: int) -> None:
        self.limits = limits
        self.total = cluster_partitions

    def take(self, name: str, count: int, added: int) -> str | None:
        """Why topic `name` may not have `count` partitions (`added` of them new), or None and they count."""
        if count > self.limits.per_topic:
            return (f"topic {name!r} would have {count} partitions; "
                    f"raygroups.max.partitions.per.topic is {self.limits.per_topic}")
        if self.total + added > self.limits.cluster:
            return (f"the cluster would have {self.total + added} partitions; "
                    f"raygroups.max.partitions is {self.limits.cluster}")
        self.total += added
        return None


def validate_topic_name(name: str) -> str | None:
    """Kafka's Topic.validate: what is wrong with the name, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL_NAME.match(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


class ClusterMetadata:
    def __init__(self, tp: Any = None, clock: Any = None) -> None:
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names_by_id: dict[uuid.UUID, str] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}
        self.next_producer_id = 0
        self.group_configs: dict[str, dict[str, str]] = {}
        self.registrations: dict[tuple[str, int], PartitionRegistration] = {}
        self.replica_ids: dict[uuid.UUID, int] = {}  # by data directory id
        self.touched = TouchedKeys()

    # -- replay ------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        key = record.key
        # What the record is about, as it was before the batch changed it (restore puts it back).
        if isinstance(key, TopicKey):
            self.touched.save(("topic", key.name), lambda: self.topics.get(key.name))
        elif isinstance(key, PartitionEpochKey):
            tp = (key.topic, key.partition)
            self.touched.save(("epoch", tp), lambda: self.leader_epochs.get(tp))
        elif isinstance(key, ProducerIdsKey):
            self.touched.save(("producer_ids",), lambda: self.next_producer_id)
        elif isinstance(key, GroupConfigKey):
            self.touched.save(("group_config", key.group_id), lambda: self.group_configs.get(key.group_id))
        elif isinstance(key, PartitionKey):
            tp = (key.topic, key.partition)
            self.touched.save(("registration", tp), lambda: self.registrations.get(tp))
        elif isinstance(key, ReplicaDirectoryKey):
            self.touched.save(("replica_id", key.directory_id), lambda: self.replica_ids.get(key.directory_id))
        if isinstance(key, TopicKey):
            old = self.topics.pop(key.name, None)
            if old is not None:
                self.topic_names_by_id.pop(old.topic_id, None)
            if record.value is not None:
                v: TopicValue = record.value
                self.topics[key.name] = TopicInfo(key.name, v.topic_id, v.partitions, v.internal, dict(v.configs))
                self.topic_names_by_id[v.topic_id] = key.name
        elif isinstance(key, PartitionEpochKey):
            if record.value is None:
                self.leader_epochs.pop((key.topic, key.partition), None)
            else:
                self.leader_epochs[(key.topic, key.partition)] = record.value.leader_epoch
        elif isinstance(key, ProducerIdsKey):
            if record.value is not None:
                self.next_producer_id = record.value.next_producer_id
        elif isinstance(key, GroupConfigKey):
            if record.value is None:
                self.group_configs.pop(key.group_id, None)
            else:
                self.group_configs[key.group_id] = dict(record.value.configs)
        elif isinstance(key, PartitionKey):
            if record.value is None:
                self.registrations.pop((key.topic, key.partition), None)
            else:
                v: PartitionValue = record.value
                self.registrations[(key.topic, key.partition)] = PartitionRegistration(
                    tuple(v.replicas), tuple(v.isr), v.leader, v.leader_epoch, v.partition_epoch,
                    tuple(v.adding), tuple(v.removing),
                )
        elif isinstance(key, ReplicaDirectoryKey):
            if record.value is None:
                self.replica_ids.pop(key.directory_id, None)
            else:
                self.replica_ids[key.directory_id] = record.value.replica_id
        else:
            raise TypeError(f"unexpected record {key!r}")

    def restore(self, saved: dict[Any, Any]) -> None:
        for what, old in saved.items():
            if what[0] == "topic":
                current = self.topics.pop(what[1], None)
                if current is not None:
                    self.topic_names_by_id.pop(current.topic_id, None)
                if old is not None:
                    self.topics[what[1]] = old
                    self.topic_names_by_id[old.topic_id] = what[1]
            elif what[0] == "epoch":
                if old is None:
                    self.leader_epochs.pop(what[1], None)
                else:
                    self.leader_epochs[what[1]] = old
            elif what[0] == "group_config":
                if old is None:
                    self.group_configs.pop(what[1], None)
                else:
                    self.group_configs[what[1]] = old
            elif what[0] == "registration":
                if old is None:
                    self.registrations.pop(what[1], None)
                else:
                    self.registrations[what[1]] = old
            elif what[0] == "replica_id":
                if old is None:
                    self.replica_ids.pop(what[1], None)
                else:
                    self.replica_ids[what[1]] = old
            else:
                self.next_producer_id = old

    def on_loaded(self) -> Result:
        return Result()

    # -- operations (pure: records + response) -------------------------------------------------

    def partition_count(self) -> int:
        return sum(t.partitions for t in self.topics.values())

    def create_topics(
        self,
        specs: list[TopicSpec],
        validate_only: bool = False,
        limits: PartitionLimits | None = None,
        replication: Replication | None = None,
    ) -> Result[list[TopicOutcome]]:
        """New topics, each whole or not at all; in a replicated cluster with its partitions'
        registrations in the same batch (a topic is never seen without its replicas)."""
        records: list[Record] = []
        outcomes: list[TopicOutcome] = []
        seen: set[str] = set()
        placed: dict[tuple[str, int], tuple[int, ...]] = {}
        budget = PartitionBudget(limits, self.partition_count()) if limits is not None else None
        for spec in specs:
            problem = validate_topic_name(spec.name)
            if problem:
                outcomes.append(TopicOutcome(spec.name, ErrorCode.invalid_topic_exception, problem))
                continue
            if spec.name in self.topics or spec.name in seen:
                outcomes.append(
                    TopicOutcome(spec.name, ErrorCode.topic_already_exists, f"topic {spec.name!r} already exists")
                )
                continue
            # Kafka checks the replication factor before the partition count.
            if spec.replication_factor < -1 or spec.replication_factor == 0:
                outcomes.append(
                    TopicOutcome(
                        spec.name,
                        ErrorCode.invalid_replication_factor,
                        "replication factor must be larger than 0, or -1 to use the default value",
                    )
                )
                continue
            if spec.partitions <= 0:
                outcomes.append(
                    TopicOutcome(spec.name, ErrorCode.invalid_partitions, "number of partitions must be positive")
                )
                continue
            problem = replication_factor_error(
                spec.replication_factor, len(replication.replica_ids) if replication is not None else 1
            )
            if problem:
                if replication is None:
                    problem += " (this cluster keeps its logs in one data directory: docs/scale-out.md)"
                outcomes.append(TopicOutcome(spec.name, ErrorCode.invalid_replication_factor, problem))
                continue
            problem = budget.take(spec.name, spec.partitions, spec.partitions) if budget is not None else None
            if problem:
                outcomes.append(TopicOutcome(spec.name, ErrorCode.policy_violation, problem))
                continue
            seen.add(spec.name)
            topic_id = uuid.uuid4()
            factor = replication.factor(spec.replication_factor) if replication is not None else 1
            if not validate_only:
                records.append(
                    Record(TopicKey(spec.name), TopicValue(topic_id, spec.partitions, spec.name in INTERNAL_TOPICS, dict(spec.configs)))
                )
                records += self._epoch_records(spec.name, range(spec.partitions))
                if replication is not None:
                    new = [(spec.name, p) for p in range(spec.partitions)]
                    records += self._assignment_records(new, replication, factor, placed)
            outcomes.append(TopicOutcome(spec.name, ErrorCode.none, None, topic_id, spec.partitions, factor))
        return Result(records=records, response=outcomes)

    def _assignment_records(
        self, new: list[tuple[str, int]], replication: Replication, factor: int, placed: dict[tuple[str, int], tuple[int, ...]]
    ) -> list[Record]:
        """Registrations of `new` partitions, placed counting what is registered and what this
        batch `placed` already (several topics in one request spread as one)."""
        assigned = assign_replicas(new, replication.replica_ids, factor, {**self._assignments(), **placed})
        placed.update(assigned)
        return [_registration_record(t, p, PartitionRegistration.new(r)) for (t, p), r in assigned.items()]

    def _assignments(self) -> dict[tuple[str, int], tuple[int, ...]]:
        return {tp: r.replicas for tp, r in self.registrations.items()}

    def delete_topics(self, names: list[str]) -> Result[list[TopicOutcome]]:
        records: list[Record] = []
        outcomes: list[TopicOutcome] = []
        for name in names:
            info = self.topics.get(name)
            if info is None:
                outcomes.append(TopicOutcome(name, ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}"))
                continue
            if info.internal:
                outcomes.append(
                    TopicOutcome(name, ErrorCode.invalid_topic_exception, f"internal topic {name!r} cannot be deleted")
                )
                continue
            records.append(Record(TopicKey(name), None))
            records += [Record(PartitionEpochKey(name, p), None) for p in range(info.partitions)]
            records += [Record(PartitionKey(name, p), None) for p in range(info.partitions) if (name, p) in self.registrations]
            outcomes.append(TopicOutcome(name, ErrorCode.none, None, info.topic_id, info.partitions))
        return Result(records=records, response=outcomes)

    def create_partitions(
        self,
        name: str,
        total: int,
        validate_only: bool = False,
        limits: PartitionLimits | None = None,
        replication: Replication | None = None,
    ) -> Result[TopicOutcome]:
        """More partitions for a topic; a replicated topic's new ones get as many replicas as its
        first has (Kafka's CreatePartitions without assignments), placed where fewest are."""
        info = self.topics.get(name)
        if info is None:
            return Result.of(TopicOutcome(name, ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}"))
        if info.internal:
            return Result.of(
                TopicOutcome(name, ErrorCode.invalid_topic_exception, f"internal topic {name!r} cannot grow")
            )
        if total <= info.partitions:
            return Result.of(
                TopicOutcome(
                    name,
                    ErrorCode.invalid_partitions,
                    f"topic has {info.partitions} partitions; the new count must be larger, got {total}",
                )
            )
        if limits is not None:
            problem = PartitionBudget(limits, self.partition_count()).take(name, total, total - info.partitions)
            if problem:
                return Result.of(TopicOutcome(name, ErrorCode.policy_violation, problem))
        first = self.registrations.get((name, 0))
        factor = len(first.replicas) if first is not None else 1
        if first is not None:
            problem = replication_factor_error(factor, len(replication.replica_ids) if replication is not None else 0)
            if problem:
                return Result.of(TopicOutcome(name, ErrorCode.invalid_replication_factor, f"the new partitions' {problem}"))
        records: list[Record] = []
        if not validate_only:
            records.append(Record(TopicKey(name), TopicValue(info.topic_id, total, info.internal, info.configs)))
            records += self._epoch_records(name, range(info.partitions, total))
            if first is not None and replication is not None:
                new = [(name, p) for p in range(info.partitions, total)]
                records += self._assignment_records(new, replication, factor, {})
        return Result(records=records, response=TopicOutcome(name, ErrorCode.none, None, info.topic_id, total, factor))

    def bump_epochs(self, partitions: list[tuple[str, int]]) -> Result[dict[tuple[str, int], int]]:
        """A new leader epoch for each partition (leadership moved); returns the new epochs."""
        records: list[Record] = []
        epochs: dict[tuple[str, int], int] = {}
        for topic, partition in partitions:
            if topic not in self.topics:
                continue
            epoch = self.leader_epochs.get((topic, partition), -1) + 1
            epochs[(topic, partition)] = epoch
            records.append(Record(PartitionEpochKey(topic, partition), PartitionEpochValue(epoch)))
        return Result(records=records, response=epochs)

    def register_partitions(
        self, assignments: dict[tuple[str, int], tuple[int, ...]]
    ) -> Result[dict[tuple[str, int], PartitionRegistration]]:
        """Replicated partitions of existing topics, with their replicas (cluster/replication/
        placement.py): all in sync, the first leading, epoch 0. A partition already
        registered keeps its registration (a controller retrying after a failed write), which
        the answer gives."""
        records: list[Record] = []
        made: dict[tuple[str, int], PartitionRegistration] = {}
        for (topic, partition), replicas in assignments.items():
            info = self.topics.get(topic)
            if info is None or not 0 <= partition < info.partitions:
                raise ValueError(f"no partition {topic}-{partition} to register")
            if (topic, partition) in self.registrations:
                made[(topic, partition)] = self.registrations[(topic, partition)]
                continue
            registration = PartitionRegistration.new(tuple(replicas))
            made[(topic, partition)] = registration
            records.append(_registration_record(topic, partition, registration))
        return Result(records=records, response=made)

    def change_partitions(self, changes: dict[tuple[str, int], PartitionRegistration]) -> Result[None]:
        """Record registrations the controller changed (an election, an ISR change, a reassignment
        step). Each must be of a registered partition and newer than what is recorded: the
        partition epoch only grows, so an older change is a bug in the caller, not a state."""
        records: list[Record] = []
        for (topic, partition), registration in changes.items():
            current = self.registrations.get((topic, partition))
            if current is None:
                raise ValueError(f"{topic}-{partition} is not a registered replicated partition")
            if registration == current:
                continue
            if registration.partition_epoch <= current.partition_epoch or registration.leader_epoch < current.leader_epoch:
                raise ValueError(f"{topic}-{partition}: {registration} does not follow {current}")
            problem = _malformed(registration)
            if problem:
                raise ValueError(f"{topic}-{partition}: {registration}: {problem}")
            records.append(_registration_record(topic, partition, registration))
        return Result(records=records)

    def adopt_partitions(self, adopted: dict[tuple[str, int], PartitionRegistration]) -> Result[None]:
        """Register partitions kept in one copy until now (the internal topics of a cluster that
        started with one data directory, or before the coordinators kept replicas): from here on
        they are replicated. Each leader epoch must be above every one the partition was led at,
        so that the batches already in its log stay below the new leader's epoch."""
        records: list[Record] = []
        for (topic, partition), registration in adopted.items():
            tp = (topic, partition)
            if tp in self.registrations:
                raise ValueError(f"{topic}-{partition} is registered already")
            if tp not in self.leader_epochs:
                raise ValueError(f"{topic}-{partition} does not exist")
            if registration.leader_epoch <= self.leader_epochs[tp]:
                raise ValueError(f"{topic}-{partition}: leader epoch {registration.leader_epoch} is not above "
                                 f"{self.leader_epochs[tp]}, the partition's last")
            problem = _malformed(registration)
            if problem:
                raise ValueError(f"{topic}-{partition}: {registration}: {problem}")
            records.append(_registration_record(topic, partition, registration))
        return Result(records=records)

    def register_directory(self, directory_id: uuid.UUID) -> Result[int]:
        """The replica id of the data directory `directory_id`: the one it was given before, else
        the next id never given (one past the largest; a wiped directory comes back as a new
        replica, never as its old self)."""
        known = self.replica_ids.get(directory_id)
        if known is not None:
            return Result.of(known)
        new = max(self.replica_ids.values(), default=-1) + 1
        return Result(records=[Record(ReplicaDirectoryKey(directory_id), ReplicaDirectoryValue(new))], response=new)

    def allocate_producer_ids(self, assigned_to: str, size: int = PRODUCER_ID_BLOCK_SIZE) -> Result[ProducerIdBlock]:
        """The next block of producer ids (Kafka's ProducerIdControlManager.generateNextProducerId)."""
        first = self.next_producer_id
        if first > INT64_MAX - size:
            # Kafka fails the same way (UnknownServerException); 2^63 ids are never used up in practice.
            raise RuntimeError("producer ids exhausted: the next block would pass the int64 limit")
        block = ProducerIdBlock(assigned_to, first, size)
        return Result(records=[Record(ProducerIdsKey(), ProducerIdsValue(assigned_to, first + size))], response=block)

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> Result[None]:
        """Make `configs` the group's overrides (validated by the caller: cluster/group_configs.py)."""
        if configs == self.group_configs.get(group_id, {}):
            return Result()
        value = GroupConfigValue(dict(configs)) if configs else None
        return Result(records=[Record(GroupConfigKey(group_id), value)])

    def _epoch_records(self, topic: str, partitions: range) -> list[Record]:
        return [Record(PartitionEpochKey(topic, p), PartitionEpochValue(0)) for p in partitions]


def _malformed(r: PartitionRegistration) -> str | None:
    """What makes a registration impossible (the registration functions never make one)."""
    replicas = set(r.replicas)
    if not r.replicas or len(replicas) != len(r.replicas):
        return "replicas must be distinct and not empty"
    if not set(r.isr) <= replicas or len(set(r.isr)) != len(r.isr):
        return "the ISR must be distinct replicas"
    if r.leader != NO_LEADER and r.leader not in r.isr:
        return "the leader must be in the ISR"
    if not set(r.adding) <= replicas or not set(r.removing) <= replicas or set(r.adding) & set(r.removing):
        return "a reassignment's adding and removing replicas must be distinct replicas"
    return None


def _registration_record(topic: str, partition: int, r: PartitionRegistration) -> Record:
    return Record(
        PartitionKey(topic, partition),
        PartitionValue(r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch, r.adding, r.removing),
    )

