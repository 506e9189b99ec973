"""Classic group members as the simulation drives them: each knows what the coordinator told it.

A member has at most one request outstanding; `next_request` says what it would send now, and
`on_answer` takes the coordinator's answer (or the exception a failed write raised). What a member
was told is what the invariants hold the coordinator to.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitRequest,
    SyncGroupRequest,
)

TOPIC = "sim-topic"
PARTITIONS = 4
SESSION_TIMEOUT_MS = 6000
REBALANCE_TIMEOUT_MS = 8000


class Phase(enum.Enum):
    IDLE = "idle"  # not in the group (never joined, left, or crashed)
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"


@dataclass
class SimMember:
    name: str
    group_id: str
    phase: Phase = Phase.IDLE
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple[str, ...] = ()
    assignment: tuple[int, ...] = ()
    outstanding: object | None = None  # the request in flight
    crashed: bool = False
    log: list[str] = field(default_factory=list)

    # -- what to send --------------------------------------------------------------------------

    def join(self) -> JoinGroupRequest:
        return JoinGroupRequest(
            self.group_id, SESSION_TIMEOUT_MS, REBALANCE_TIMEOUT_MS, self.member_id, None, "consumer",
            (("range", b""),), client_id=self.name,
        )

    def sync(self) -> SyncGroupRequest:
        assignments: tuple[tuple[str, bytes], ...] = ()
        if self.leader:
            ordered = sorted(self.members)
            assignments = tuple(
                (m, bytes(p for p in range(PARTITIONS) if p % len(ordered) == i)) for i, m in enumerate(ordered)
            )
        return SyncGroupRequest(self.group_id, self.generation, self.member_id, None, "consumer", "range", assignments)

    def heartbeat(self) -> HeartbeatRequest:
        return HeartbeatRequest(self.group_id, self.generation, self.member_id)

    def commit(self, offset: int) -> OffsetCommitRequest:
        parts = tuple(CommitPartition(p, offset) for p in self.assignment)
        return OffsetCommitRequest(self.group_id, self.generation, self.member_id, None, ((TOPIC, parts),))

    def leave(self) -> LeaveGroupRequest:
        return LeaveGroupRequest(self.group_id, (LeavingMember(self.member_id),))

    # -- what it was told ------------------------------------------------------------------------

    def rejoin(self, forget_id: bool = False) -> None:
        self.phase = Phase.JOINING
        self.assignment = ()
        if forget_id:
            self.member_id = ""
            self.generation = -1

    def on_join(self, response) -> None:
        if response.error_code == ErrorCode.member_id_required:
            self.member_id = response.member_id
        elif response.error_code == ErrorCode.none:
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.leader = response.leader == response.member_id
            self.members = tuple(m.member_id for m in response.members)
            self.phase = Phase.SYNCING
        elif response.error_code == ErrorCode.unknown_member_id:
            self.rejoin(forget_id=True)

    def on_sync(self, response) -> None:
        if response.error_code == ErrorCode.none:
            self.assignment = tuple(response.assignment)
            self.phase = Phase.STABLE
        elif response.error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            self.rejoin(forget_id=response.error_code == ErrorCode.unknown_member_id)
        else:
            self.rejoin()

    def on_heartbeat(self, response) -> None:
        if response.error_code == ErrorCode.unknown_member_id:
            self.rejoin(forget_id=True)
        elif response.error_code != ErrorCode.none and self.phase is Phase.STABLE:
            self.rejoin()

    def on_failure(self) -> None:
        """The request failed (a failed write, a moved or loading partition): try again later."""
        if self.phase is Phase.SYNCING:
            self.rejoin()
