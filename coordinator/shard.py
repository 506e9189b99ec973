"""The group coordinator shard: everything one `__consumer_offsets` partition holds.

Kafka's GroupCoordinatorShard. Operations return records and a response; `replay` is the
only code that changes state, so loading a partition after failover is replaying its log.
"""

from __future__ import annotations

from typing import Any

from coordinator.clock import Clock
from coordinator.codec import Record
from coordinator.timer import Timer


class GroupCoordinatorShard:
    def __init__(self, tp: tuple[str, int], clock: Clock, timer: Timer) -> None:
        self.tp = tp
        self.clock = clock
        self.timer = timer

    def replay(self, record: Record) -> None:
        raise TypeError(f"group coordinator cannot replay {type(record.key).__name__}")

    def on_loaded(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {}
