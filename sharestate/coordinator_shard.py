"""The share coordinator shard: the durable share state one `__share_group_state` partition holds."""

from __future__ import annotations

from typing import Any

from coordinator.clock import Clock
from coordinator.codec import Record
from coordinator.timer import Timer


class ShareCoordinatorShard:
    def __init__(self, tp: tuple[str, int], clock: Clock, timer: Timer) -> None:
        self.tp = tp
        self.clock = clock
        self.timer = timer

    def replay(self, record: Record) -> None:
        raise TypeError(f"share coordinator cannot replay {type(record.key).__name__}")

    def on_loaded(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {}
