"""An experiment's simulated clients by role (classic, consumer-protocol and share members,
producers), and how the run makes more of them when a group churns."""

from __future__ import annotations

import zlib

from loadtest.experiment.scenario import GroupSpec, Scenario, ShareGroupSpec
from loadtest.members.classic import ClassicConfig, ClassicMember, ClassicState
from loadtest.members.consumer import ConsumerConfig, ConsumerMember, ConsumerState
from loadtest.members.machine import Broker, Machine
from loadtest.members.producer import ProducerConfig, ProducerMember
from loadtest.members.share import ShareConfig, ShareMember, ShareState


class Population:
    """Every simulated client of the run, by role, and how to make more (churn)."""

    def __init__(self, scenario: Scenario, brokers: list[Broker]) -> None:
        self.scenario = scenario
        self.brokers = brokers
        self.classic: dict[str, list[ClassicMember]] = {}
        self.consumer: dict[str, list[ConsumerMember]] = {}
        self.share: dict[str, list[ShareMember]] = {}
        self.producers: list[ProducerMember] = []
        self._next: dict[str, int] = {}
        for group, spec in scenario.classic_groups().items():
            self.classic[group] = [self.new_classic(group, spec) for _ in range(spec.members)]
        for group, spec in scenario.consumer_groups().items():
            self.consumer[group] = [self.new_consumer(group, spec) for _ in range(spec.members)]
        for group, spec in scenario.share_group_specs().items():
            self.share[group] = [self.new_share(group, spec) for _ in range(spec.members)]
        for spec in scenario.producers:
            for i in range(spec.count):
                name = spec.name if spec.count == 1 else f"{spec.name}-{i}"
                self.producers.append(ProducerMember(name, brokers, ProducerConfig(
                    spec.topic, rate=spec.rate, value_bytes=spec.value_bytes, linger_ms=spec.linger_ms)))

    def _name(self, group: str, prefix: str) -> str:
        index = self._next.get(group, 0)
        self._next[group] = index + 1
        return f"{group}/{prefix}{index:03d}"

    def new_classic(self, group: str, spec: GroupSpec) -> ClassicMember:
        return ClassicMember(self._name(group, "c"), self.brokers, ClassicConfig(
            group, list(spec.topics), assignor=spec.assignor, session_timeout_ms=spec.session_timeout_ms,
            rebalance_timeout_ms=spec.rebalance_timeout_ms, heartbeat_interval_ms=spec.heartbeat_interval_ms,
            commit_interval_ms=spec.commit_interval_ms, processing_ms=spec.processing_ms,
            fetch_max_wait_ms=spec.fetch_max_wait_ms, fetch_min_bytes=spec.fetch_min_bytes))

    def new_consumer(self, group: str, spec: GroupSpec) -> ConsumerMember:
        regex = spec.topic_regex
        return ConsumerMember(self._name(group, "k"), self.brokers, ConsumerConfig(
            group, [] if regex else list(spec.topics), topic_regex=regex, server_assignor=spec.server_assignor,
            rebalance_timeout_ms=spec.rebalance_timeout_ms, commit_interval_ms=spec.commit_interval_ms,
            processing_ms=spec.processing_ms, fetch_max_wait_ms=spec.fetch_max_wait_ms,
            fetch_min_bytes=spec.fetch_min_bytes))

    def new_member(self, group: str) -> ClassicMember | ConsumerMember:
        """A fresh member for a classic or consumer group that churns."""
        if group in self.consumer:
            return self.new_consumer(group, self.scenario.consumer_groups()[group])
        return self.new_classic(group, self.scenario.classic_groups()[group])

    def members_of(self, group: str) -> list[Machine]:
        return self.classic.get(group) or self.consumer.get(group) or self.share.get(group) or []

    def new_share(self, group: str, spec: ShareGroupSpec) -> ShareMember:
        index = self._next.get(group, 0)
        return ShareMember(self._name(group, "s"), self.brokers, ShareConfig(
            group, list(spec.topics), accept=spec.accept, release=spec.release, reject=spec.reject,
            processing_ms=spec.processing_ms, max_records=spec.max_records, max_wait_ms=spec.max_wait_ms,
            piggyback=spec.piggyback, seed=zlib.crc32(f"{self.scenario.seed}:{group}:{index}".encode())))

    def consumers(self) -> list[Machine]:
        return [m for groups in (self.classic, self.consumer, self.share) for ms in groups.values() for m in ms]

    def everyone(self) -> list[Machine]:
        return [*self.consumers(), *self.producers]

    def readiness(self) -> dict[str, tuple[int, int]]:
        classic = [m for ms in self.classic.values() for m in ms]
        share = [m for ms in self.share.values() for m in ms]
        out = {}
        consumer = [m for ms in self.consumer.values() for m in ms]
        if classic:
            out["classic"] = (sum(m.state is ClassicState.STABLE for m in classic), len(classic))
        if consumer:
            out["consumer"] = (sum(m.state is ConsumerState.STABLE for m in consumer), len(consumer))
        if share:
            out["share"] = (sum(m.state is ShareState.STABLE for m in share), len(share))
        if self.producers:
            out["producers"] = (sum(m.producer_id >= 0 and not m.stopped for m in self.producers), len(self.producers))
        return out
