"""The leader-epoch cache: for each leader epoch, the first offset written in it.

Kafka's LeaderEpochFileCache (KIP-101, KIP-279): a follower asks the leader where its last epoch
ended and truncates what the leader never had. The cache itself is plain; a replica keeps it in
its log's leader-epoch checkpoint (cluster/log/epoch_checkpoint.py, as Kafka's file), since the
batch headers alone (`from_batches`) lose epochs once compaction has dropped or trimmed batches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epochs in increasing order with increasing start offsets (the cache keeps it so)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = []
        for entry in entries:
            self.assign(entry.epoch, entry.start_offset)

    @classmethod
    def from_batches(cls, batches: Iterable[tuple[int, int]]) -> LeaderEpochCache:
        """From (partition leader epoch, base offset) of every batch, in log order."""
        cache = cls()
        for epoch, base_offset in batches:
            if epoch >= 0:
                cache.assign(epoch, base_offset)
        return cache

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (a new leader, or a batch of a newer epoch).

        As Kafka's assign: nothing to do for the latest epoch at a later offset; otherwise entries
        that would break the order (an epoch at or above this one, or starting at or after this
        offset) go first. Returns whether the cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._entries:
            latest = self._entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
        while self._entries and (self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset): the largest epoch at or below `requested_epoch` this log knows and
        the offset where the epoch after it starts (Kafka's endOffsetFor, answered to followers'
        OffsetsForLeaderEpoch and to KIP-320's last fetched epoch).

        The latest epoch ends at the log end. An epoch above every known one is
        (UNDEFINED_EPOCH, UNDEFINED_OFFSET); one below every known one answers with itself and
        the first known epoch's start (the data before it is gone)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        floor: EpochEntry | None = None
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                if floor is None:
                    return requested_epoch, entry.start_offset
                return floor.epoch, entry.start_offset
            floor = entry
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut to `end_offset`: epochs starting at or past it are gone. A negative
        offset (undefined) changes nothing, as in Kafka."""
        if end_offset < 0:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset` (retention): the epoch holding it starts there."""
        kept = [e for e in self._entries if e.start_offset >= start_offset]
        older = [e for e in self._entries if e.start_offset < start_offset]
        if older and (not kept or kept[0].start_offset > start_offset):
            kept.insert(0, EpochEntry(older[-1].epoch, start_offset))
        self._entries = kept

    def __repr__(self) -> str:
        return "LeaderEpochCache(" + ", ".join(f"{e.epoch}@{e.start_offset}" for e in self._entries) + ")"
