"""Consumer-protocol members (KIP-848) as the composed coordinator world drives them: a sans-I/O
client that behaves as Kafka's consumer does (its ConsumerMembershipManager and
ConsumerHeartbeatRequestManager.HeartbeatState), and what it was told.

- It joins at epoch 0 with its own member id (ConsumerGroupHeartbeat v1), its rebalance timeout,
  its subscription and an empty list of owned partitions.
- It heartbeats with the epoch it was last told. The partitions it owns go with a heartbeat only
  when they changed since the coordinator last heard them; after a failed or lost request the next
  heartbeat is full (rebalance timeout, subscription, owned partitions), as Kafka's
  HeartbeatState.reset() makes it, so the answer carries the assignment again.
- An assignment it is told becomes its target; it reconciles later, on a step of its own with no
  request in flight: it revokes what the target no longer holds, takes what it adds, and reports
  the new set at once. It may take its time (a slow revocation callback), heartbeating meanwhile
  with what it still owns.
- Kafka's window, kept: a heartbeat sent while it reconciles reports what it owns so far (a full
  one after a failure always does); if the coordinator applies it, it may let go of partitions
  of the pending target that the member did not list (a newer target gives them to another
  member), and if that answer is lost the member still takes them when its reconciliation
  completes (AbstractMembershipManager.revokeAndAssign does not look back). Its next heartbeat is
  fenced (the previous epoch, owning more than it is assigned) or confirms them. What it takes
  from a target while such a heartbeat is unanswered is `unconfirmed` until an answer comes.
- FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: it gives up everything and rejoins at epoch 0 with the
  same member id (a new incarnation of the client).
- It may leave with epoch -1 (having revoked everything first), stop heartbeating for a while (its
  session may expire meanwhile), or lose an answer (a request timeout: handled as a failure).

`owned` is what it believes it owns: only what it was told, and not revoked since. The invariants
(consumer_checks.py) hold those beliefs against the coordinator's durable state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from coordinator.consumer.messages import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

TopicPartition = tuple[UUID, int]
# Kafka's max.poll.interval.ms, which the consumer sends as its rebalance timeout: short here, so
# that a slow revocation is sometimes fenced.
REBALANCE_TIMEOUT_MS = 12_000
# Errors after which the client retries with a full heartbeat (Kafka's retriable heartbeat errors,
# and UNKNOWN_SERVER_ERROR, which its heartbeat manager also retries).
RETRIABLE = frozenset({
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.unknown_server_error,
})


class Phase(enum.Enum):
    JOINING = "joining"  # the next heartbeat joins at epoch 0
    MEMBER = "member"  # joined: heartbeats with its epoch
    LEFT = "left"  # left with epoch -1; rejoins when the schedule says


@dataclass
class Sent:
    kind: str  # "join", "heartbeat" (an acknowledgement too) or "leave"
    request: ConsumerGroupHeartbeatRequest
    owned: frozenset[TopicPartition] | None  # the owned partitions it carried, None if it did not say


@dataclass
class ConsumerMember:
    name: str
    group: str
    member_id: str
    topics: tuple[str, ...] | None
    regex: str | None = None
    assignor: str | None = None
    phase: Phase = Phase.JOINING
    epoch: int = JOIN_GROUP_MEMBER_EPOCH
    owned: frozenset[TopicPartition] = frozenset()
    target: frozenset[TopicPartition] | None = None  # told, not reconciled yet
    reported: frozenset[TopicPartition] | None = None  # the owned set the coordinator last heard
    full: bool = True
    paused_until: int = -1
    doubtful: bool = False  # a heartbeat reported what it owns during a reconciliation, and got no answer
    unconfirmed: frozenset[TopicPartition] = frozenset()  # taken while doubtful, not confirmed yet
    window_seen: bool = False  # (what the checks found of `unconfirmed`: see consumer_checks.py)
    outstanding: Any = None  # the request's task
    sent: Sent | None = None
    counts: dict[str, int] = field(default_factory=dict)

    # -- what it sends ---------------------------------------------------------------------------

    def join(self) -> Sent:
        request = ConsumerGroupHeartbeatRequest(
            self.group, self.member_id, JOIN_GROUP_MEMBER_EPOCH,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, subscribed_topic_names=self.topics,
            subscribed_topic_regex=self.regex, server_assignor=self.assignor, topic_partitions=(),
            client_id=self.name,
        )
        return Sent("join", request, frozenset())

    def heartbeat(self, stale: bool = False) -> Sent:
        """`stale`: the heartbeat carries an epoch above its own, as a client that lost track of its
        epoch would: the coordinator must fence it (an epoch just below may be the previous one,
        which the coordinator accepts)."""
        full = self.full
        owned = self.owned if full or self.owned != self.reported else None
        request = ConsumerGroupHeartbeatRequest(
            self.group, self.member_id, self.epoch + 1 if stale else self.epoch,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if full else -1,
            subscribed_topic_names=self.topics if full else None,
            subscribed_topic_regex=self.regex if full else None,
            server_assignor=self.assignor if full else None,
            topic_partitions=None if owned is None else as_assignment(owned),
            client_id=self.name,
        )
        return Sent("heartbeat", request, owned)

    def leave(self) -> Sent:
        """Kafka's consumer revokes everything (its callbacks, its last commit), then leaves."""
        self.phase, self.epoch = Phase.LEFT, JOIN_GROUP_MEMBER_EPOCH
        self._drop()
        request = ConsumerGroupHeartbeatRequest(self.group, self.member_id, LEAVE_GROUP_MEMBER_EPOCH, client_id=self.name)
        return Sent("leave", request, None)

    # -- what it does with what it was told --------------------------------------------------------

    def reconcile(self) -> tuple[frozenset[TopicPartition], frozenset[TopicPartition]]:
        """Revoke what the target no longer holds, then take what it adds: (revoked, added)."""
        assert self.target is not None
        revoked, added = self.owned - self.target, self.target - self.owned
        self.owned, self.target = self.target, None
        self.unconfirmed = (self.unconfirmed | added if self.doubtful else self.unconfirmed) & self.owned
        return revoked, added

    def on_failure(self, sent: Sent) -> None:
        """The request failed, or its answer was lost (a timeout): the next heartbeat is full."""
        self.full = True
        if sent.owned is not None and self.target is not None:
            self.doubtful = True

    def _drop(self) -> None:
        """Give up everything (fenced, or leaving)."""
        self.owned, self.target, self.reported, self.full = frozenset(), None, None, True
        self.doubtful, self.unconfirmed, self.window_seen = False, frozenset(), False

    def on_answer(self, sent: Sent, response: ConsumerGroupHeartbeatResponse) -> str | None:
        """Take a heartbeat's answer; returns what went wrong on the coordinator's side as the client
        sees it (an epoch that went back, an error it cannot have caused), else None."""
        code = response.error_code
        if sent.kind == "leave":
            return None  # gone whatever the answer (UNKNOWN_MEMBER_ID if it was fenced meanwhile)
        if code in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            if sent.kind == "join" and code == ErrorCode.fenced_member_epoch:
                # KAFKA-19233 (Kafka 4.2): epoch 0 is a rejoin whatever epoch the coordinator still
                # holds for the member; before, it was fenced again until its session expired.
                return f"{self.name} was fenced rejoining at epoch 0: {response.error_message}"
            self._count("fenced" if code == ErrorCode.fenced_member_epoch else "unknown member")
            self.phase, self.epoch = Phase.JOINING, JOIN_GROUP_MEMBER_EPOCH
            self._drop()
            return None
        if code in RETRIABLE:
            self.on_failure(sent)
            return None
        if code != ErrorCode.none:
            return f"{self.name} was answered {code.name}: {response.error_message}"
        if sent.kind == "join":
            self._count("joined")
            self.phase = Phase.MEMBER
        elif response.member_epoch < self.epoch:
            return f"{self.name}'s epoch went back from {self.epoch} to {response.member_epoch}"
        self.epoch = response.member_epoch
        self.full = False
        # Answered: the heartbeat carried all it owns (a full one after the failure), and it was not
        # fenced, so the coordinator holds all of it for the member.
        self.doubtful, self.unconfirmed, self.window_seen = False, frozenset(), False
        if sent.owned is not None:
            self.reported = sent.owned
        if response.assignment is not None:
            told = frozenset((t, p) for t, ps in response.assignment for p in ps)
            self.target = told if told != self.owned else None
        return None

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1


def as_assignment(partitions: frozenset[TopicPartition]) -> tuple[tuple[UUID, tuple[int, ...]], ...]:
    by_topic: dict[UUID, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    return tuple((t, tuple(ps)) for t, ps in sorted(by_topic.items()))


def show(partitions: frozenset[TopicPartition] | None, names: dict[UUID, str]) -> str:
    """Partitions for the trace: orders-0,events-2."""
    if partitions is None:
        return "-"
    return ",".join(f"{names.get(t, t)}-{p}" for t, p in sorted(partitions, key=lambda tp: (names.get(tp[0], ""), tp[1]))) or "{}"
