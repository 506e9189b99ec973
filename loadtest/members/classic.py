"""A classic consumer-group member, sans I/O: the client side of seeds 002/003.

It finds its coordinator, joins (JoinGroup v9, answering MEMBER_ID_REQUIRED), runs the assignor
when it is the leader (range, round-robin or cooperative-sticky), syncs, heartbeats, fetches its
partitions from their leaders, commits its positions every `commit_interval_ms`, and rejoins on
the errors of SPEC.md §2, as Kafka's consumer does:

- REBALANCE_IN_PROGRESS, eager assignors: commit every position, give up every partition, rejoin
  (onPartitionsRevoked); cooperative-sticky: rejoin keeping its partitions, and revoke (commit,
  then drop) only those the new assignment leaves out, then rejoin once more (KIP-429).
- ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: the partitions are lost (no commit: it would be
  refused), rejoin (with no member id after UNKNOWN_MEMBER_ID).
- NOT_COORDINATOR and friends, or a broken connection: look the coordinator up again and go on.
- FENCED_INSTANCE_ID and errors no retry fixes: stop.

A newly assigned partition starts at its committed offset (OffsetFetch), else at the log start
(ListOffsets earliest: auto.offset.reset=earliest). Every record handed over is a `delivery`
observation with its generation; every commit outcome a `commit` observation; every start
position a `position` observation (docs/experiments.md).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import iter_batches
from loadtest.members.assignors import ASSIGNORS, COOPERATIVE
from loadtest.members.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, encode_subscription
from loadtest.members.errors import COORDINATOR_MOVED, LEADER_MOVED, TRANSPORT, error_name
from loadtest.members.lookup import CoordinatorLookup, MetadataCache
from loadtest.members.machine import Broker, Machine, Millis, Pending

TP = tuple[str, int]


class ClassicState(enum.Enum):
    """A member's lifecycle. Legal transitions (`_TRANSITIONS`):

    UNJOINED  -> JOINING                      JoinGroup sent (once the coordinator is known)
    JOINING   -> JOINING                      MEMBER_ID_REQUIRED: join again with the given id
    JOINING   -> ASSIGNING | SYNCING          the leader reads partition counts first; a follower syncs
    ASSIGNING -> SYNCING                      the leader's plan is ready
    SYNCING   -> STABLE                       the assignment arrived
    JOINING | ASSIGNING | SYNCING -> UNJOINED a rebalance error or a lost coordinator: join again
    STABLE    -> REVOKING                     eager: commit everything, then join
    STABLE    -> JOINING                      cooperative: rejoin keeping partitions
    STABLE | REVOKING -> UNJOINED             partitions lost (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID)
    REVOKING  -> JOINING                      the revocation commit answered
    any but STOPPED -> LEAVING -> STOPPED     leave(); any -> STOPPED on a fatal error
    """

    UNJOINED = "unjoined"
    JOINING = "joining"
    ASSIGNING = "assigning"
    SYNCING = "syncing"
    STABLE = "stable"
    REVOKING = "revoking"
    LEAVING = "leaving"
    STOPPED = "stopped"


_S = ClassicState
_TRANSITIONS: dict[ClassicState, frozenset[ClassicState]] = {
    _S.UNJOINED: frozenset({_S.JOINING}),
    _S.JOINING: frozenset({_S.JOINING, _S.ASSIGNING, _S.SYNCING, _S.UNJOINED}),
    _S.ASSIGNING: frozenset({_S.SYNCING, _S.UNJOINED}),
    _S.SYNCING: frozenset({_S.STABLE, _S.UNJOINED}),
    _S.STABLE: frozenset({_S.REVOKING, _S.JOINING, _S.UNJOINED}),
    _S.REVOKING: frozenset({_S.JOINING, _S.UNJOINED}),
    _S.LEAVING: frozenset(),
    _S.STOPPED: frozenset(),
}
for _state in _S:
    if _state is not _S.STOPPED:
        _TRANSITIONS[_state] = _TRANSITIONS[_state] | {_S.STOPPED} | ({_S.LEAVING} if _state is not _S.LEAVING else set())


class IllegalTransition(RuntimeError):
    pass


@dataclass(slots=True)
class ClassicConfig:
    group_id: str
    topics: list[str]
    assignor: str = "range"
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 30_000
    heartbeat_interval_ms: int = 3_000
    commit_interval_ms: int = 5_000  # Kafka's auto.commit.interval.ms
    # Benchmarks: the next commit goes out when the last is answered (a closed loop), and the interval
    # only paces the retries while there is nothing to commit. A 1 ms interval instead woke each member
    # every millisecond whether or not its commit was answered: a core of timer work at 1,000 members.
    commit_back_to_back: bool = False
    processing_ms: float = 0.0
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1 << 20
    group_instance_id: str | None = None
    fetch: bool = True  # False: membership only (heartbeat and commit benchmarks)
    metadata_max_age_ms: int = 300_000  # Kafka's metadata.max.age.ms: how old a leader's metadata may be to assign


class ClassicMember(Machine):
    role = "classic"

    def __init__(self, name: str, bootstrap: list[Broker], config: ClassicConfig, **kwargs: Any) -> None:
        super().__init__(name, config.group_id, bootstrap, **kwargs)
        if config.assignor not in ASSIGNORS:
            raise ValueError(f"unknown assignor {config.assignor!r}; known: {', '.join(ASSIGNORS)}")
        self.config = config
        self.state = ClassicState.UNJOINED
        self.generation = -1
        self.leader_id = ""
        self.cooperative = config.assignor in COOPERATIVE
        self.coordinator = CoordinatorLookup(self, config.group_id)
        self.metadata = MetadataCache(self)
        self.assignment: dict[str, list[int]] = {}
        self.positions: dict[TP, int] = {}  # next offset to read, per owned partition with a known start
        self.committed: dict[TP, int] = {}
        self.rebalances = 0  # times this member reached STABLE
        self.fatal: ErrorCode | None = None
        self._epoch: dict[TP, int] = {}  # bumped whenever a partition is (re)installed: stale fetches are dropped
        self._epochs = 0
        self._resolving: set[TP] = set()  # OffsetFetch or ListOffsets on the way
        self._fetching: set[Broker] = set()
        self._members: dict[str, tuple[list[str], dict[str, list[int]]]] = {}
        self._skip_assignment = False
        self._assigned_metadata_at: Millis | None = None  # when the metadata the leader assigns with was fetched
        self._commit_inflight = False
        self._after_commit: list[Any] = []
        self._heartbeat_inflight = False
        self._last_rebalance_reason = "join"
        self._rejoin_after_sync = False
        self._revoking: set[TP] = set()  # committed on the way out: nothing more is handed over

    # -- lifecycle --------------------------------------------------------------------------------

    def _to(self, target: ClassicState) -> None:
        if target not in _TRANSITIONS[self.state]:
            raise IllegalTransition(f"{self.name}: {self.state.name} -> {target.name}")
        self.state = target

    def start(self, now: Millis) -> None:
        self._rejoin(now, "join")

    def leave(self, now: Millis) -> None:
        """Commit what was read, leave the group (LeaveGroup), then stop."""
        if self.state in (_S.LEAVING, _S.STOPPED):
            return
        for name in ("heartbeat", "commit", "rejoin"):
            self.cancel(name)
        self._to(_S.LEAVING)
        self._revoking = set(self.positions)
        if not self.member_id or self.coordinator.broker is None:
            self._stop(now)
            return
        self._commit(now, then=self._send_leave)

    def _send_leave(self, now: Millis) -> None:
        if self.coordinator.broker is None:
            self._stop(now)
            return
        body = {"group_id": self.config.group_id,
                "members": [{"member_id": self.member_id, "group_instance_id": self.config.group_instance_id}]}
        self.send(now, ApiKey.LEAVE_GROUP, 5, body, self.coordinator.broker, CoordinatorLookup.LANE,
                  lambda r, e, t, p: self._stop(t), timeout_ms=5_000)

    def _stop(self, now: Millis) -> None:
        if self.state is not _S.STOPPED:
            self._to(_S.STOPPED)
        self.stopped = True
        self._timers.clear()
        self.assignment, self.positions = {}, {}

    def _fail_fatally(self, now: Millis, error: ErrorCode) -> None:
        self.fatal = error
        self.observe(now, "member_stop", detail={"reason": error_name(error)})
        self._stop(now)

    # -- the rebalance ------------------------------------------------------------------------------

    def _rejoin(self, now: Millis, reason: str) -> None:
        """Start joining; the partitions were already revoked or lost as the reason needs."""
        if self.state in (_S.LEAVING, _S.STOPPED):
            return
        if self.state in (_S.JOINING, _S.ASSIGNING, _S.SYNCING):
            # Already rejoining, with a subscription that may still name what was just revoked:
            # one more round after this one lets the leader hand it on.
            self._rejoin_after_sync = True
            return
        self._last_rebalance_reason = reason
        self.observe(now, "rebalance_start", generation=self.generation, detail={"reason": reason})
        self.cancel("heartbeat")
        if self.state is not _S.UNJOINED:
            self._to(_S.UNJOINED)
        self.coordinator.then(now, self._send_join)

    def _send_join(self, now: Millis) -> None:
        if self.state is not _S.UNJOINED and self.state is not _S.JOINING:
            return
        self._to(_S.JOINING)
        owned = self.assignment if self.cooperative else None
        body = {
            "group_id": self.config.group_id,
            "session_timeout": self.config.session_timeout_ms,
            "rebalance_timeout": self.config.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": "consumer",
            "protocols": [{"name": self.config.assignor, "metadata": encode_subscription(self.config.topics, owned)}],
            "reason": self._last_rebalance_reason,
        }
        self.send(now, ApiKey.JOIN_GROUP, 9, body, self.coordinator.broker, CoordinatorLookup.LANE, self._on_join,
                  timeout_ms=self.config.rebalance_timeout_ms + 5_000)

    def _on_join(self, response: Any, error: ErrorCode, now: Millis, _p: Pending) -> None:
        if self.state is not _S.JOINING:
            return
        if error == ErrorCode.none:
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.leader_id = response.leader
            self._skip_assignment = response.skip_assignment
            self._members = {m.member_id: decode_subscription(m.metadata) for m in response.members}
            if self.member_id == self.leader_id and not self._skip_assignment:
                self._to(_S.ASSIGNING)
                topics = sorted({t for ts, _ in self._members.values() for t in ts})
                if self._knows(now, topics):
                    # As Kafka's consumer: the leader assigns from the metadata it holds (a round
                    # trip less on the rebalance's critical path), fetching only what it lacks.
                    self._assign(now)
                else:
                    self.metadata.refresh(now, names=topics, then=self._assign_fresh)
            else:
                self._to(_S.SYNCING)
                self._send_sync(now, [])
            return
        if error == ErrorCode.member_id_required:
            self.member_id = response.member_id
            self._send_join(now)
            return
        self._join_failed(now, error)

    def _join_failed(self, now: Millis, error: ErrorCode) -> None:
        """JoinGroup or SyncGroup did not end in an assignment: join again, after a backoff."""
        if error == ErrorCode.fenced_instance_id or not _retriable_in_rebalance(error):
            self._fail_fatally(now, error)
            return
        if error in COORDINATOR_MOVED or error in TRANSPORT:
            self.coordinator.lost(now)
        if error == ErrorCode.unknown_member_id:
            self.member_id, self.generation = "", -1
            self._lose_all(now)
        if error == ErrorCode.illegal_generation:
            self._lose_all(now)
        self._to(_S.UNJOINED)
        self.after("rejoin", now + self.retry_backoff_ms, lambda t: self.coordinator.then(t, self._send_join))

    def _knows(self, now: Millis, topics: list[str]) -> bool:
        fetched = self._assigned_metadata_at
        return (fetched is not None and now - fetched < self.config.metadata_max_age_ms
                and all(t in self.metadata.partitions for t in topics))

    def _assign_fresh(self, now: Millis) -> None:
        self._assigned_metadata_at = now
        self._assign(now)

    def _assign(self, now: Millis) -> None:
        if self.state is not _S.ASSIGNING:
            return
        subscriptions = {m: topics for m, (topics, _) in self._members.items()}
        owned = {m: own for m, (_, own) in self._members.items()}
        topics = {t for ts in subscriptions.values() for t in ts}
        counts = {t: n for t, n in self.metadata.partitions.items() if t in topics}
        plan = ASSIGNORS[self.config.assignor](subscriptions, counts, owned)
        self._to(_S.SYNCING)
        self._send_sync(now, [{"member_id": m, "assignment": encode_assignment(a)} for m, a in sorted(plan.items())])

    def _send_sync(self, now: Millis, assignments: list[dict[str, Any]]) -> None:
        body = {
            "group_id": self.config.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": "consumer",
            "protocol_name": self.config.assignor,
            "assignments": assignments,
        }
        self.send(now, ApiKey.SYNC_GROUP, 5, body, self.coordinator.broker, CoordinatorLookup.LANE, self._on_sync,
                  timeout_ms=self.config.rebalance_timeout_ms + 5_000)

    def _on_sync(self, response: Any, error: ErrorCode, now: Millis, _p: Pending) -> None:
        if self.state is not _S.SYNCING:
            return
        if error != ErrorCode.none:
            self._join_failed(now, error)
            return
        new = decode_assignment(response.assignment)
        self._to(_S.STABLE)
        self.rebalances += 1
        self.observe(now, "rebalance_end", generation=self.generation, detail={"assignment": new})
        revoked = {(t, p) for t, ps in self.assignment.items() for p in ps} - {(t, p) for t, ps in new.items() for p in ps}
        self._install(now, new)
        self._schedule_heartbeat(now)
        if revoked:
            # KIP-429: give up what moves (committing it first), then rejoin so it can be assigned.
            self._revoke(now, revoked, then=lambda t: self._rejoin(t, "revoked"))
        elif self._rejoin_after_sync:
            self._rejoin_after_sync = False
            self._rejoin(now, "revoked")

    # -- owning partitions ---------------------------------------------------------------------------

    def _install(self, now: Millis, new: dict[str, list[int]]) -> None:
        """Keep what stays, start what is new; revoked partitions stay owned until `_revoke`."""
        owned = {(t, p) for t, ps in self.assignment.items() for p in ps}
        target = {(t, p) for t, ps in new.items() for p in ps}
        added = sorted(target - owned)
        kept = owned - (owned - target) if not self.cooperative else owned
        merged: dict[str, list[int]] = {}
        for t, p in sorted(kept | target):
            merged.setdefault(t, []).append(p)
        self.assignment = merged
        if added:
            self._start_positions(now, added)
        if self.config.commit_interval_ms and not self.has_timer("commit"):
            self.after("commit", now + self.config.commit_interval_ms, self._auto_commit)

    def _revoke(self, now: Millis, tps: set[TP], then: Any) -> None:
        """Stop handing over records of `tps`, commit their positions, then drop them (whatever the
        commit's outcome: a failed commit only means their records are read again)."""
        self._revoking |= tps

        def drop(t: Millis) -> None:
            self._drop(tps)
            then(t)

        self._commit(now, then=drop, only=tps)

    def _drop(self, tps: set[TP]) -> None:
        for tp in tps:
            self.positions.pop(tp, None)
            self._epoch.pop(tp, None)
            self._resolving.discard(tp)
            self._revoking.discard(tp)
        remaining: dict[str, list[int]] = {}
        for t, ps in self.assignment.items():
            keep = [p for p in ps if (t, p) not in tps]
            if keep:
                remaining[t] = keep
        self.assignment = remaining

    def _lose_all(self, now: Millis) -> None:
        """Partitions lost without a commit (the generation is gone; a commit would be refused)."""
        self._drop({(t, p) for t, ps in self.assignment.items() for p in ps})

    def _start_positions(self, now: Millis, tps: list[TP]) -> None:
        for tp in tps:
            self._epochs += 1
            self._epoch[tp] = self._epochs
            self.positions.pop(tp, None)
            self._resolving.add(tp)
        self.coordinator.then(now, lambda t: self._offset_fetch(t, tps))

    def _offset_fetch(self, now: Millis, tps: list[TP]) -> None:
        tps = [tp for tp in tps if tp in self._resolving and tp in self._epoch]
        if not tps or self.state in (_S.LEAVING, _S.STOPPED):
            return
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        body = {"group_id": self.config.group_id, "require_stable": True,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in sorted(topics.items())]}
        epochs = {tp: self._epoch[tp] for tp in tps}
        self.send(now, ApiKey.OFFSET_FETCH, 7, body, self.coordinator.broker, CoordinatorLookup.LANE,
                  lambda r, e, t, p: self._on_offset_fetch(r, e, t, p, epochs))

    def _on_offset_fetch(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, epochs: dict[TP, int]) -> None:
        current = [tp for tp, epoch in epochs.items() if self._epoch.get(tp) == epoch]
        if not current:
            return
        if response is None or response.error_code != ErrorCode.none:
            if error in COORDINATOR_MOVED or error in TRANSPORT:
                self.coordinator.lost(now)
            self.after(f"offset-fetch-{pending.send.request_id}", now + self.retry_backoff_ms,
                       lambda t: self.coordinator.then(t, lambda t2: self._offset_fetch(t2, current)))
            return
        reset: list[TP] = []
        retry: list[TP] = []
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if tp not in current:
                    continue
                if p.error_code != ErrorCode.none:
                    retry.append(tp)
                elif p.committed_offset >= 0:
                    self._position(now, tp, p.committed_offset, "committed", pending.sent_at)
                else:
                    reset.append(tp)
        if reset:
            self._reset(now, reset)
        if retry:
            self.after(f"offset-fetch-{pending.send.request_id}", now + self.retry_backoff_ms,
                       lambda t: self.coordinator.then(t, lambda t2: self._offset_fetch(t2, retry)))

    def _reset(self, now: Millis, tps: list[TP]) -> None:
        """auto.offset.reset=earliest: ListOffsets(-2) to each partition's leader."""
        missing = [tp for tp in tps if tp not in self.metadata.leaders]
        if missing:
            self.metadata.refresh(now, names=sorted({t for t, _ in missing}), then=lambda t: self._reset(t, tps))
            return
        by_leader: dict[Broker, list[TP]] = {}
        for tp in tps:
            by_leader.setdefault(self.metadata.leaders[tp], []).append(tp)
        for broker, group in by_leader.items():
            topics: dict[str, list[dict[str, int]]] = {}
            for t, p in group:
                topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": -1, "timestamp": -2})
            body = {"replica_id": -1, "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())]}
            epochs = {tp: self._epoch.get(tp) for tp in group}
            self.send(now, ApiKey.LIST_OFFSETS, 7, body, broker, "fetch",
                      lambda r, e, t, p, epochs=epochs: self._on_list_offsets(r, e, t, p, epochs))

    def _on_list_offsets(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, epochs: dict[TP, Any]) -> None:
        current = [tp for tp, epoch in epochs.items() if epoch is not None and self._epoch.get(tp) == epoch]
        if not current:
            return
        retry = []
        if response is None:
            retry = current
        else:
            for topic in response.topics:
                for p in topic.partitions:
                    tp = (topic.name, p.partition_index)
                    if tp not in current:
                        continue
                    if p.error_code == ErrorCode.none:
                        self._position(now, tp, p.offset, "reset", pending.sent_at)
                    else:
                        retry.append(tp)
        if retry:
            for t, p in retry:
                self.metadata.forget_leader(t, p)
            self.after(f"reset-{pending.send.request_id}", now + self.retry_backoff_ms, lambda t: self._reset(t, retry))

    def _position(self, now: Millis, tp: TP, offset: int, source: str, request_time: Millis) -> None:
        self._resolving.discard(tp)
        self.positions[tp] = offset
        self.observe(now, "position", generation=self.generation, topic=tp[0], partition=tp[1], offset=offset,
                     request_time=request_time, detail={"source": source})
        self._pump(now)

    # -- fetching ------------------------------------------------------------------------------------------

    def _pump(self, now: Millis) -> None:
        """Send a Fetch to every leader of owned partitions that has none in flight and is not busy."""
        if not self.config.fetch or self.state in (_S.LEAVING, _S.STOPPED, _S.REVOKING):
            return
        by_leader: dict[Broker, list[TP]] = {}
        unknown = []
        for tp in self.positions:
            if tp in self._revoking:
                continue
            leader = self.metadata.leaders.get(tp)
            if leader is None:
                unknown.append(tp)
            else:
                by_leader.setdefault(leader, []).append(tp)
        if unknown:
            self.metadata.refresh(now, names=sorted({t for t, _ in unknown}), then=self._pump)
        for broker, tps in by_leader.items():
            if broker in self._fetching or self.has_timer(f"fetch:{broker}"):
                continue
            self._send_fetch(now, broker, tps)

    def _send_fetch(self, now: Millis, broker: Broker, tps: list[TP]) -> None:
        topics: dict[str, list[dict[str, int]]] = {}
        sent = {}
        for t, p in sorted(tps):
            offset = self.positions[(t, p)]
            sent[(t, p)] = (offset, self._epoch[(t, p)])
            topics.setdefault(t, []).append({"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                             "last_fetched_epoch": -1, "log_start_offset": -1,
                                             "partition_max_bytes": self.config.fetch_max_bytes})
        body = {"replica_id": -1, "max_wait": self.config.fetch_max_wait_ms, "min_bytes": self.config.fetch_min_bytes,
                "max_bytes": self.config.fetch_max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()], "forgotten_topics_data": [],
                "rack_id": ""}
        self._fetching.add(broker)
        self.send(now, ApiKey.FETCH, 12, body, broker, "fetch",
                  lambda r, e, t, p: self._on_fetch(r, e, t, p, broker, sent),
                  timeout_ms=self.request_timeout_ms + self.config.fetch_max_wait_ms)

    def _on_fetch(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, broker: Broker,
                  sent: dict[TP, tuple[int, int]]) -> None:
        self._fetching.discard(broker)
        if response is None or response.error_code != ErrorCode.none:
            for t, p in sent:
                self.metadata.forget_leader(t, p)
            self.after(f"fetch:{broker}", now + self.retry_backoff_ms, self._pump)
            return
        delivered = 0
        for topic in response.responses:
            for part in topic.partitions:
                tp = (topic.topic, part.partition_index)
                expected = sent.get(tp)
                if (expected is None or tp in self._revoking or self._epoch.get(tp) != expected[1]
                        or self.positions.get(tp) != expected[0]):
                    continue  # revoked or reset meanwhile: the records are not ours to hand over
                if part.error_code == ErrorCode.none:
                    delivered += self._deliver(now, tp, part.records, pending.sent_at)
                elif part.error_code == ErrorCode.offset_out_of_range:
                    self.positions.pop(tp, None)
                    self._resolving.add(tp)
                    self._reset(now, [tp])
                elif part.error_code in LEADER_MOVED:
                    self.metadata.forget_leader(*tp)
        if delivered and self.config.processing_ms:
            self.after(f"fetch:{broker}", now + self.config.processing_ms, self._pump)
        else:
            self._pump(now)

    def _deliver(self, now: Millis, tp: TP, records: bytes | None, request_time: Millis) -> int:
        if not records:
            return 0
        position = self.positions[tp]
        count = 0
        for _, header in iter_batches(records):
            last = header.last_offset
            if last < position:
                continue
            for offset in range(max(position, header.base_offset), last + 1):
                self.observe(now, "delivery", topic=tp[0], partition=tp[1], offset=offset, generation=self.generation,
                             request_time=request_time)
                count += 1
            position = last + 1
        self.positions[tp] = position
        return count

    # -- committing ------------------------------------------------------------------------------------------

    def _auto_commit(self, now: Millis) -> None:
        if self.state in (_S.LEAVING, _S.STOPPED):
            return
        if self.state is _S.STABLE:
            self._commit(now)
        if not (self.config.commit_back_to_back and self._commit_inflight):
            self.after("commit", now + self.config.commit_interval_ms, self._auto_commit)

    def _commit(self, now: Millis, then: Any = None, only: set[TP] | None = None) -> None:
        """Commit every position (of `only`, if given), as Kafka's consumer commits all it has
        consumed each auto-commit interval; `then` runs after the answer."""
        if self._commit_inflight:
            if then is not None:
                self._after_commit.append(lambda t: self._commit(t, then, only))
            return
        offsets = {tp: pos for tp, pos in self.positions.items() if only is None or tp in only}
        if not offsets or self.coordinator.broker is None or not self.member_id:
            if then is not None:
                then(now)
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), offset in sorted(offsets.items()):
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": ""})
        body = {"group_id": self.config.group_id, "generation_id_or_member_epoch": self.generation,
                "member_id": self.member_id, "group_instance_id": self.config.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        self._commit_inflight = True
        generation = self.generation
        self.send(now, ApiKey.OFFSET_COMMIT, 9, body, self.coordinator.broker, CoordinatorLookup.LANE,
                  lambda r, e, t, p: self._on_commit(r, e, t, p, offsets, generation, then))

    def _on_commit(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, offsets: dict[TP, int],
                   generation: int, then: Any) -> None:
        self._commit_inflight = False
        outcome: dict[TP, ErrorCode] = {tp: error for tp in offsets}
        if response is not None:
            for topic in response.topics:
                for p in topic.partitions:
                    outcome[(topic.name, p.partition_index)] = p.error_code
        for (t, p), code in sorted(outcome.items()):
            if (t, p) not in offsets:
                continue
            self.observe(now, "commit", generation=generation, topic=t, partition=p, offset=offsets[(t, p)],
                         error=error_name(code), request_time=pending.sent_at)
            if code == ErrorCode.none:
                self.committed[(t, p)] = offsets[(t, p)]
        errors = set(outcome.values()) - {ErrorCode.none}
        waiting, self._after_commit = self._after_commit, []
        if then is not None:
            waiting.insert(0, then)
        if errors & (COORDINATOR_MOVED | TRANSPORT):
            self.coordinator.lost(now)
        for work in waiting:
            work(now)
        if self.config.commit_back_to_back and not self.has_timer("commit") and self.state is _S.STABLE:
            self.after("commit", now, self._auto_commit)
        if self.state is _S.STABLE and generation == self.generation:
            if ErrorCode.rebalance_in_progress in errors:
                self._rebalance(now, ErrorCode.rebalance_in_progress)
            elif errors & {ErrorCode.illegal_generation, ErrorCode.unknown_member_id}:
                self._rebalance(now, next(iter(errors & {ErrorCode.illegal_generation, ErrorCode.unknown_member_id})))

    # -- heartbeats ------------------------------------------------------------------------------------------

    def _schedule_heartbeat(self, now: Millis) -> None:
        self.after("heartbeat", now + self.config.heartbeat_interval_ms, self._heartbeat)

    def _heartbeat(self, now: Millis) -> None:
        if self.state is not _S.STABLE:
            return
        if self._heartbeat_inflight:
            self._schedule_heartbeat(now)
            return
        if self.coordinator.broker is None:
            self.coordinator.then(now, self._heartbeat)
            return
        body = {"group_id": self.config.group_id, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": self.config.group_instance_id}
        self._heartbeat_inflight = True
        self.send(now, ApiKey.HEARTBEAT, 4, body, self.coordinator.broker, CoordinatorLookup.LANE, self._on_heartbeat)

    def _on_heartbeat(self, response: Any, error: ErrorCode, now: Millis, _p: Pending) -> None:
        self._heartbeat_inflight = False
        if self.state is not _S.STABLE:
            return
        if error == ErrorCode.none:
            self._schedule_heartbeat(now)
        elif error in COORDINATOR_MOVED or error in TRANSPORT:
            self.coordinator.lost(now)
            self.after("heartbeat", now + self.retry_backoff_ms, lambda t: self.coordinator.then(t, self._heartbeat))
        elif error in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation, ErrorCode.unknown_member_id):
            self._rebalance(now, error)
        elif error == ErrorCode.fenced_instance_id or error.retriable is False:
            self._fail_fatally(now, error)
        else:
            self._schedule_heartbeat(now)

    def _rebalance(self, now: Millis, cause: ErrorCode) -> None:
        """A Stable member learns the group rebalances (or that it was left out): revoke or lose, rejoin."""
        reason = error_name(cause)
        if cause == ErrorCode.rebalance_in_progress:
            if self.cooperative:
                self._rejoin(now, reason)
                return
            self._to(_S.REVOKING)
            self.observe(now, "rebalance_start", generation=self.generation, detail={"reason": reason})
            self.cancel("heartbeat")
            owned = {(t, p) for t, ps in self.assignment.items() for p in ps}
            self._revoke(now, owned, then=lambda t: self._after_revocation(t))
            return
        if cause == ErrorCode.unknown_member_id:
            self.member_id = ""
            self.generation = -1
        self._lose_all(now)
        self._rejoin(now, reason)

    def _after_revocation(self, now: Millis) -> None:
        if self.state is not _S.REVOKING:
            return
        self._to(_S.UNJOINED)
        self.coordinator.then(now, self._send_join)


def _retriable_in_rebalance(error: ErrorCode) -> bool:
    return (
        error in COORDINATOR_MOVED
        or error in TRANSPORT
        or error in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation, ErrorCode.unknown_member_id)
        or error.retriable
    )
