"""A KIP-848 consumer member's lifecycle and settings (loadtest/members/consumer.py is the member).

The states are those of Kafka's AsyncKafkaConsumer (MemberState in its ConsumerMembershipManager),
without the ones that only wait for a user's rebalance callback: this member has none, so losing
its partitions when fenced and getting ready to leave take no time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# ConsumerGroupHeartbeat's member epochs with a meaning of their own (KIP-848).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2  # a static member leaves, and the coordinator keeps its place for it


class ConsumerState(enum.Enum):
    """A member's lifecycle. Legal transitions (`TRANSITIONS`):

    JOINING        -> STABLE           the join was answered with nothing to reconcile
    JOINING | STABLE | ACKNOWLEDGING -> RECONCILING
                                       an assignment that differs from what the member owns
    RECONCILING    -> ACKNOWLEDGING    revoked, then took what was new: the next heartbeat says so
    RECONCILING    -> STABLE           nothing was left to change (the target came back to what it owns)
    ACKNOWLEDGING  -> STABLE           the heartbeat carrying the owned partitions was answered
    JOINING | STABLE | RECONCILING | ACKNOWLEDGING -> JOINING
                                       fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): every
                                       partition lost, join again at epoch 0 with the same member id
    any but STOPPED -> LEAVING -> STOPPED
                                       leave(): commit, give everything up, heartbeat epoch -1 (-2)
    any but STOPPED -> STOPPED         an error no retry fixes
    """

    JOINING = "joining"
    RECONCILING = "reconciling"
    ACKNOWLEDGING = "acknowledging"
    STABLE = "stable"
    LEAVING = "leaving"
    STOPPED = "stopped"


_S = ConsumerState
_MEMBER = (_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING)
TRANSITIONS: dict[ConsumerState, frozenset[ConsumerState]] = {
    _S.JOINING: frozenset({_S.STABLE, _S.RECONCILING, _S.JOINING}),
    _S.RECONCILING: frozenset({_S.ACKNOWLEDGING, _S.STABLE, _S.RECONCILING, _S.JOINING}),
    _S.ACKNOWLEDGING: frozenset({_S.STABLE, _S.RECONCILING, _S.JOINING}),
    _S.STABLE: frozenset({_S.RECONCILING, _S.JOINING}),
    _S.LEAVING: frozenset({_S.STOPPED}),
    _S.STOPPED: frozenset(),
}
for _state in _MEMBER:
    TRANSITIONS[_state] = TRANSITIONS[_state] | {_S.LEAVING, _S.STOPPED}


class IllegalTransition(RuntimeError):
    pass


def validate_transition(current: ConsumerState, target: ConsumerState) -> None:
    """Raise on a transition the table does not hold (changing nothing)."""
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(f"{current.name} -> {target.name}")


@dataclass(slots=True)
class ConsumerConfig:
    group_id: str
    # What it subscribes to: topic names, or (instead) an RE2 regular expression the coordinator
    # resolves against the cluster's topics (KIP-848). Names are what the checks read either way.
    topics: list[str] = field(default_factory=list)
    topic_regex: str | None = None
    server_assignor: str | None = None  # "uniform" or "range"; None: the group's default
    # How long the coordinator waits for it to revoke what it is asked to before fencing it: the
    # Java client sends its max.poll.interval.ms (300000 by default).
    rebalance_timeout_ms: int = 300_000
    commit_interval_ms: int = 5_000  # Kafka's auto.commit.interval.ms
    commit_back_to_back: bool = False  # as ClassicConfig's: benchmarks
    processing_ms: float = 0.0
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1 << 20
    group_instance_id: str | None = None
    fetch: bool = True  # False: membership only
    # leave() gives up after this long (its commit or heartbeat unanswered) and stops with its
    # partitions lost, as Kafka's close() does after its timeout; below the drivers' stop timeout
    # (10 s), so the member itself says what it lost.
    leave_timeout_ms: int = 5_000

    def __post_init__(self) -> None:
        if bool(self.topics) == bool(self.topic_regex):
            raise ValueError("a consumer subscribes to topic names or to a regular expression (one of them)")
