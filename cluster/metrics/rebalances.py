"""Group rebalances, derived by watching groups around the operations that move them.

The group coordinator actor shows this watch a group before an operation (JoinGroup, SyncGroup,
heartbeats, leaves) and again once it is answered, so the coordinator's domain code stays as it is.
A completed rebalance is a new generation (classic) or group epoch (share, consumer): counted once per step,
however many members saw it. A classic rebalance's duration runs from the first time the group was
seen preparing (or a new group's first join) to the first time its new generation was seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster.metrics.registry import REGISTRY, Registry

_PREPARING = "PreparingRebalance"
_PROTOCOL = {
    "classic": (("protocol", "classic"),),
    "share": (("protocol", "share"),),
    "consumer": (("protocol", "consumer"),),
}


@dataclass(slots=True)
class Seen:
    generation: int
    preparing_since: float | None  # clock seconds; None: not rebalancing
    # Seen in PreparingRebalance itself (a new group's first join answers MEMBER_ID_REQUIRED from
    # an Empty group: that Empty does not end the rebalance about to start).
    seen_preparing: bool = False


class RebalanceWatch:
    def __init__(self, registry: Registry = REGISTRY, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.clock = clock
        self.seen: dict[str, Seen] = {}

    def before_join(self, group_id: str, group: Any) -> None:
        """A JoinGroup is about to run: a group that does not exist yet starts its first rebalance."""
        if group is None:
            if group_id not in self.seen:
                self.seen[group_id] = Seen(0, self.clock())
            return
        self.observe(group_id, group)

    def observe(self, group_id: str, group: Any) -> None:
        if group is None:
            self.seen.pop(group_id, None)  # deleted (or moved away): a new one starts afresh
            return
        protocol = group.group_type
        if protocol == "classic":
            generation, preparing = group.generation_id, group.state.value == _PREPARING
        elif protocol in ("share", "consumer"):
            # KIP-848 and KIP-932 groups never stop: a rebalance is a group epoch, without a duration.
            generation, preparing = group.group_epoch, False
        else:
            return
        seen = self.seen.get(group_id)
        if seen is None:
            # First seen (after a load, say): what happened before is not ours to count.
            self.seen[group_id] = Seen(generation, self.clock() if preparing else None, preparing)
            return
        if generation > seen.generation:
            self.registry.inc("group_rebalances", _PROTOCOL[protocol], generation - seen.generation)
            if seen.preparing_since is not None:
                self.registry.observe("group_rebalance_duration_ms", (self.clock() - seen.preparing_since) * 1000, _PROTOCOL[protocol])
            seen.generation = generation
            seen.preparing_since, seen.seen_preparing = (self.clock(), True) if preparing else (None, False)
        elif generation < seen.generation:
            seen.generation = generation  # deleted and created again between two looks
            seen.preparing_since, seen.seen_preparing = (self.clock(), True) if preparing else (None, False)
        elif preparing:
            if seen.preparing_since is None:
                seen.preparing_since = self.clock()
            seen.seen_preparing = True
        elif seen.seen_preparing and group.state.value == "Empty":
            seen.preparing_since, seen.seen_preparing = None, False  # every member left before it completed
