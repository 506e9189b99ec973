"""An actor as the controller tracks it: one slot's lifecycle, from spawn to death.

A worker actor (coordinator, partition leader) that dies stays DEAD: its replacement is a new actor
with a new name. A gateway is a broker as clients see it (a node id and a port), so a dead gateway's
slot is RESTARTING with a new process under the same name until it listens again.
"""

from __future__ import annotations

import enum
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kernel.lifecycle import TransitionTable, validate_transition

from cluster.calls.kinds import ActorKind
from cluster.leadership import GatewayAddress


class ActorState(str, enum.Enum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    DEAD = "dead"


TRANSITIONS: TransitionTable = {
    ActorState.READY: frozenset({ActorState.STARTING, ActorState.RESTARTING}),
    ActorState.RESTARTING: frozenset({ActorState.DEAD}),
    ActorState.DEAD: frozenset({ActorState.STARTING, ActorState.READY, ActorState.RESTARTING}),
}


@dataclass(slots=True)
class ActorEntry:
    name: str
    kind: ActorKind
    handle: Any
    state: ActorState = ActorState.STARTING
    started_at: float = field(default_factory=time.time)
    died_at: float | None = None
    node_id: str | None = None
    pid: int | None = None
    # actors that keep logs: their node's data directory (cluster/log/data_directory.py) and the
    # replica id the controller's metadata gives it
    directory_id: uuid.UUID | None = None
    replica_id: int | None = None
    # the order it was spawned in, never reused in a controller's life: the incarnation of the
    # replicas it hosts (cluster/control/replica_keeper.py)
    serial: int = 0
    # gateways only
    gateway: GatewayAddress | None = None
    # restarts that failed in a row, and when the next may be tried (monotonic seconds)
    failed_restarts: int = 0
    restart_at: float = 0.0

    @property
    def alive(self) -> bool:
        return self.state is not ActorState.DEAD

    @property
    def ready(self) -> bool:
        return self.state is ActorState.READY

    def move_to(self, target: ActorState) -> None:
        validate_transition(TRANSITIONS, self.state, target, f"actor {self.name}")
        self.state = target
