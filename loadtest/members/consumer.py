"""A KIP-848 consumer-group member (`group.protocol=consumer`), sans I/O: what Kafka's
AsyncKafkaConsumer and librdkafka's new consumer do, light (SPEC.md §3b, the client side).

    joining:     it makes its own member id (a UUID, KIP-1082) and sends ConsumerGroupHeartbeat v1
                 at member epoch 0 with every field: its subscription (topic names or an RE2
                 regular expression), rebalance timeout, server assignor (if it names one) and the
                 partitions it owns, [].
    heartbeats:  every heartbeat interval the coordinator gives. A field is sent only when it
                 changed since it was last sent (null otherwise), and the owned partitions whenever
                 what the member owns changed (the Java client's HeartbeatState). After a failed
                 heartbeat the next one is full again: the coordinator may not have seen the last.
    reconciling: the assignment a heartbeat answer carries (topic ids; names through Metadata) is
                 reached in Kafka's order: revoke first (commit the positions of what goes, stop
                 fetching it, forget it), then take what is new (OffsetFetch of its committed
                 offsets, then fetch from there), then acknowledge at once with a heartbeat that
                 lists the owned partitions. The coordinator hands a partition to a member only
                 after its previous owner's heartbeat stopped listing it.
    fenced:      FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: every partition is lost (no commit: it
                 would be refused), and it joins again at epoch 0 with the same member id.
    committing:  OffsetCommit v9 with its member id and member epoch (as generation_id) every
                 commit interval, and OffsetFetch v9 with both; a commit answered
                 STALE_MEMBER_EPOCH (the coordinator moved it to a newer epoch whose answer has not
                 arrived) is sent again after the next heartbeat answer, which brings the epoch.
    leaving:     commit what was read, give everything up, heartbeat at epoch -1 (-2 for a static
                 member, whose place the coordinator keeps for its return).

Observations (role `consumer`; `generation` is the member epoch, as for share members):
`assignment` whenever what it owns changes (detail: the owned partitions, the `reason`
`assigned`, `revoked` or `lost`, and those partitions under that reason; a loss also says when the
member's last answered heartbeat and its oldest revocation were asked for, which bound when the
coordinator may have removed it: loadtest/check/ownership.py); `rebalance_start` when it leaves
STABLE (reason `join`, `fenced` or `assignment`) and `rebalance_end` when it is STABLE again;
`fenced`; and, as a classic member, `position`, `delivery` and `commit`.

The lifecycle and settings are in consumer_state.py; positions, fetching and committing are the
classic member's (classic_positions.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.members.classic_positions import ConsumedPartitions
from loadtest.members.classic_state import TP
from loadtest.members.consumer_state import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerConfig,
    ConsumerState,
    IllegalTransition,
    validate_transition,
)
from loadtest.members.errors import COORDINATOR_MOVED, TRANSPORT, error_name
from loadtest.members.lookup import CoordinatorLookup, MetadataCache
from loadtest.members.machine import Broker, Machine, Millis, Pending
from loadtest.members.share_state import new_member_id

__all__ = ["ConsumerConfig", "ConsumerMember", "ConsumerState", "IllegalTransition"]

_S = ConsumerState
_MEMBER = frozenset({_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING})
HEARTBEAT_VERSION = 1  # KIP-1082: the client's own member id; what Kafka 4 clients speak
FENCED = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})
Owned = frozenset[tuple[Any, int]]  # (topic id, partition)


class ConsumerMember(ConsumedPartitions, Machine):
    role = "consumer"

    def __init__(self, name: str, bootstrap: list[Broker], config: ConsumerConfig, **kwargs: Any) -> None:
        super().__init__(name, config.group_id, bootstrap, **kwargs)
        self.config = config
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval_ms = 5_000  # until the coordinator says
        self.state = ConsumerState.JOINING
        self.coordinator = CoordinatorLookup(self, config.group_id)
        self.metadata = MetadataCache(self)
        self.target: dict[Any, frozenset[int]] | None = None  # the coordinator's last assignment, by topic id
        self.assignment: dict[str, list[int]] = {}  # what it owns, by topic name
        self.positions: dict[TP, int] = {}
        self.committed: dict[TP, int] = {}
        self.reconciliations = 0  # times STABLE was reached
        self.fatal: ErrorCode | None = None
        # ConsumedPartitions' bookkeeping (classic_positions.py)
        self._epoch: dict[TP, int] = {}
        self._epochs = 0
        self._resolving: set[TP] = set()
        self._fetching: set[Broker] = set()
        self._revoking: set[TP] = set()
        self._commit_inflight = False
        self._after_commit: list[Any] = []
        # the heartbeat
        self._heartbeat_inflight = False
        self._heartbeat_soon = False  # an acknowledgement waits for the heartbeat in flight to answer
        self._full = True  # the next heartbeat sends every field
        self._sent_owned: Owned | None = None  # the owned partitions as last sent (None: send them)
        self._acknowledged: Owned | None = None  # ... and as last answered
        self._after_heartbeat: list[Any] = []  # waits for the next answered heartbeat (stale commits)
        self._heartbeat_ok_sent: Millis | None = None  # when the last answered heartbeat was sent
        self._target_asked: Millis | None = None  # when the heartbeat that brought the target was sent
        self._unwanted_since: dict[TP, Millis] = {}  # owned partitions a target left out, since when asked
        self._topic_ids: dict[str, Any] = {}
        # reconciliation
        self._revocation: set[TP] | None = None  # being committed before it is given up
        self._awaiting_names = False
        self._round = 0  # bumped when fenced or leaving: a revocation of before is void

    @property
    def generation(self) -> int:
        """The event log's `generation` column holds a consumer member's epoch (as a share member's)."""
        return self.member_epoch

    def _to(self, target: ConsumerState) -> None:
        try:
            validate_transition(self.state, target)
        except IllegalTransition as exc:
            raise IllegalTransition(f"{self.name}: {exc}") from None
        self.state = target

    # -- membership ---------------------------------------------------------------------------------

    def start(self, now: Millis) -> None:
        self.observe(now, "rebalance_start", generation=self.member_epoch, detail={"reason": "join"})
        self._heartbeat(now)

    def _heartbeat(self, now: Millis) -> None:
        if self.state not in _MEMBER or self._heartbeat_inflight:
            return  # an answer in flight schedules the next one
        if self.coordinator.broker is None:
            self.coordinator.then(now, self._heartbeat)
            return
        self.cancel("heartbeat")
        owned = self._owned_ids()
        full = self._full or self.member_epoch == JOIN_EPOCH
        carries = full or owned != self._sent_owned
        c = self.config
        body = {
            "group_id": c.group_id,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            # Sent every time, as the Java client does: the coordinator finds a static member by it.
            "instance_id": c.group_instance_id,
            "rack_id": None,
            "rebalance_timeout": c.rebalance_timeout_ms if full else -1,
            "subscribed_topic_names": c.topics if full and not c.topic_regex else None,
            "subscribed_topic_regex": c.topic_regex if full and c.topic_regex else None,
            "server_assignor": c.server_assignor if full else None,
            "topic_partitions": _by_topic_id(owned) if carries else None,
        }
        self._heartbeat_inflight = True
        self._heartbeat_soon = False
        self._full = False
        if carries:
            self._sent_owned = owned
        self.send(now, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, body, self.coordinator.broker,
                  CoordinatorLookup.LANE, lambda r, e, t, p: self._on_heartbeat(r, e, t, p, owned if carries else None))

    def _on_heartbeat(self, response: Any, error: ErrorCode, now: Millis, pending: Pending,
                      carried: Owned | None) -> None:
        self._heartbeat_inflight = False
        if self.state not in _MEMBER:
            return
        if error == ErrorCode.none:
            self._heartbeat_ok_sent = pending.sent_at
            self.member_epoch = response.member_epoch
            interval = int(response.heartbeat_interval.total_seconds() * 1000)
            self.heartbeat_interval_ms = interval if interval > 0 else self.heartbeat_interval_ms
            if carried is not None:
                self._acknowledged = carried
            if response.assignment is not None:
                self._new_target(pending.sent_at, response.assignment.topic_partitions)
            elif self.target is None:
                self._new_target(pending.sent_at, ())  # a join answered without one: nothing yet
            waiting, self._after_heartbeat = self._after_heartbeat, []
            for work in waiting:
                work(now)
            self._reconcile(now)
            if self.state in _MEMBER and not self._heartbeat_inflight:
                if self._heartbeat_soon:
                    self._heartbeat(now)
                else:
                    self.after("heartbeat", now + self.heartbeat_interval_ms, self._heartbeat)
        elif error in FENCED:
            self._fence(now, error)
        elif error in COORDINATOR_MOVED or error in TRANSPORT or error.retriable:
            if error in COORDINATOR_MOVED or error in TRANSPORT:
                self.coordinator.lost(now)
            # The coordinator may or may not have seen it: the next one says everything again.
            self._full = True
            self._sent_owned = None
            self.after("heartbeat", now + self.retry_backoff_ms, self._heartbeat)
        else:
            # FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR,
            # INVALID_REQUEST, UNSUPPORTED_VERSION...: the Java client fails with them too.
            self._fail_fatally(now, error)

    def _new_target(self, asked: Millis, topic_partitions: Any) -> None:
        self.target = {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions}
        self._target_asked = asked
        for tp in self._owned():
            name, p = tp
            topic_id = self._topic_ids.get(name)
            if p in self.target.get(topic_id, ()):
                self._unwanted_since.pop(tp, None)
            else:
                self._unwanted_since.setdefault(tp, asked)

    def _fence(self, now: Millis, error: ErrorCode) -> None:
        """The coordinator no longer counts it a member (at this epoch): lose all, join again."""
        self.observe(now, "fenced", generation=self.member_epoch, error=error_name(error))
        epoch = self.member_epoch
        self._lose(now)
        self.member_epoch = JOIN_EPOCH
        self.target = None
        self._sent_owned = self._acknowledged = None
        self._full = True
        self._after_heartbeat.clear()
        self._to(_S.JOINING)
        self.observe(now, "rebalance_start", generation=epoch, detail={"reason": "fenced"})
        self._heartbeat(now)

    def _lose(self, now: Millis) -> None:
        """Every partition gone without a commit (Kafka's onPartitionsLost)."""
        self._round += 1
        self._revocation = None
        lost = self._owned()
        asked = min((self._unwanted_since[tp] for tp in lost if tp in self._unwanted_since), default=None)
        self._lose_all(now)
        self._unwanted_since.clear()
        if lost:
            self._observe_assignment(now, "lost", lost, heartbeat_answered_sent_ms=self._heartbeat_ok_sent,
                                     revocation_asked_ms=asked)

    # -- reconciliation (Kafka's ConsumerMembershipManager.maybeReconcile) ---------------------------

    def _reconcile(self, now: Millis) -> None:
        """Move what it owns towards the coordinator's assignment: revoke, then take, then acknowledge."""
        if self.state not in _MEMBER or self._revocation is not None or self.target is None:
            return
        wanted, unresolved = self._resolve(self.target)
        if unresolved and not self._awaiting_names:
            self._awaiting_names = True
            self.metadata.refresh(now, ids=sorted(unresolved, key=str), then=self._names_arrived)
        owned = self._owned()
        revoke, add = owned - wanted, wanted - owned
        if revoke or add or unresolved:
            self._reconciling(now)
        if revoke:
            self._revoke(now, revoke)
            return  # then take what is new, against the target of then
        if add:
            self._take(now, add)
        if self._owned_ids() != self._acknowledged:
            if self.state is not _S.ACKNOWLEDGING:
                self._to(_S.ACKNOWLEDGING)
            self._acknowledge(now)
        elif not unresolved and self.state is not _S.STABLE:
            self._stable(now)

    def _resolve(self, target: dict[Any, frozenset[int]]) -> tuple[set[TP], set[Any]]:
        """The target by topic name, and the topic ids Metadata has not named yet."""
        wanted: set[TP] = set()
        unresolved: set[Any] = set()
        for topic_id, partitions in target.items():
            name = self.metadata.names.get(topic_id)
            if name is None:
                unresolved.add(topic_id)
                continue
            self._topic_ids[name] = topic_id
            wanted.update((name, p) for p in partitions)
        return wanted, unresolved

    def _names_arrived(self, now: Millis) -> None:
        self._awaiting_names = False
        if self.target is not None and self._resolve(self.target)[1]:
            self.after("reconcile", now + self.retry_backoff_ms, self._reconcile)  # not there yet: look again
        else:
            self._reconcile(now)

    def _reconciling(self, now: Millis) -> None:
        if self.state is _S.STABLE:
            self.observe(now, "rebalance_start", generation=self.member_epoch, detail={"reason": "assignment"})
        if self.state is not _S.RECONCILING:
            self._to(_S.RECONCILING)

    def _revoke(self, now: Millis, tps: set[TP]) -> None:
        """Hand nothing more over from `tps`, commit their positions, then give them up (whatever
        the commit's answer but a stale epoch: a failed commit only means their records are read
        again), then reconcile on."""
        self._revocation = tps
        self._revoking |= tps
        current = self._round

        def committed(t: Millis) -> None:
            if current != self._round:
                return  # fenced or leaving meanwhile: those partitions were lost or left already
            self._revocation = None
            self._drop(tps)
            for tp in tps:
                self._unwanted_since.pop(tp, None)
            self._observe_assignment(t, "revoked", tps)
            self._reconcile(t)

        # Unlike a classic member's, this commit waits for the coordinator if it is being looked
        # up: the partitions are not given up before it (the coordinator's rebalance timeout bounds it).
        self.coordinator.then(now, lambda t: self._commit(t, then=committed, only=tps))

    def _take(self, now: Millis, tps: set[TP]) -> None:
        self.assignment = _by_name(self._owned() | tps)
        self._observe_assignment(now, "assigned", tps)
        self._start_positions(now, sorted(tps))
        if self.config.commit_interval_ms and not self.has_timer("commit"):
            self.after("commit", now + self.config.commit_interval_ms, self._auto_commit)

    def _acknowledge(self, now: Millis) -> None:
        """Tell the coordinator what it owns now: at once, or as soon as the heartbeat in flight answers."""
        if not self._heartbeat_inflight:
            self._heartbeat(now)
        elif self._sent_owned != self._owned_ids():
            self._heartbeat_soon = True

    def _stable(self, now: Millis) -> None:
        self._to(_S.STABLE)
        self.reconciliations += 1
        self.observe(now, "rebalance_end", generation=self.member_epoch, detail={"assignment": _by_name(self._owned())})

    # -- leaving ----------------------------------------------------------------------------------------

    def leave(self, now: Millis) -> None:
        """Commit what was read, give every partition up, heartbeat at epoch -1 (-2), stop."""
        if self.state is _S.LEAVING or self.state is _S.STOPPED:
            return
        for name in ("heartbeat", "commit", "reconcile"):
            self.cancel(name)
        self._to(_S.LEAVING)
        self._round += 1
        self._revocation = None
        self.after("leave", now + self.config.leave_timeout_ms, self._leave_timed_out)
        if self.coordinator.broker is None and self.member_epoch == JOIN_EPOCH:
            self._stop(now)  # it never reached a coordinator, or lost it while joining: nobody to tell
            return
        # Even a member still joining says it leaves (as the Java client does): its join may have
        # been taken, and the partitions it was given would wait for its session to run out.
        self._revoking = set(self.positions)  # nothing more is handed over
        self.coordinator.then(now, lambda t: self._commit(t, then=self._send_leave))

    def _send_leave(self, now: Millis) -> None:
        if self.state is not _S.LEAVING:
            return
        owned = self._owned()
        self._drop(owned)
        if owned:
            self._observe_assignment(now, "revoked", owned)
        if self.coordinator.broker is None:
            self._stop(now)
            return
        c = self.config
        body = {"group_id": c.group_id, "member_id": self.member_id,
                "member_epoch": STATIC_LEAVE_EPOCH if c.group_instance_id else LEAVE_EPOCH,
                "instance_id": c.group_instance_id, "rack_id": None, "rebalance_timeout": -1,
                "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
                "topic_partitions": None}
        self.send(now, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, body, self.coordinator.broker,
                  CoordinatorLookup.LANE, lambda r, e, t, p: self._stop(t), timeout_ms=self.config.leave_timeout_ms)

    def _leave_timed_out(self, now: Millis) -> None:
        self._lose(now)
        self._stop(now)

    def _stop(self, now: Millis) -> None:
        if self.state is not _S.STOPPED:
            self._to(_S.STOPPED)
        self.stopped = True
        self._timers.clear()

    def _fail_fatally(self, now: Millis, error: ErrorCode) -> None:
        self.fatal = error
        self._lose(now)
        self.observe(now, "member_stop", detail={"reason": error_name(error)})
        self._stop(now)

    # -- what ConsumedPartitions asks (classic_positions.py) ------------------------------------------

    def _reading(self) -> bool:
        return self.state in _MEMBER

    def _may_fetch(self) -> bool:
        return self.state in _MEMBER  # partitions being revoked are skipped one by one (_revoking)

    def _may_auto_commit(self) -> bool:
        return self.state in _MEMBER and self.member_epoch > JOIN_EPOCH

    def _offset_fetch_request(self, topics: dict[str, list[int]]) -> tuple[int, dict[str, Any]]:
        return 9, {"groups": [{"group_id": self.config.group_id, "member_id": self.member_id,
                               "member_epoch": self.member_epoch,
                               "topics": [{"name": t, "partition_indexes": ps} for t, ps in sorted(topics.items())]}],
                   "require_stable": True}

    def _offset_fetch_topics(self, response: Any) -> Any:
        group = response.groups[0] if response.groups else None
        return group.topics if group is not None and group.error_code == ErrorCode.none else None

    def _commit_refused(self, now: Millis, errors: set[ErrorCode], offsets: dict[TP, int], generation: int,
                        then: Any) -> bool:
        if ErrorCode.stale_member_epoch in errors and self.state in _MEMBER:
            self._after_heartbeat.append(lambda t: self._commit(t, then, only=set(offsets)))
            return True
        return False

    def _commit_failed(self, now: Millis, errors: set[ErrorCode], generation: int) -> None:
        pass  # a fenced member hears it from its next heartbeat, which says what to do

    # -- what it owns -------------------------------------------------------------------------------------

    def _owned(self) -> set[TP]:
        return {(t, p) for t, ps in self.assignment.items() for p in ps}

    def _owned_ids(self) -> Owned:
        return frozenset((self._topic_ids[t], p) for t, ps in self.assignment.items() for p in ps)

    def _observe_assignment(self, now: Millis, reason: str, changed: set[TP], **extra: Any) -> None:
        self.observe(now, "assignment", generation=self.member_epoch,
                     detail={"assignment": _by_name(self._owned()), "reason": reason, reason: _by_name(changed),
                             **extra})


def _by_name(tps: set[TP]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        out.setdefault(t, []).append(p)
    return out


def _by_topic_id(owned: Owned) -> list[dict[str, Any]]:
    grouped: dict[Any, list[int]] = {}
    for topic_id, p in sorted(owned, key=lambda x: (str(x[0]), x[1])):
        grouped.setdefault(topic_id, []).append(p)
    return [{"topic_id": t, "partitions": ps} for t, ps in grouped.items()]
