"""What a consumer reads and commits: the start position of each partition it is given
(OffsetFetch, else ListOffsets earliest), its fetches from the partitions' leaders, the records
it hands over (`delivery` observations), and its commits (`commit` observations).

`ConsumedPartitions` is mixed into the two members that read by offset: `ClassicMember`
(loadtest/members/classic.py) and the KIP-848 `ConsumerMember` (loadtest/members/consumer.py).
Each holds the state these methods use and the group protocol that calls them, and answers the
few questions where the protocols differ (the `_reading` ... `_commit_refused` hooks below): when
it may read, fetch and auto-commit, how it asks for committed offsets, and what a refused commit
means to it. Everything else, fetching and committing included, is one copy.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import iter_batches
from loadtest.members.classic_state import TP
from loadtest.members.errors import COORDINATOR_MOVED, LEADER_MOVED, TRANSPORT, error_name
from loadtest.members.lookup import CoordinatorLookup
from loadtest.members.machine import Broker, Millis, Pending


class ConsumedPartitions:
    """The member's positions, fetches and commits (the attributes are the member's)."""

    # -- where the protocols differ: each member answers ---------------------------------------------

    def _reading(self) -> bool:
        """Start positions are still worth resolving and commits still worth making (not leaving)."""
        raise NotImplementedError

    def _may_fetch(self) -> bool:
        """Fetches may go out now (the member is not giving its partitions up)."""
        raise NotImplementedError

    def _may_auto_commit(self) -> bool:
        """The auto-commit timer commits now (a classic member only when Stable)."""
        raise NotImplementedError

    def _offset_fetch_request(self, topics: dict[str, list[int]]) -> tuple[int, dict[str, Any]]:
        """(version, body) of the OffsetFetch asking for these partitions' committed offsets."""
        raise NotImplementedError

    def _offset_fetch_topics(self, response: Any) -> Any:
        """The per-topic entries of an OffsetFetch answer; None when it failed as a whole."""
        raise NotImplementedError

    def _commit_refused(self, now: Millis, errors: set[ErrorCode], offsets: dict[TP, int], generation: int,
                        then: Any) -> bool:
        """A commit answered with `errors`: True when the member takes it (and `then`) over, to
        send again later; False lets `then` run now."""
        raise NotImplementedError

    def _commit_failed(self, now: Millis, errors: set[ErrorCode], generation: int) -> None:
        """What the errors of an answered commit (made in `generation`) say about the membership."""
        raise NotImplementedError

    # -- start positions -------------------------------------------------------------------------------

    def _start_positions(self, now: Millis, tps: list[TP]) -> None:
        for tp in tps:
            self._epochs += 1
            self._epoch[tp] = self._epochs
            self.positions.pop(tp, None)
            self._resolving.add(tp)
        self.coordinator.then(now, lambda t: self._offset_fetch(t, tps))

    def _offset_fetch(self, now: Millis, tps: list[TP]) -> None:
        tps = [tp for tp in tps if tp in self._resolving and tp in self._epoch]
        if not tps or not self._reading():
            return
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        version, body = self._offset_fetch_request(topics)
        epochs = {tp: self._epoch[tp] for tp in tps}
        self.send(now, ApiKey.OFFSET_FETCH, version, body, self.coordinator.broker, CoordinatorLookup.LANE,
                  lambda r, e, t, p: self._on_offset_fetch(r, e, t, p, epochs))

    def _on_offset_fetch(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, epochs: dict[TP, int]) -> None:
        current = [tp for tp, epoch in epochs.items() if self._epoch.get(tp) == epoch]
        if not current:
            return
        found = None if response is None else self._offset_fetch_topics(response)
        if found is None:
            if error in COORDINATOR_MOVED or error in TRANSPORT:
                self.coordinator.lost(now)
            self.after(f"offset-fetch-{pending.send.request_id}", now + self.retry_backoff_ms,
                       lambda t: self.coordinator.then(t, lambda t2: self._offset_fetch(t2, current)))
            return
        reset: list[TP] = []
        retry: list[TP] = []
        for topic in found:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if tp not in current:
                    continue
                if p.error_code != ErrorCode.none:
                    retry.append(tp)
                elif p.committed_offset >= 0:
                    self._position(now, tp, p.committed_offset, "committed", pending.sent_at)
                else:
                    reset.append(tp)
        if reset:
            self._reset(now, reset)
        if retry:
            self.after(f"offset-fetch-{pending.send.request_id}", now + self.retry_backoff_ms,
                       lambda t: self.coordinator.then(t, lambda t2: self._offset_fetch(t2, retry)))

    def _reset(self, now: Millis, tps: list[TP]) -> None:
        """auto.offset.reset=earliest: ListOffsets(-2) to each partition's leader."""
        missing = [tp for tp in tps if tp not in self.metadata.leaders]
        if missing:
            self.metadata.refresh(now, names=sorted({t for t, _ in missing}), then=lambda t: self._reset(t, tps))
            return
        by_leader: dict[Broker, list[TP]] = {}
        for tp in tps:
            by_leader.setdefault(self.metadata.leaders[tp], []).append(tp)
        for broker, group in by_leader.items():
            topics: dict[str, list[dict[str, int]]] = {}
            for t, p in group:
                topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": -1, "timestamp": -2})
            body = {"replica_id": -1, "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())]}
            epochs = {tp: self._epoch.get(tp) for tp in group}
            self.send(now, ApiKey.LIST_OFFSETS, 7, body, broker, "fetch",
                      lambda r, e, t, p, epochs=epochs: self._on_list_offsets(r, e, t, p, epochs))

    def _on_list_offsets(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, epochs: dict[TP, Any]) -> None:
        current = [tp for tp, epoch in epochs.items() if epoch is not None and self._epoch.get(tp) == epoch]
        if not current:
            return
        retry = []
        if response is None:
            retry = current
        else:
            for topic in response.topics:
                for p in topic.partitions:
                    tp = (topic.name, p.partition_index)
                    if tp not in current:
                        continue
                    if p.error_code == ErrorCode.none:
                        self._position(now, tp, p.offset, "reset", pending.sent_at)
                    else:
                        retry.append(tp)
        if retry:
            for t, p in retry:
                self.metadata.forget_leader(t, p)
            self.after(f"reset-{pending.send.request_id}", now + self.retry_backoff_ms, lambda t: self._reset(t, retry))

    def _position(self, now: Millis, tp: TP, offset: int, source: str, request_time: Millis) -> None:
        self._resolving.discard(tp)
        self.positions[tp] = offset
        self.observe(now, "position", generation=self.generation, topic=tp[0], partition=tp[1], offset=offset,
                     request_time=request_time, detail={"source": source})
        self._pump(now)

    # -- giving partitions up ---------------------------------------------------------------------------

    def _drop(self, tps: set[TP]) -> None:
        """Stop reading `tps` and forget them: positions, resolutions and fetches in flight."""
        for tp in tps:
            self.positions.pop(tp, None)
            self._epoch.pop(tp, None)
            self._resolving.discard(tp)
            self._revoking.discard(tp)
        remaining: dict[str, list[int]] = {}
        for t, ps in self.assignment.items():
            keep = [p for p in ps if (t, p) not in tps]
            if keep:
                remaining[t] = keep
        self.assignment = remaining

    def _lose_all(self, now: Millis) -> None:
        """Partitions lost without a commit (the generation or epoch is gone; a commit would be refused)."""
        self._drop({(t, p) for t, ps in self.assignment.items() for p in ps})

    # -- fetching ------------------------------------------------------------------------------------------

    def _pump(self, now: Millis) -> None:
        """Send a Fetch to every leader of owned partitions that has none in flight and is not busy."""
        if not self.config.fetch or not self._may_fetch():
            return
        by_leader: dict[Broker, list[TP]] = {}
        unknown = []
        for tp in self.positions:
            if tp in self._revoking:
                continue
            leader = self.metadata.leaders.get(tp)
            if leader is None:
                unknown.append(tp)
            else:
                by_leader.setdefault(leader, []).append(tp)
        if unknown:
            self.metadata.refresh(now, names=sorted({t for t, _ in unknown}), then=self._pump)
        for broker, tps in by_leader.items():
            if broker in self._fetching or self.has_timer(f"fetch:{broker}"):
                continue
            self._send_fetch(now, broker, tps)

    def _send_fetch(self, now: Millis, broker: Broker, tps: list[TP]) -> None:
        topics: dict[str, list[dict[str, int]]] = {}
        sent = {}
        for t, p in sorted(tps):
            offset = self.positions[(t, p)]
            sent[(t, p)] = (offset, self._epoch[(t, p)])
            topics.setdefault(t, []).append({"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                             "last_fetched_epoch": -1, "log_start_offset": -1,
                                             "partition_max_bytes": self.config.fetch_max_bytes})
        body = {"replica_id": -1, "max_wait": self.config.fetch_max_wait_ms, "min_bytes": self.config.fetch_min_bytes,
                "max_bytes": self.config.fetch_max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()], "forgotten_topics_data": [],
                "rack_id": ""}
        self._fetching.add(broker)
        self.send(now, ApiKey.FETCH, 12, body, broker, "fetch",
                  lambda r, e, t, p: self._on_fetch(r, e, t, p, broker, sent),
                  timeout_ms=self.request_timeout_ms + self.config.fetch_max_wait_ms)

    def _on_fetch(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, broker: Broker,
                  sent: dict[TP, tuple[int, int]]) -> None:
        self._fetching.discard(broker)
        if response is None or response.error_code != ErrorCode.none:
            for t, p in sent:
                self.metadata.forget_leader(t, p)
            self.after(f"fetch:{broker}", now + self.retry_backoff_ms, self._pump)
            return
        delivered = 0
        for topic in response.responses:
            for part in topic.partitions:
                tp = (topic.topic, part.partition_index)
                expected = sent.get(tp)
                if (expected is None or tp in self._revoking or self._epoch.get(tp) != expected[1]
                        or self.positions.get(tp) != expected[0]):
                    continue  # revoked or reset meanwhile: the records are not ours to hand over
                if part.error_code == ErrorCode.none:
                    delivered += self._deliver(now, tp, part.records, pending.sent_at)
                elif part.error_code == ErrorCode.offset_out_of_range:
                    self.positions.pop(tp, None)
                    self._resolving.add(tp)
                    self._reset(now, [tp])
                elif part.error_code in LEADER_MOVED:
                    self.metadata.forget_leader(*tp)
        if delivered and self.config.processing_ms:
            self.after(f"fetch:{broker}", now + self.config.processing_ms, self._pump)
        else:
            self._pump(now)

    def _deliver(self, now: Millis, tp: TP, records: bytes | None, request_time: Millis) -> int:
        if not records:
            return 0
        position = self.positions[tp]
        count = 0
        for _, header in iter_batches(records):
            last = header.last_offset
            if last < position:
                continue
            for offset in range(max(position, header.base_offset), last + 1):
                self.observe(now, "delivery", topic=tp[0], partition=tp[1], offset=offset, generation=self.generation,
                             request_time=request_time)
                count += 1
            position = last + 1
        self.positions[tp] = position
        return count

    # -- committing ------------------------------------------------------------------------------------------

    def _auto_commit(self, now: Millis) -> None:
        if not self._reading():
            return
        if self._may_auto_commit():
            self._commit(now)
        if not (self.config.commit_back_to_back and self._commit_inflight):
            self.after("commit", now + self.config.commit_interval_ms, self._auto_commit)

    def _commit(self, now: Millis, then: Any = None, only: set[TP] | None = None) -> None:
        """Commit every position (of `only`, if given), as Kafka's consumer commits all it has
        consumed each auto-commit interval; `then` runs after the answer."""
        if self._commit_inflight:
            if then is not None:
                self._after_commit.append(lambda t: self._commit(t, then, only))
            return
        offsets = {tp: pos for tp, pos in self.positions.items() if only is None or tp in only}
        if not offsets or self.coordinator.broker is None or not self.member_id:
            if then is not None:
                then(now)
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), offset in sorted(offsets.items()):
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": ""})
        body = {"group_id": self.config.group_id, "generation_id_or_member_epoch": self.generation,
                "member_id": self.member_id, "group_instance_id": self.config.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        self._commit_inflight = True
        generation = self.generation
        self.send(now, ApiKey.OFFSET_COMMIT, 9, body, self.coordinator.broker, CoordinatorLookup.LANE,
                  lambda r, e, t, p: self._on_commit(r, e, t, p, offsets, generation, then))

    def _on_commit(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, offsets: dict[TP, int],
                   generation: int, then: Any) -> None:
        self._commit_inflight = False
        outcome: dict[TP, ErrorCode] = {tp: error for tp in offsets}
        if response is not None:
            for topic in response.topics:
                for p in topic.partitions:
                    outcome[(topic.name, p.partition_index)] = p.error_code
        for (t, p), code in sorted(outcome.items()):
            if (t, p) not in offsets:
                continue
            self.observe(now, "commit", generation=generation, topic=t, partition=p, offset=offsets[(t, p)],
                         error=error_name(code), request_time=pending.sent_at)
            if code == ErrorCode.none:
                self.committed[(t, p)] = offsets[(t, p)]
        errors = set(outcome.values()) - {ErrorCode.none}
        waiting, self._after_commit = self._after_commit, []
        refused = bool(errors) and self._commit_refused(now, errors, offsets, generation, then)
        if then is not None and not refused:
            waiting.insert(0, then)
        if errors & (COORDINATOR_MOVED | TRANSPORT):
            self.coordinator.lost(now)
        for work in waiting:
            work(now)
        if self.config.commit_back_to_back and not self.has_timer("commit") and self._may_auto_commit():
            self.after("commit", now, self._auto_commit)
        if errors:
            self._commit_failed(now, errors, generation)
