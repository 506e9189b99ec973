"""The leadership changes the cluster recorded during a run (leadership.parquet), as the checks use them.

Each is a fact the controller wrote when it made the change (cluster/control/leadership_changes.py), so a
check need not guess from the fault schedule when a partition changed hands: a killed actor may
answer for a while after its kill was asked for, and a balance move or a node that joins moves
partitions no fault names. Times are int64 microseconds, as the event rows'.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

# Changes that move no partition a client was using: the first placement of a cluster and of a
# new topic. (A restarted cluster's placement is a `startup` too; the checks that care look at
# the restart fault.)
FIRST_PLACEMENT = ("startup", "created")


@dataclass(frozen=True, slots=True)
class LeaderChange:
    time: int  # began: the controller was about to bump the leader epoch
    topic: str
    partition: int
    leader_epoch: int
    actor: str | None
    previous: str | None
    cause: str
    released: int  # the old leader serves nothing asked from here on
    loaded: int | None  # the new leader had loaded it (None: that load failed and was retried)

    @property
    def tp(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def settled(self) -> int:
        """When the new leader served: its load, else (a failed load) the change's start."""
        return self.loaded if self.loaded is not None else self.released

    def straddles(self, first_asked: int, second_arrived: int) -> bool:
        """Whether two answers can come from the old and the new leader: the first asked for while
        the old one could still serve, the second arriving after the change began."""
        return first_asked < self.released and second_arrived > self.time


def by_partition(changes: list[LeaderChange]) -> dict[str, list[LeaderChange]]:
    """"topic-partition" -> its changes, by time."""
    out: dict[str, list[LeaderChange]] = defaultdict(list)
    for change in changes:
        out[change.tp].append(change)
    return dict(out)
