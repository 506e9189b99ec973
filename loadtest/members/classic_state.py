"""A classic member's lifecycle and settings (loadtest/members/classic.py is the member)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

TP = tuple[str, int]


class ClassicState(enum.Enum):
    """A member's lifecycle. Legal transitions (`TRANSITIONS`):

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
TRANSITIONS: dict[ClassicState, frozenset[ClassicState]] = {
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
        TRANSITIONS[_state] = TRANSITIONS[_state] | {_S.STOPPED} | ({_S.LEAVING} if _state is not _S.LEAVING else set())


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
