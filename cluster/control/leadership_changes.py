"""Every change of a partition's leadership the controller made, as facts a run can be judged by.

A change has three instants (wall-clock seconds, as the experiment's event log):
- `began`: the controller is about to bump the partition's leader epoch; from here on the new
  leader may serve (once it has loaded), so an answer that arrived after it may be the new one's;
- `released`: from here on the old leader serves nothing asked afterwards. For a failover that is
  `began` (the controller moves a dead actor's partitions only once Ray has seen it die); for a
  move, when the old leader has unloaded the partition; for an actor taken as dead because its node
  left the cluster, when the new leader has loaded it (such an actor may answer for a moment after
  its node is gone, docs/scale-out.md);
- `loaded`: the new leader has loaded the partition (None if that load failed: the controller
  retries it at the same epoch).
So two answers can come from the old and the new leader only if the first was asked before
`released` and the second arrived after `began`: the invariant checker's excuse for a share
record handed out again with the same delivery count (loadtest/check/acquisition.py).

Causes, as the operator sees them: `startup` (a cluster's first placement), `created` (a topic or
partitions were created), `failover` (its leader died), `node-loss` (its leader's Ray node left),
`balance` (the controller evened out the partitions per node, e.g. after a node joined),
`operator-move` (`raygroups move`), `placement` (a partition without a leader got one, e.g. once a
replacement actor came up), `unavailable` (its leader died and no actor of its kind is left).
"""

from __future__ import annotations

import enum
import uuid
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any


class Cause(str, enum.Enum):
    STARTUP = "startup"
    CREATED = "created"
    FAILOVER = "failover"
    NODE_LOSS = "node-loss"
    BALANCE = "balance"
    OPERATOR_MOVE = "operator-move"
    PLACEMENT = "placement"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    topic: str
    partition: int
    leader_epoch: int
    actor: str | None  # the new leader; None: the partition has none (`unavailable`)
    previous: str | None  # the old leader, None when it had none
    cause: Cause
    began: float
    released: float
    loaded: float | None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cause"] = self.cause.value
        return out


class LeadershipChanges:
    """The changes in the order they were made, the newest `capacity` of them.

    Readers page with `since(index)`; indexes count from this controller's start, and `incarnation`
    tells a reader that the controller restarted (a restarted cluster counts from 0 again).
    """

    def __init__(self, capacity: int = 100_000) -> None:
        self.incarnation = uuid.uuid4().hex
        self._changes: deque[LeadershipChange] = deque(maxlen=capacity)
        self._first = 0  # the index of the oldest change kept

    def record(self, change: LeadershipChange) -> None:
        if len(self._changes) == self._changes.maxlen:
            self._first += 1
        self._changes.append(change)

    def since(self, index: int) -> dict[str, Any]:
        """{incarnation, next (the index to ask from next), dropped (changes older than the
        capacity that this reader missed), changes (as dicts)}."""
        start = max(index, self._first)
        changes = [c.to_dict() for c in list(self._changes)[start - self._first:]]
        return {"incarnation": self.incarnation, "next": self._first + len(self._changes),
                "dropped": start - index if index < self._first else 0, "changes": changes}

    def __len__(self) -> int:
        return len(self._changes)

    def __iter__(self):
        return iter(list(self._changes))
