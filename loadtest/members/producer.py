"""An idempotent producer, sans I/O: records at a steady rate, acks=all, per-partition sequences.

Every `linger_ms` the records due at `rate` per second are made and go, together, to the next
partition in turn (Kafka's sticky partitioner: one batch per partition per linger). Each
partition has at most one batch in flight, so a retry after a broken connection or a moved
leader resends the same batch with the same sequence and the broker's deduplication keeps it
once (InitProducerId gives the producer id). A batch not acknowledged within
`delivery_timeout_ms` is given up (`produce_failed`), and the producer takes a new producer id so
later sequences start clean. Every acknowledged record is a `produce` observation with its
offset and key (docs/experiments.md).
"""

from __future__ import annotations

import datetime
import enum
import io
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from cluster.gateway.apis import ApiKey
from loadtest.members.errors import LEADER_MOVED, TRANSPORT, error_name
from loadtest.members.lookup import MetadataCache
from loadtest.members.machine import Broker, Machine, Millis, Pending

TP = tuple[str, int]
_RESEQUENCE = frozenset(
    {ErrorCode.out_of_order_sequence_number, ErrorCode.unknown_producer_id, ErrorCode.invalid_producer_epoch,
     ErrorCode.producer_fenced}
)


class ProducerState(enum.Enum):
    """STARTING (metadata, producer id) -> RUNNING -> FLUSHING (no new records) -> STOPPED."""

    STARTING = "starting"
    RUNNING = "running"
    FLUSHING = "flushing"
    STOPPED = "stopped"


@dataclass(slots=True)
class ProducerConfig:
    topic: str
    rate: float = 100.0  # records/s
    value_bytes: int = 100
    linger_ms: int = 20
    max_batch_records: int = 1_000
    delivery_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000


@dataclass(slots=True)
class Batch:
    keys: list[str]
    created_at: Millis
    base_sequence: int = -1
    payload: bytes = b""
    sending: bool = False  # a Produce carrying it is in flight


@dataclass(slots=True)
class PartitionQueue:
    waiting: deque[tuple[str, Millis]] = field(default_factory=deque)
    inflight: Batch | None = None
    next_sequence: int = 0


class ProducerMember(Machine):
    role = "producer"

    def __init__(self, name: str, bootstrap: list[Broker], config: ProducerConfig, **kwargs: Any) -> None:
        super().__init__(name, None, bootstrap, request_timeout_ms=config.request_timeout_ms, **kwargs)
        self.config = config
        self.state = ProducerState.STARTING
        self.metadata = MetadataCache(self)
        self.producer_id = -1
        self.producer_epoch = -1
        self.queues: dict[TP, PartitionQueue] = {}
        self.produced = 0  # records made
        self.acknowledged = 0
        self.failed = 0
        self._credit = 0.0
        self._last_linger: Millis = 0.0
        self._next_partition = 0
        self._value = b"v" * config.value_bytes
        self._init_inflight = False

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, now: Millis) -> None:
        self.metadata.refresh(now, names=[self.config.topic], then=self._init_producer_id)

    def _init_producer_id(self, now: Millis) -> None:
        if self._init_inflight or self.state is ProducerState.STOPPED:
            return
        self._init_inflight = True
        body = {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}
        self.send(now, ApiKey.INIT_PRODUCER_ID, 4, body, self.any_broker(), "bootstrap", self._on_producer_id)

    def _on_producer_id(self, response: Any, error: ErrorCode, now: Millis, _p: Pending) -> None:
        self._init_inflight = False
        if error != ErrorCode.none:
            self.after("init", now + self.retry_backoff_ms, self._init_producer_id)
            return
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        for queue in self.queues.values():
            queue.next_sequence = 0
            if queue.inflight is not None:
                queue.inflight.base_sequence = -1  # re-stamped under the new producer id
        if self.state is ProducerState.STARTING:
            self.state = ProducerState.RUNNING
            self._last_linger = now
            self.after("linger", now + self.config.linger_ms, self._linger)
        self._pump(now)

    def leave(self, now: Millis) -> None:
        """Make no more records; stop once everything made is acknowledged or given up."""
        if self.state is ProducerState.STOPPED:
            return
        self.cancel("linger")
        self.state = ProducerState.FLUSHING
        self._maybe_done(now)

    def _maybe_done(self, now: Millis) -> None:
        if self.state is ProducerState.FLUSHING and not any(q.waiting or q.inflight for q in self.queues.values()):
            self.state = ProducerState.STOPPED
            self.stopped = True
            self._timers.clear()

    # -- making records ----------------------------------------------------------------------------

    def _linger(self, now: Millis) -> None:
        if self.state is not ProducerState.RUNNING:
            return
        self._credit += self.config.rate * (now - self._last_linger) / 1000.0
        self._last_linger = now
        count = int(self._credit)
        partitions = self.metadata.partitions.get(self.config.topic, 0)
        if count and partitions:
            self._credit -= count
            tp = (self.config.topic, self._next_partition % partitions)
            self._next_partition += 1
            queue = self.queues.setdefault(tp, PartitionQueue())
            for _ in range(count):
                queue.waiting.append((f"{self.name}:{self.produced}", now))
                self.produced += 1
            self._pump(now)
        self.after("linger", now + self.config.linger_ms, self._linger)

    # -- sending -----------------------------------------------------------------------------------

    def _pump(self, now: Millis) -> None:
        if self.producer_id < 0:
            return
        unknown = False
        by_leader: dict[Broker, list[TP]] = {}
        for tp, queue in self.queues.items():
            self._expire(now, tp, queue)
            if queue.inflight is None and queue.waiting:
                keys = [queue.waiting.popleft() for _ in range(min(len(queue.waiting), self.config.max_batch_records))]
                queue.inflight = Batch([k for k, _ in keys], keys[0][1])
            batch = queue.inflight
            if batch is None or batch.sending:
                continue
            if self.has_timer(f"retry:{tp[0]}:{tp[1]}"):
                continue
            leader = self.metadata.leaders.get(tp)
            if leader is None:
                unknown = True
                continue
            by_leader.setdefault(leader, []).append(tp)
        if unknown:
            self.metadata.refresh(now, names=[self.config.topic], then=self._pump)
        for broker, tps in by_leader.items():
            self._send(now, broker, tps)
        self._maybe_done(now)

    def _send(self, now: Millis, broker: Broker, tps: list[TP]) -> None:
        partition_data = []
        for tp in tps:
            queue = self.queues[tp]
            batch = queue.inflight
            if batch.base_sequence < 0:
                batch.base_sequence = queue.next_sequence
                batch.payload = self._encode(batch)
            batch.sending = True
            partition_data.append({"index": tp[1], "records": batch.payload})
        body = {"transactional_id": None, "acks": -1, "timeout": self.config.request_timeout_ms,
                "topic_data": [{"name": self.config.topic, "partition_data": partition_data}]}
        self.send(now, ApiKey.PRODUCE, 9, body, broker, "produce", lambda r, e, t, p: self._on_produce(r, e, t, p, tps))

    def _encode(self, batch: Batch) -> bytes:
        ts = TZAwareMicros.parse(datetime.datetime.fromtimestamp(batch.created_at / 1000, datetime.UTC))
        records = tuple(
            Record(attributes=i8(0), timestamp=ts, offset=i64(i), key=key.encode(), value=self._value, headers=())
            for i, key in enumerate(batch.keys)
        )
        buf = io.BytesIO()
        write_new_batch(buf, NewRecordBatch(producer_id=i64(self.producer_id), producer_epoch=i16(self.producer_epoch),
                                            base_sequence=i32(batch.base_sequence), records=records, attributes=i16(0)))
        return buf.getvalue()

    def _on_produce(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, tps: list[TP]) -> None:
        outcome: dict[TP, tuple[ErrorCode, int]] = {tp: (error, -1) for tp in tps}
        if response is not None:
            for topic in response.responses:
                for p in topic.partition_responses:
                    outcome[(topic.name, p.index)] = (p.error_code, p.base_offset)
        resequence = False
        for tp in tps:
            queue = self.queues[tp]
            batch = queue.inflight
            batch.sending = False
            code, base_offset = outcome[tp]
            if code == ErrorCode.none or code == ErrorCode.duplicate_sequence_number and base_offset >= 0:
                for i, key in enumerate(batch.keys):
                    self.observe(now, "produce", topic=tp[0], partition=tp[1], offset=base_offset + i, key=key,
                                 request_time=pending.sent_at)
                self.acknowledged += len(batch.keys)
                queue.next_sequence = batch.base_sequence + len(batch.keys)
                queue.inflight = None
            elif code in _RESEQUENCE:
                resequence = True
            elif code in LEADER_MOVED or code in TRANSPORT or code.retriable:
                self.metadata.forget_leader(*tp)
                self.after(f"retry:{tp[0]}:{tp[1]}", now + self.retry_backoff_ms, self._pump)
            else:
                self._give_up(now, tp, queue, code)
        if resequence:
            self._init_producer_id(now)
        self._pump(now)

    def _expire(self, now: Millis, tp: TP, queue: PartitionQueue) -> None:
        batch = queue.inflight
        if batch is not None and not batch.sending and now - batch.created_at > self.config.delivery_timeout_ms:
            self._give_up(now, tp, queue, ErrorCode.request_timed_out)

    def _give_up(self, now: Millis, tp: TP, queue: PartitionQueue, code: ErrorCode) -> None:
        batch = queue.inflight
        for key in batch.keys:
            self.observe(now, "produce_failed", topic=tp[0], partition=tp[1], key=key, error=error_name(code))
        self.failed += len(batch.keys)
        queue.inflight = None
        if batch.base_sequence >= 0:
            # The broker may hold this sequence or not: a new producer id makes the next batch valid either way.
            self._init_producer_id(now)
