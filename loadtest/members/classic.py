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

The lifecycle and settings are in classic_state.py; positions, fetching and committing in
classic_positions.py.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.members.assignors import ASSIGNORS, COOPERATIVE
from loadtest.members.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, encode_subscription
from loadtest.members.classic_positions import ConsumedPartitions
from loadtest.members.classic_state import TP, TRANSITIONS, ClassicConfig, ClassicState, IllegalTransition
from loadtest.members.errors import COORDINATOR_MOVED, TRANSPORT, error_name
from loadtest.members.lookup import CoordinatorLookup, MetadataCache
from loadtest.members.machine import Broker, Machine, Millis, Pending

__all__ = ["ClassicConfig", "ClassicMember", "ClassicState", "IllegalTransition"]

_S = ClassicState


class ClassicMember(ConsumedPartitions, Machine):
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
        if target not in TRANSITIONS[self.state]:
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

    # -- what ConsumedPartitions asks (classic_positions.py) --------------------------------------------------

    def _reading(self) -> bool:
        return self.state is not _S.LEAVING and self.state is not _S.STOPPED

    def _may_fetch(self) -> bool:
        return self.state not in (_S.LEAVING, _S.STOPPED, _S.REVOKING)

    def _may_auto_commit(self) -> bool:
        return self.state is _S.STABLE

    def _offset_fetch_request(self, topics: dict[str, list[int]]) -> tuple[int, dict[str, Any]]:
        return 7, {"group_id": self.config.group_id, "require_stable": True,
                   "topics": [{"name": t, "partition_indexes": ps} for t, ps in sorted(topics.items())]}

    def _offset_fetch_topics(self, response: Any) -> Any:
        return response.topics if response.error_code == ErrorCode.none else None

    def _commit_refused(self, now: Millis, errors: set[ErrorCode], offsets: dict[TP, int], generation: int,
                        then: Any) -> bool:
        return False  # a refused commit is given up: its records are read again after the rebalance

    def _commit_failed(self, now: Millis, errors: set[ErrorCode], generation: int) -> None:
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
