"""The follower's side of a replicated partition: what to fetch next and what to truncate.

Kafka's AbstractFetcherThread / ReplicaFetcherThread for one partition, as a plain object:
- `start_fetch()` is the next fetch: from the log end, with the epoch of the last batch held
  (KIP-320's lastFetchedEpoch) and the leader epoch it follows;
- `truncation_offset` turns the leader's diverging epoch into the offset to cut the log at
  (getOffsetTruncationState, KIP-101/KIP-279): the records past it were written under a leader
  the current one does not descend from, and were never committed;
- `appended` and `truncated` keep the epoch cache and log end in step with the log;
- the high watermark is the leader's, capped at this log's end.

A follower follows one leader epoch and has one fetch in flight (`start_fetch`), as Kafka's
fetcher has per partition; only the answer to that fetch is taken, once (`take`). An answer to an
earlier fetch, one sent again after a timeout, or a duplicate a retry brought, is dropped: a
diverging answer applied a second time, after the log had been refilled to the same offset and
the follower had rejoined the ISR, would cut records below the high watermark.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.replication.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache


@dataclass(frozen=True, slots=True)
class FetchPosition:
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    sequence: int = 0  # which fetch of this follower it is: 0 for a position not (yet) sent


class FollowerState:
    def __init__(
        self,
        replica_id: int,
        leader: int,
        leader_epoch: int,
        epochs: LeaderEpochCache,
        log_start_offset: int,
        log_end_offset: int,
        high_watermark: int,
    ) -> None:
        self.replica_id = replica_id
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.epochs = epochs
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.high_watermark = min(high_watermark, log_end_offset)
        self._sequence = 0
        self._in_flight: FetchPosition | None = None

    def position(self) -> FetchPosition:
        """Where the next fetch would start (not sent)."""
        return FetchPosition(self.log_end_offset, self.epochs.latest_epoch, self.leader_epoch)

    def start_fetch(self) -> FetchPosition:
        """The next fetch, now the one in flight; an earlier one's answer will not be taken."""
        self._sequence += 1
        self._in_flight = FetchPosition(self.log_end_offset, self.epochs.latest_epoch, self.leader_epoch, self._sequence)
        return self._in_flight

    def take(self, sent: FetchPosition) -> bool:
        """Whether to apply the answer to `sent`: it answers the fetch in flight, whose position
        still holds; then no fetch is in flight (a second copy of the answer is dropped)."""
        if sent != self._in_flight or sent.current_leader_epoch != self.leader_epoch \
                or sent.fetch_offset != self.log_end_offset:
            return False
        self._in_flight = None
        return True

    def truncation_offset(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        """Where to cut the log on the leader's diverging epoch (epoch, its end offset there).

        Kafka's getOffsetTruncationState: the leader knows nothing of the epoch, cut to the high
        watermark; this log has the epoch, cut at the earlier of the two ends; this log knows only
        an earlier epoch, cut at that epoch's end here, and the next fetch asks again."""
        if diverging_end_offset == UNDEFINED_OFFSET:
            return min(self.high_watermark, self.log_end_offset)
        if diverging_epoch == UNDEFINED_EPOCH:
            return min(diverging_end_offset, self.log_end_offset)
        epoch, end_offset = self.epochs.end_offset_for(diverging_epoch, self.log_end_offset)
        if epoch == UNDEFINED_EPOCH:
            return min(diverging_end_offset, self.log_end_offset)
        if epoch != diverging_epoch:
            return min(end_offset, self.log_end_offset)
        return min(end_offset, diverging_end_offset, self.log_end_offset)

    def truncated(self, end_offset: int) -> None:
        """The log was cut to `end_offset`."""
        self._in_flight = None
        self.epochs.truncate_from_end(end_offset)
        self.log_end_offset = end_offset
        self.high_watermark = min(self.high_watermark, end_offset)

    def appended(self, batches: list[tuple[int, int, int]], leader_high_watermark: int) -> None:
        """Batches (partition leader epoch, base offset, last offset) appended as the leader wrote
        them (a compacted log's batches may leave gaps), then the leader's high watermark from the
        same answer."""
        for epoch, base_offset, last_offset in batches:
            if base_offset < self.log_end_offset:
                raise ValueError(f"batch at {base_offset} is below the log end {self.log_end_offset}")
            if epoch >= 0:
                self.epochs.assign(epoch, base_offset)
            self.log_end_offset = last_offset + 1
        self.high_watermark = max(min(leader_high_watermark, self.log_end_offset), self.log_start_offset)
