"""What a batch's replay touched, as it was before: the revert of a failed write (Kafka's
SnapshottableCoordinator, with the snapshot taken per touched key instead of per offset).

A shard calls `save(key, copy)` in replay before it changes the state behind `key`; only the first
save of a key in a batch keeps its copy. The runtime brackets every batch: `begin` before the first
operation, then `commit` once the batch is durable, or `rollback` (the copies, for the shard to put
back) when the write failed. Loading replays with no batch open, so nothing is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class TouchedKeys:
    __slots__ = ("_saved", "_open")

    def __init__(self) -> None:
        self._saved: dict[Hashable, Any] = {}
        self._open = False

    def save(self, key: Hashable, copy: Callable[[], Any]) -> None:
        if self._open and key not in self._saved:
            self._saved[key] = copy()

    def begin(self) -> None:
        self._saved = {}
        self._open = True

    def commit(self) -> None:
        self._saved = {}
        self._open = False

    def rollback(self) -> dict[Hashable, Any]:
        """The state before the batch of every key it touched (the shard restores them)."""
        saved, self._saved = self._saved, {}
        self._open = False
        return saved
