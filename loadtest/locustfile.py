"""locust load tests of Kafka group coordination: classic and KIP-848 consumer-group members,
share consumers, producers.

    locust -f loadtest/locustfile.py --host 127.0.0.1:9092 --headless -u 1000 -r 100 -t 5m --csv out
    locust -f loadtest/locustfile.py --host 127.0.0.1:9092                 # the web UI on :8089
    locust -f loadtest/locustfile.py --master ...   and   locust -f loadtest/locustfile.py --worker  (x N)

Each locust user is one simulated Kafka client, run by the same sans-I/O members as
`raygroups experiment` (loadtest/members/), here on gevent. Every Kafka API a member calls is a
locust request type (name = the API, response time = the round trip, response length = the
response's bytes); a request fails when the answer is an error code a client cannot retry past
(INVALID_REQUEST, UNSUPPORTED_VERSION, GROUP_MAX_SIZE_REACHED, ...) or no answer came (connection
lost, timed out). Retriable codes (NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER, ...) and the group
protocol's own signals (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, ...) are answers, not failures.

Users: ClassicMemberUser (a classic consumer-group member: join, sync, heartbeat, fetch, commit),
ConsumerMemberUser (a consumer-group member of the KIP-848 protocol, group.protocol=consumer:
ConsumerGroupHeartbeat, reconcile, fetch, commit), ShareConsumerUser (a KIP-932 share-group member
acknowledging with an ACCEPT/RELEASE/REJECT mix) and ProducerUser (an idempotent producer at
--produce-rate records/s). The knobs below are locust arguments (also in the web UI). Groups are
filled in order by each worker process: with --members-per-group 10, a worker's first ten classic
users form group 0, the next ten group 1, ... up to --groups groups per worker (then round again);
consumer-protocol members likewise over --consumer-groups, share consumers over --share-groups.
Topics `<prefix>-0..` with --partitions partitions each are created at the start.
"""

from __future__ import annotations

import itertools
import os

from locust import User, constant, events, task  # locust first: it patches the standard library for gevent
from locust.runners import WorkerRunner
from locust.user.users import LOCUST_STATE_STOPPING

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.drivers.green import GeventDriver
from loadtest.members.assignors import ASSIGNORS
from loadtest.members.classic import ClassicConfig, ClassicMember
from loadtest.members.consumer import ConsumerConfig, ConsumerMember
from loadtest.members.errors import is_failure
from loadtest.members.machine import Machine, parse_bootstrap
from loadtest.members.producer import ProducerConfig, ProducerMember
from loadtest.members.share import ShareConfig, ShareMember


class KafkaError(Exception):
    """A Kafka error code a client cannot retry past, or no answer at all."""


@events.init_command_line_parser.add_listener
def _arguments(parser) -> None:
    group = parser.add_argument_group("raygroups", "the simulated Kafka clients")
    group.add_argument("--groups", type=int, default=10, help="classic groups per worker process")
    group.add_argument("--members-per-group", type=int, default=10, help="classic members per group")
    group.add_argument("--share-groups", type=int, default=2, help="share groups per worker process")
    group.add_argument("--share-members-per-group", type=int, default=10, help="share consumers per share group")
    group.add_argument("--share-ratio", type=float, default=0.2, help="share consumers among consumer users, 0..1")
    group.add_argument("--consumer-groups", type=int, default=2,
                       help="consumer groups of the KIP-848 protocol (group.protocol=consumer) per worker process")
    group.add_argument("--consumer-members-per-group", type=int, default=10, help="members per KIP-848 consumer group")
    group.add_argument("--consumer-ratio", type=float, default=0.0,
                       help="KIP-848 consumer-protocol members among consumer users, 0..1 (with --share-ratio, "
                            "the rest are classic members)")
    group.add_argument("--server-assignor", default=None, choices=["uniform", "range"],
                       help="KIP-848 groups' server-side assignor (default: the group's, uniform)")
    group.add_argument("--ack-mix", default="0.9,0.08,0.02", help="ACCEPT,RELEASE,REJECT weights of share consumers")
    group.add_argument("--processing-ms", type=float, default=0.0, help="time a consumer spends per fetched batch")
    group.add_argument("--topics", type=int, default=1, help="topics <prefix>-0.. the groups consume")
    group.add_argument("--partitions", type=int, default=12, help="partitions per topic")
    group.add_argument("--producers", type=int, default=1, help="producer users (in all; 0 for none)")
    group.add_argument("--produce-rate", type=float, default=100.0, help="records/s of each producer")
    group.add_argument("--assignor", default="range", choices=sorted(ASSIGNORS), help="classic groups' assignor")
    group.add_argument("--heartbeat-interval-ms", type=int, default=3_000, help="classic members' heartbeat interval")
    group.add_argument("--session-timeout-ms", type=int, default=30_000, help="classic members' session timeout")
    group.add_argument("--commit-interval-ms", type=int, default=5_000,
                       help="classic and consumer-protocol members' auto-commit interval (Kafka's auto.commit.interval.ms; 0: never)")
    group.add_argument("--no-fetch", action="store_true", default=False,
                       help="classic and consumer-protocol members only keep their membership (heartbeats, commits): "
                            "the coordinator's load")
    group.add_argument("--prefix", default="locust", help="names of topics and groups")
    group.add_argument("--stats-until-stop", action="store_true", default=False,
                       help="count only the answers that come before the test starts stopping: with --reset-stats, "
                            "the steady state alone, without the users' LeaveGroups and the burst of their stopping")


_driver: GeventDriver | None = None
_counters: dict[str, itertools.count] = {}
_counting = True  # False once a test with --stats-until-stop starts stopping


def driver() -> GeventDriver:
    global _driver
    if _driver is None:
        _driver = GeventDriver(sink=_report)
    return _driver


def _report(rows: list[dict]) -> None:
    """Each answered (or failed) request as a locust request of its API."""
    if not _counting:
        return
    fire = events.request.fire
    for row in rows:
        if row["kind"] != "response":
            continue
        name = row["error"]
        exception = None
        if name != "NONE":
            code = getattr(ErrorCode, name.lower(), ErrorCode.unknown_server_error)
            if is_failure(code):
                exception = KafkaError(name)
        fire(request_type=row["api"], name=row["api"], response_time=row["latency_ms"],
             response_length=row.get("bytes") or 0, exception=exception, context={"member": row["member"]})


@events.init.add_listener
def _weights(environment, **_kwargs) -> None:
    options = environment.parsed_options
    if options is None:
        return
    ratio = min(max(options.share_ratio, 0.0), 1.0)
    consumer = min(max(options.consumer_ratio, 0.0), 1.0 - ratio)
    ClassicMemberUser.weight = round((1 - ratio - consumer) * 1000)
    ConsumerMemberUser.weight = round(consumer * 1000)
    ShareConsumerUser.weight = round(ratio * 1000)
    ProducerUser.fixed_count = max(options.producers, 0)
    ProducerUser.weight = 0  # producers come only by count: locust reads fixed_count 0 as "by weight" (one in a thousand)


@events.test_start.add_listener
def _count_answers(**_kwargs) -> None:
    global _counting
    _counting = True


@events.test_stopping.add_listener
def _stop_counting(environment, **_kwargs) -> None:
    global _counting
    if environment.parsed_options is not None and environment.parsed_options.stats_until_stop:
        _counting = False


@events.test_start.add_listener
def _create_topics(environment, **_kwargs) -> None:
    options = environment.parsed_options
    if options is None or environment.host is None or isinstance(environment.runner, WorkerRunner):
        return  # the master (or the only process) makes the topics
    brokers = parse_bootstrap(_bootstrap(environment.host))
    topics = [{"name": name, "num_partitions": options.partitions, "replication_factor": 1, "assignments": [],
               "configs": []} for name in _topics(options)]
    driver().call(brokers[0], ApiKey.CREATE_TOPICS, 7, {"topics": topics, "timeout": 30_000, "validate_only": False})


def _bootstrap(host: str) -> str:
    return host.split("://", 1)[-1].rstrip("/")


def _topics(options) -> list[str]:
    return [f"{options.prefix}-{i}" for i in range(max(options.topics, 1))]


def _worker() -> str:
    return f"w{os.getpid()}"


class KafkaUser(User):
    """One simulated Kafka client for the user's whole life: started on spawn, leaving on stop."""

    abstract = True
    wait_time = constant(1)  # only used when a member stopped on a fatal error and starts again

    def make_member(self) -> Machine:
        raise NotImplementedError

    def index(self, kind: str) -> int:
        return next(_counters.setdefault(kind, itertools.count()))

    @property
    def bootstrap(self):
        return parse_bootstrap(_bootstrap(self.host))

    @property
    def options(self):
        return self.environment.parsed_options

    @task
    def live(self) -> None:
        self.member = self.make_member()
        driver().run(self.member, should_stop=lambda: self._state == LOCUST_STATE_STOPPING)

    def on_stop(self) -> None:
        member = getattr(self, "member", None)
        if member is not None:
            driver().stop(member)


class ClassicMemberUser(KafkaUser):
    def make_member(self) -> Machine:
        o = self.options
        i = self.index("classic")
        group = f"{o.prefix}-{_worker()}-g{(i // max(o.members_per_group, 1)) % max(o.groups, 1)}"
        config = ClassicConfig(group, _topics(o), assignor=o.assignor, heartbeat_interval_ms=o.heartbeat_interval_ms,
                               session_timeout_ms=o.session_timeout_ms, processing_ms=o.processing_ms,
                               commit_interval_ms=o.commit_interval_ms, fetch=not o.no_fetch)
        return ClassicMember(f"{group}/c{i:05d}", self.bootstrap, config)


class ConsumerMemberUser(KafkaUser):
    def make_member(self) -> Machine:
        o = self.options
        i = self.index("consumer")
        group = f"{o.prefix}-{_worker()}-k{(i // max(o.consumer_members_per_group, 1)) % max(o.consumer_groups, 1)}"
        config = ConsumerConfig(group, _topics(o), server_assignor=o.server_assignor, processing_ms=o.processing_ms,
                                commit_interval_ms=o.commit_interval_ms, fetch=not o.no_fetch)
        return ConsumerMember(f"{group}/k{i:05d}", self.bootstrap, config)


class ShareConsumerUser(KafkaUser):
    def make_member(self) -> Machine:
        o = self.options
        i = self.index("share")
        group = f"{o.prefix}-{_worker()}-s{(i // max(o.share_members_per_group, 1)) % max(o.share_groups, 1)}"
        accept, release, reject = (float(x) for x in o.ack_mix.split(","))
        config = ShareConfig(group, _topics(o), accept=accept, release=release, reject=reject,
                             processing_ms=o.processing_ms, seed=i)
        return ShareMember(f"{group}/s{i:05d}", self.bootstrap, config)


class ProducerUser(KafkaUser):
    fixed_count = 1

    def make_member(self) -> Machine:
        o = self.options
        i = self.index("producer")
        topics = _topics(o)
        return ProducerMember(f"{o.prefix}-{_worker()}-p{i}", self.bootstrap,
                              ProducerConfig(topics[i % len(topics)], rate=o.produce_rate))
