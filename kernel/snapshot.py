"""What a batch's replay touched, as it was before: the revert of a failed write (Kafka's
SnapshottableCoordinator, with the snapshot taken per touched key instead of per offset).

A shard calls `save(key, copy)` in replay before it changes the state behind `key`; only the first
save of a key in a batch keeps its copy. The runtime brackets every batch: `begin` before the first
operation, then `commit` once the batch is durable, or `rollback` (the copies, for the shard to put
back) when the write failed. Loading replays with no batch open, so nothing is kept.

`snapshot_of(shard)` is what the runtime holds per partition: the shard's own keyed snapshot, or, for
a shard that keeps none, a copy of its whole state. Either way a failed write is undone in memory;
the log is never reread.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from typing import Any, Protocol


class TouchedKeys:
    __slots__ = ("_saved", "_open")

    def __init__(self) -> None:
        self._saved: dict[Hashable, Any] = {}
        self._open = False

    def save(self, key: Hashable, copy: Callable[[], Any]) -> None:
        if self._open and key not in self._saved:
            self._saved[key] = copy()

    @property
    def open(self) -> bool:
        """A batch is applied but not yet written (what the shard holds is ahead of its log)."""
        return self._open

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


class ShardSnapshot(Protocol):
    """How the runtime brackets a batch on one shard: the single revert path of a failed write."""

    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def revert(self) -> None: ...


class KeyedSnapshot:
    """A shard's own snapshot: replay saves each key it changes in `shard.touched`, `shard.restore`
    puts them back. Every production shard keeps one, since it costs only what a batch touches."""

    __slots__ = ("_shard",)

    def __init__(self, shard: Any) -> None:
        self._shard = shard

    def begin(self) -> None:
        self._shard.touched.begin()

    def commit(self) -> None:
        self._shard.touched.commit()

    def revert(self) -> None:
        self._shard.restore(self._shard.touched.rollback())


class WholeStateSnapshot:
    """For a small shard that saves nothing itself (test shards): its attributes, copied when a batch
    opens. Containers are deep-copied; anything else (a clock, a config) is kept as the same object."""

    __slots__ = ("_shard", "_saved")

    def __init__(self, shard: Any) -> None:
        if not hasattr(shard, "__dict__"):
            raise TypeError(f"{type(shard).__name__} keeps no snapshot (touched/restore) and has no __dict__ to copy")
        self._shard = shard
        self._saved: dict[str, Any] | None = None

    def begin(self) -> None:
        self._saved = {
            name: copy.deepcopy(value) if isinstance(value, _CONTAINERS) else value
            for name, value in vars(self._shard).items()
        }

    def commit(self) -> None:
        self._saved = None

    def revert(self) -> None:
        saved, self._saved = self._saved, None
        if saved is not None:
            state = vars(self._shard)
            state.clear()
            state.update(saved)


_CONTAINERS = (dict, list, set)


def snapshot_of(shard: Any) -> ShardSnapshot:
    if hasattr(shard, "touched") and hasattr(shard, "restore"):
        return KeyedSnapshot(shard)
    return WholeStateSnapshot(shard)
