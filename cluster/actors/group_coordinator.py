"""Group coordinator actor: leads partitions of __consumer_offsets (a thin shell over its runtime).

Gateways batch requests per actor per loop tick: `execute` (Endpoint.COORDINATOR, packed) for
operations that answer at once (heartbeats, commits, offset fetches, share heartbeats, ...; one
still waiting for its commit after `raygroups.coordinator.defer.after.ms` is answered Deferred and collected with
`deferred`), `execute_parked` for those that may park (CoordinatorOp.parks: JoinGroup, SyncGroup), whose
answers come back on the gateway's one long-lived channel (`answers_stream`, answer_channels.py),
those released together in one item. Each item's operation says what runs (`op.run`) and what
else the actor does about it (the rebalance watch, the commit counter, share state). Share groups' state is
initialized and deleted on the share coordinators through the Persister (share_group_state.py).
The controller's Leadership pushes bring the groups' configs, which the shards read through one
GroupConfigManager (a share member's session timeout and heartbeat interval).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from kio.schema.errors import ErrorCode

from coordinator.config import GroupConfigManager, GroupCoordinatorConfig
from coordinator.records import CODEC
from coordinator.shard import GroupCoordinatorShard

from cluster.actors.answer_channels import AnswerChannels
from cluster.actors.common import node_storage, setup_process
from cluster.actors.coordinator_host import CoordinatorActorBody, CoordinatorHost, Seams
from cluster.calls import CoordinatorItem, CoordinatorOp, Deferred, Failed, ParkedItem, pack, unpack
from cluster.calls.kinds import ActorKind
from cluster.clients.controller import ControllerClient
from cluster.clients.replica_links import ReplicaLinks
from cluster.config import Config
from cluster.group_configs import coordinator_group_configs
from cluster.leadership import Leadership, empty_leadership
from cluster.metadata import CONSUMER_OFFSETS
from cluster.metrics.rebalances import RebalanceWatch
from cluster.metrics import registry as metrics_registry
from cluster.clients.persister import Persister
from cluster.clients.routing import Router
from cluster.runtime import LoadInProgress, NotCoordinator
from cluster.services.share_group_state import ShareGroupState

DEFERRED_KEPT_S = 60.0  # an outcome no gateway collected (it died) is dropped after this


def group_coordinator_config(config: Config) -> GroupCoordinatorConfig:
    return GroupCoordinatorConfig(
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        max_size=config["group.max.size"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
        share_heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
        share_session_timeout_ms=config["group.share.session.timeout.ms"],
        share_max_size=config["group.share.max.size"],
        share_initialize_retry_interval_ms=config["group.share.initialize.retry.interval.ms"],
        consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
        consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
        consumer_max_size=config["group.consumer.max.size"],
        consumer_assignors=config["group.consumer.assignors"],
        consumer_regex_refresh_interval_ms=config["group.consumer.regex.refresh.interval.ms"],
        consumer_migration_policy=config["group.consumer.migration.policy"],
    )


def new_member_id(prefix: str) -> str:
    """Kafka's member id: client id (or group.instance.id) and a random UUID."""
    return f"{prefix}-{uuid.uuid4()}"


class GroupCoordinator(CoordinatorActorBody):
    """The actor's body, a plain object (the simulation runs it without Ray)."""

    def __init__(self, name: str, config: Config, data_dir: str, controller: Any = None, seams: Seams = Seams(),
                 new_member_id: Callable[[str], str] = new_member_id) -> None:
        self.config = config
        # The groups' configs the shards apply (share session settings), given by the controller's
        # Leadership pushes; one manager for every shard of this actor.
        self.group_configs = GroupConfigManager()
        self._group_configs_seen: dict[str, dict[str, str]] | None = None
        self._make_shard = functools.partial(
            GroupCoordinatorShard, config=group_coordinator_config(config), new_member_id=new_member_id,
            group_config_manager=self.group_configs,
        )
        self.host = CoordinatorHost(name, ActorKind.GROUP_COORDINATOR, CODEC, self._new_shard, config, Path(data_dir), seams)
        self.router = Router(controller, empty_leadership())
        persister = Persister(self.router, config["share.coordinator.state.topic.num.partitions"])
        self.share_state = ShareGroupState(self.host.runtime, persister)
        # Around every load, the controller's and a led replica's: the topics before, the share
        # state to initialize after (ShareGroupState.update_topics).
        self.host.before_load = self._topics_first
        self.host.after_load = self.share_state.update_topics
        self.rebalances = RebalanceWatch()
        self.channels = AnswerChannels()
        # An operation of `execute` still running after this long is answered Deferred: its batch's
        # call returns with the rest (the gateway keeps two calls under way per coordinator, and what
        # waits for a stalled partition's commit would hold every other partition's answers behind
        # it). Long beside a write committed at once (an fsync, a follower's fetch), short beside a
        # session. None: never.
        defer_ms = config["raygroups.coordinator.defer.after.ms"]
        self.defer_after_s: float | None = None if defer_ms < 0 else defer_ms / 1000
        self._tickets = itertools.count()
        self._deferred: dict[int, asyncio.Future] = {}  # ticket -> an operation answered Deferred
        # Names outlive actors (a restarted coordinator keeps its name): a gateway tells this
        # actor's answers from its predecessor's by this.
        self.incarnation = uuid.uuid4().hex

    def _new_shard(self, tp: tuple[str, int], clock: Any) -> GroupCoordinatorShard:
        """A shard that knows the cluster's topics from the start: the operations queued while its
        partition loads run before the load's own update_topics (shard.start_with_topics)."""
        shard = self._make_shard(tp, clock)
        if self.share_state.image is not None:
            shard.start_with_topics(self.share_state.image)
        return shard

    async def update_leadership(self, leadership: Leadership) -> None:
        self.router.update(leadership)
        self.share_state.leadership_changed(self.router.leadership)
        # The groups' configs ride the map (cluster/group_configs.py), those of the newest map the
        # router holds: a share member's next heartbeat follows them.
        overrides = self.router.leadership.group_configs
        if overrides != self._group_configs_seen:
            self._group_configs_seen = {g: dict(c) for g, c in overrides.items()}
            self.group_configs.update(coordinator_group_configs(self.config, overrides))

    async def _topics_first(self) -> None:
        """Before a load (the host's before_load): with no map pushed yet (a coordinator started
        moments ago) its shards would start without the cluster's topics. Pulled first, as a
        broker has its metadata image before it becomes a coordinator."""
        if self.share_state.image is None and self.router.controller.handle is not None:
            await self.update_leadership(await self.router.refresh())

    async def execute(self, packed: bytes | list[CoordinatorItem]) -> bytes | list[Any]:
        """Run a batch of operations that answer at once; the batch and its answers cross packed
        (Endpoint.COORDINATOR). One still running after `defer_after_s` (waiting for a commit the
        replicas have not made: a follower slow or gone, until the ISR shrinks) is answered
        Deferred, its outcome asked for on a call of its own (`deferred`)."""
        items: list[CoordinatorItem] = unpack(packed)
        outcomes = await self.host.execute_within(CONSUMER_OFFSETS, items, self.defer_after_s)
        for i, (item, outcome) in enumerate(zip(items, outcomes)):
            if isinstance(outcome, asyncio.Future):
                outcomes[i] = self._defer(item, outcome)
            else:
                self._after(item, outcome)
        return pack(outcomes)

    def _after(self, item: CoordinatorItem, outcome: Any) -> None:
        """What the actor does about a finished operation besides answering it."""
        op = item.op
        if op.follows_up:
            self.share_state.after(item, outcome)
        if op.watched:
            self._observe(item)
        elif op.commits:
            metrics_registry.inc("offset_commits")

    def _defer(self, item: CoordinatorItem, future: asyncio.Future) -> Deferred:
        ticket = next(self._tickets)
        self._deferred[ticket] = future
        metrics_registry.inc("coordinator_deferred_answers")

        def finished(f: asyncio.Future) -> None:
            # Kept for the gateway to collect; dropped after a while if it never does (it died).
            asyncio.get_running_loop().call_later(DEFERRED_KEPT_S, self._deferred.pop, ticket, None)
            outcome = self.host.outcome(f)
            if not isinstance(outcome, BaseException):
                self._after(item, outcome)

        future.add_done_callback(finished)
        return Deferred(self.host.name, self.incarnation, ticket)

    async def deferred(self, incarnation: str, ticket: int) -> Any:
        """The outcome of an operation `execute` answered Deferred (Endpoint.COORDINATOR_DEFERRED),
        once it has one. Unknown to this incarnation (it restarted, or the outcome waited
        uncollected past DEFERRED_KEPT_S): COORDINATOR_NOT_AVAILABLE, which the client retries."""
        future = self._deferred.get(ticket) if incarnation == self.incarnation else None
        if future is None:
            return Failed(ErrorCode.coordinator_not_available, "the operation's outcome is no longer held")
        await asyncio.wait([future])
        self._deferred.pop(ticket, None)
        outcome = self.host.outcome(future)
        if isinstance(outcome, BaseException):
            raise outcome  # an operation's own failure fails its call, as in `execute`
        return outcome

    async def execute_parked(self, items: list[ParkedItem]) -> list[Any]:
        """Start operations that may park; each answers later on its gateway's channel
        (`answers_stream`) under the ticket it came with. Answered now, per item: this actor's
        name and incarnation, or why the operation could not start (as `execute` answers it)."""
        started: list[Any] = []
        for parked in items:
            item = parked.item
            if item.op is CoordinatorOp.JOIN:
                self.rebalances.before_join(item.request.group_id, self._group(item))
            future = self.host.start(CONSUMER_OFFSETS, item)
            if isinstance(future, Failed):
                started.append(future)
                continue
            future.add_done_callback(functools.partial(self._answered, parked.channel, parked.ticket, item))
            started.append((self.host.name, self.incarnation))
        return started

    def _answered(self, channel: str, ticket: int, item: CoordinatorItem, future: asyncio.Future) -> None:
        self._observe(item)
        self.channels.put(channel, ticket, self.host.outcome(future))

    async def answers_stream(self, channel: str):
        """The gateway's channel for parked answers: (incarnation, [(ticket, outcome), ...]) items."""
        async for answers in self.channels.stream(channel, self.incarnation):
            yield answers

    def _group(self, item: CoordinatorItem) -> Any:
        partition = self.host.runtime.partitions.get((CONSUMER_OFFSETS, item.partition))
        shard = getattr(partition, "shard", None)
        return shard.groups.get(item.request.group_id) if shard is not None else None

    def _observe(self, item: CoordinatorItem) -> None:
        self.rebalances.observe(item.request.group_id, self._group(item))

    async def metrics(self) -> dict[str, Any]:
        """Counters, and the groups this actor leads by protocol and state (counted now)."""
        counts: dict[tuple[str, str], int] = {}
        for partition in list(self.host.runtime.partitions.values()):
            shard = getattr(partition, "shard", None)
            for group in list(getattr(shard, "groups", {}).values()):
                key = (group.group_type, group.state.value)
                counts[key] = counts.get(key, 0) + 1
        gauges = [("group_count", {"protocol": protocol, "state": state}, float(n)) for (protocol, state), n in counts.items()]
        gauges += [("share_group_count", {"state": state}, float(n)) for (protocol, state), n in counts.items() if protocol == "share"]
        return metrics_registry.snapshot(gauges)

    async def list_groups(self, states: tuple[str, ...], types: tuple[str, ...]) -> tuple[Any, list[Any]]:
        """ListGroups over every partition this actor leads: (error or None, groups)."""
        runtime = self.host.runtime
        error = None
        listed: list[Any] = []

        async def one(tp: tuple[str, int]) -> None:
            nonlocal error
            try:
                listed.extend(await runtime.write(tp, None, lambda token: runtime.shard(tp).list_groups(states, types, token)))
            except LoadInProgress:
                error = Failed(ErrorCode.coordinator_load_in_progress)
            except NotCoordinator:
                pass  # moved away meanwhile: its new leader lists it

        await asyncio.gather(*(one(tp) for tp in list(runtime.partitions)))
        return error, listed


@ray.remote
class GroupCoordinatorActor(GroupCoordinator):
    def __init__(self, name: str, config: Config, data_dir: str, controller: Any = None) -> None:
        setup_process()
        root, directory = node_storage(data_dir)
        super().__init__(name, config, str(root), controller)
        self.host.directory_id = directory
        self.replicate_through(ReplicaLinks(), ControllerClient(controller))
