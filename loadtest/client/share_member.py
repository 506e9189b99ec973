"""A share-group member (KIP-932), light enough for thousands per process.

    heartbeat: ShareGroupHeartbeat epoch 0 (join, with the subscription) -> member epoch N,
               later heartbeats carry N; UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH -> join again
    fetch:     per broker leading assigned partitions, a share session (ShareFetch epoch 0, then
               1, 2, ...), acknowledgements of the previous batch piggybacked on the next fetch,
               or sent on their own with ShareAcknowledge
    close:     ShareAcknowledge with epoch -1 (the last acknowledgements) and a leaving heartbeat

Each acquired record is acknowledged ACCEPT, RELEASE or REJECT by a seeded random mix, after an
optional processing time. Requests report to `on_event(kind, latency_ms, error_code)`; what the
member saw is kept in `stats` and, when asked, per record in `deliveries` (for checking).
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import iter_batches
from loadtest.client.cluster_client import RETRIABLE_COORDINATOR_ERRORS, ClusterClient
from loadtest.client.connection import Connection, ConnectionClosed
from loadtest.client.events import EventSink, timed

ACCEPT, RELEASE, REJECT = 1, 2, 3
_SESSION_RESET = (
    ErrorCode.share_session_not_found,
    ErrorCode.invalid_share_session_epoch,
    ErrorCode.share_session_limit_reached,
)


@dataclass
class ShareMemberConfig:
    group_id: str
    topics: list[str]
    accept: float = 1.0  # weights of the acknowledgement mix
    release: float = 0.0
    reject: float = 0.0
    processing_ms: float = 0.0  # per fetched batch, before acknowledging
    max_records: int = 500
    max_wait_ms: int = 500
    piggyback: bool = True  # acknowledge on the next ShareFetch, or with a ShareAcknowledge
    seed: int | None = None
    record_deliveries: bool = False
    retry_backoff_ms: int = 100


def new_member_id() -> str:
    """What Kafka clients send: a random UUID in Kafka's URL-safe base64 (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class _Session:
    conn: Connection
    epoch: int = 0
    partitions: set[tuple[Any, int]] = field(default_factory=set)


@dataclass
class ShareMember:
    cluster: ClusterClient
    config: ShareMemberConfig
    on_event: EventSink | None = None
    member_id: str = field(default_factory=new_member_id)
    member_epoch: int = 0
    heartbeat_interval_ms: int = 5000
    assignment: dict[Any, list[int]] = field(default_factory=dict)  # topic id -> partitions
    stats: Counter = field(default_factory=Counter)
    # (topic id, partition, offset) -> delivery counts seen, when config.record_deliveries
    deliveries: dict[tuple[Any, int, int], list[int]] = field(default_factory=dict)
    ack_latencies_ms: list[float] = field(default_factory=list)
    _coordinator: Connection | None = None
    _sessions: dict[int, _Session] = field(default_factory=dict)  # broker node id -> session
    _pending: dict[tuple[Any, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    _rng: random.Random = field(default_factory=random.Random)
    _last_decisions: dict[tuple[Any, int], list[tuple[int, int, int]]] = field(default_factory=dict)  # in flight
    _brokers: dict[int, tuple[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.config.seed is not None:
            self._rng.seed(self.config.seed)

    # -- membership ----------------------------------------------------------------------------------

    async def heartbeat(self, leaving: bool = False) -> ErrorCode:
        body = {
            "group_id": self.config.group_id,
            "member_id": self.member_id,
            "member_epoch": -1 if leaving else self.member_epoch,
            "rack_id": None,
            "subscribed_topic_names": self.config.topics if self.member_epoch == 0 and not leaving else None,
        }
        try:
            conn = await self._coordinator_conn()
            response = await self._timed("share_heartbeat", conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body))
        except ConnectionClosed:
            self._coordinator = None
            return ErrorCode.network_exception
        error = response.error_code
        if error == ErrorCode.none:
            self.member_epoch = response.member_epoch
            self.heartbeat_interval_ms = int(response.heartbeat_interval.total_seconds() * 1000) or 5000
            if response.assignment is not None:
                self.assignment = {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}
        elif error in RETRIABLE_COORDINATOR_ERRORS:
            self._coordinator = None
        elif error in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch):
            self.member_epoch = 0  # rejoin with the same member id, as librdkafka does
            self.assignment = {}
        return error

    async def _coordinator_conn(self) -> Connection:
        if self._coordinator is None or self._coordinator.closed:
            self._coordinator = await self.cluster.coordinator_connection(self.config.group_id, self.config.retry_backoff_ms)
        return self._coordinator

    # -- fetching and acknowledging -------------------------------------------------------------------------

    async def fetch_once(self) -> int:
        """One ShareFetch per broker leading an assigned partition; returns records acquired."""
        wanted = await self._partitions_by_broker()
        for node in [n for n in self._sessions if n not in wanted]:
            await self._close_session(node)
        got = await asyncio.gather(*(self._fetch_from(node, parts) for node, parts in wanted.items()))
        return sum(got)

    async def _fetch_from(self, node: int, wanted: set[tuple[Any, int]]) -> int:
        session = await self._session(node)
        acks = self._take_acks(wanted if self.config.piggyback else set()) if session.epoch > 0 else {}
        added = wanted - session.partitions
        forgotten = session.partitions - wanted
        fetch_parts = (wanted if session.epoch == 0 else added) | set(acks)
        body = {
            "group_id": self.config.group_id,
            "member_id": self.member_id,
            "share_session_epoch": session.epoch,
            "max_wait": self.config.max_wait_ms,
            "min_bytes": 1,
            "max_bytes": 52_428_800,
            "max_records": self.config.max_records,
            "batch_size": self.config.max_records,
            "topics": _by_topic(fetch_parts, lambda tp: {"partition_index": tp[1], "acknowledgement_batches": acks.get(tp, [])}),
            "forgotten_topics_data": [
                {"topic_id": t, "partitions": ps} for t, ps in _group(forgotten).items()
            ] if session.epoch > 0 else [],
        }
        started = time.perf_counter()
        try:
            response = await self._timed("share_fetch", session.conn.call(ApiKey.SHARE_FETCH, 1, body))
        except ConnectionClosed:
            self._sessions.pop(node, None)
            self._requeue(acks)
            return 0
        if response.error_code in _SESSION_RESET:
            self._sessions.pop(node, None)
            await session.conn.close()
            self._requeue(acks)
            return 0
        if response.error_code != ErrorCode.none:
            self._requeue(acks)
            return 0
        session.epoch += 1
        session.partitions = set(wanted)
        acked_ok = self._account_acks(response, acks, started)
        acquired = 0
        for topic in response.responses:
            for p in topic.partitions:
                acquired += self._received(topic.topic_id, p)
        self.stats["acks_failed"] += sum(len(v) for v in acks.values()) - acked_ok
        return acquired

    def _received(self, topic_id: Any, p: Any) -> int:
        if p.error_code != ErrorCode.none:
            self.stats[f"fetch_error_{p.error_code.name}"] += 1
            return 0
        ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
        if not ranges:
            return 0
        present: set[int] = set()
        for _, header in iter_batches(bytes(p.records or b"")):
            present.update(range(header.base_offset, header.last_offset + 1))
        decisions = self._pending.setdefault((topic_id, p.partition_index), [])
        count = 0
        for first, last, delivery in ranges:
            for offset in range(first, last + 1):
                if offset not in present:  # acquired but no record (compacted away): a GAP ack
                    decisions.append((offset, 0, delivery))
                    continue
                kind = self._rng.choices(
                    (ACCEPT, RELEASE, REJECT), (self.config.accept, self.config.release, self.config.reject)
                )[0]
                decisions.append((offset, kind, delivery))
                count += 1
                if self.config.record_deliveries:
                    self.deliveries.setdefault((topic_id, p.partition_index, offset), []).append(delivery)
        self.stats["acquired"] += count
        return count

    def _take_acks(self, only: set[tuple[Any, int]] | None = None) -> dict[tuple[Any, int], list[dict[str, Any]]]:
        """Pending decisions as acknowledgement batches: runs of consecutive offsets, one type each."""
        out: dict[tuple[Any, int], list[dict[str, Any]]] = {}
        for key in list(self._pending):
            if only is not None and key not in only:
                continue
            decisions = sorted(self._pending.pop(key))
            batches: list[dict[str, Any]] = []
            for offset, kind, _ in decisions:
                last = batches[-1] if batches else None
                if last and last["last_offset"] == offset - 1 and last["acknowledge_types"] == [kind]:
                    last["last_offset"] = offset
                else:
                    batches.append({"first_offset": offset, "last_offset": offset, "acknowledge_types": [kind]})
            if batches:
                out[key] = batches
                self._last_decisions[key] = decisions
        return out

    def _requeue(self, acks: dict[tuple[Any, int], list[dict[str, Any]]]) -> None:
        """Acknowledgements whose request failed: lost with the session; their records come
        back after the lock expires (what a real client does too)."""
        for key in acks:
            self.stats["acks_lost"] += len(self._last_decisions.pop(key, []))

    def _account_acks(self, response: Any, acks: dict[tuple[Any, int], list[dict[str, Any]]], started: float) -> int:
        ok = 0
        answered: dict[tuple[Any, int], ErrorCode] = {}
        for topic in response.responses:
            for p in topic.partitions:
                code = p.acknowledge_error_code if hasattr(p, "acknowledge_error_code") else p.error_code
                answered[(topic.topic_id, p.partition_index)] = ErrorCode(int(code))
        latency = (time.perf_counter() - started) * 1000
        for key in acks:
            decisions = self._last_decisions.pop(key, [])
            error = answered.get(key, ErrorCode.none)
            if error == ErrorCode.none:
                ok += len(decisions)
                for _, kind, _ in decisions:
                    self.stats[{0: "gap", ACCEPT: "accepted", RELEASE: "released", REJECT: "rejected"}[kind]] += 1
                self.ack_latencies_ms.append(latency)
            else:
                self.stats[f"ack_error_{error.name}"] += len(decisions)
        return ok

    async def acknowledge(self) -> int:
        """Send pending acknowledgements with ShareAcknowledge, one per broker; returns how many succeeded."""
        total = 0
        wanted = await self._partitions_by_broker()
        for node, session in list(self._sessions.items()):
            if session.epoch == 0:
                continue
            acks = self._take_acks(wanted.get(node, set()) | session.partitions)
            if not acks:
                continue
            total += await self._send_acks(node, session, acks, session.epoch)
        return total

    async def _send_acks(self, node: int, session: _Session, acks: dict, epoch: int) -> int:
        body = {
            "group_id": self.config.group_id,
            "member_id": self.member_id,
            "share_session_epoch": epoch,
            "topics": _by_topic(set(acks), lambda tp: {"partition_index": tp[1], "acknowledgement_batches": acks[tp]}),
        }
        started = time.perf_counter()
        try:
            response = await self._timed("share_acknowledge", session.conn.call(ApiKey.SHARE_ACKNOWLEDGE, 1, body))
        except ConnectionClosed:
            self._sessions.pop(node, None)
            self._requeue(acks)
            return 0
        if response.error_code != ErrorCode.none:
            if response.error_code in _SESSION_RESET:
                self._sessions.pop(node, None)
            self._requeue(acks)
            return 0
        if epoch > 0:
            session.epoch += 1
        return self._account_acks(response, acks, started)

    async def _session(self, node: int) -> _Session:
        session = self._sessions.get(node)
        if session is None or session.conn.closed:
            host, port = self._brokers[node]
            session = self._sessions[node] = _Session(await self.cluster.open(host, port))
        return session

    async def _close_session(self, node: int) -> None:
        session = self._sessions.pop(node, None)
        if session is None:
            return
        if session.epoch > 0:
            acks = self._take_acks(session.partitions)
            await self._send_acks(node, session, acks, -1)
        await session.conn.close()

    async def _partitions_by_broker(self) -> dict[int, set[tuple[Any, int]]]:
        if not self.assignment:
            return {}
        meta = await self.cluster.topic_metadata_by_id(list(self.assignment))
        self._brokers = meta.brokers
        out: dict[int, set[tuple[Any, int]]] = {}
        for topic_id, partitions in self.assignment.items():
            leaders = meta.leaders.get(topic_id, {})
            for p in partitions:
                node = leaders.get(p)
                if node is not None:
                    out.setdefault(node, set()).add((topic_id, p))
        return out

    # -- running ------------------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Heartbeat at the interval the coordinator gives, fetch and acknowledge until stop."""
        beating = asyncio.ensure_future(self._heartbeat_loop(stop))
        try:
            while not stop.is_set():
                if not self.assignment:
                    await _sleep_or_stop(stop, 0.05)
                    continue
                got = await self.fetch_once()
                if got and self.config.processing_ms:
                    await _sleep_or_stop(stop, self.config.processing_ms / 1000)
                if not self.config.piggyback:
                    await self.acknowledge()
        finally:
            await beating
            await self.close()

    async def _heartbeat_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            error = await self.heartbeat()
            wait = self.heartbeat_interval_ms / 1000 if error == ErrorCode.none else self.config.retry_backoff_ms / 1000
            await _sleep_or_stop(stop, wait)

    async def close(self) -> None:
        """Acknowledge what is pending and end every share session, then leave the group."""
        for node in list(self._sessions):
            await self._close_session(node)
        if self.member_epoch > 0:
            await self.heartbeat(leaving=True)
        if self._coordinator is not None:
            await self._coordinator.close()
            self._coordinator = None

    async def _timed(self, kind: str, call: Any) -> Any:
        return await timed(self.on_event, kind, call)


def _group(tps: set[tuple[Any, int]]) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for t, p in sorted(tps, key=lambda x: (str(x[0]), x[1])):
        out.setdefault(t, []).append(p)
    return out


def _by_topic(tps: set[tuple[Any, int]], partition: Callable[[tuple[Any, int]], dict]) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": [partition((t, p)) for p in ps]} for t, ps in _group(tps).items()]


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except asyncio.TimeoutError:
        pass
