"""A share-group member (KIP-932), sans I/O: what `confluent_kafka.ShareConsumer` does, light.

    membership: ShareGroupHeartbeat epoch 0 (join, with the subscription) -> member epoch N,
                then every heartbeat interval the coordinator gives; UNKNOWN_MEMBER_ID /
                FENCED_MEMBER_EPOCH -> join again with the same member id (as librdkafka does)
    fetching:   one share session per broker leading assigned partitions (ShareFetch epoch 0,
                then 1, 2, ...), one request in flight per session; the acknowledgements of the
                previous batch ride on the next ShareFetch (or go alone in a ShareAcknowledge)
    leaving:    every session ends with a ShareAcknowledge at epoch -1 carrying what is left,
                then a heartbeat at epoch -1

Each acquired record is acknowledged ACCEPT, RELEASE or REJECT by a seeded random mix after
`processing_ms`. Every record handed over is a `delivery` observation (with its delivery count),
every acknowledgement outcome an `ack` observation, per record (docs/experiments.md). An
acknowledgement that cannot be sent because its session broke is observed as failed: the broker
released the records when the connection closed, so they come back.

The lifecycle, settings, sessions and decisions are in share_state.py.
"""

from __future__ import annotations

import random
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import iter_batches
from loadtest.members.errors import COORDINATOR_MOVED, LEADER_MOVED, TRANSPORT, error_name
from loadtest.members.lookup import CoordinatorLookup, MetadataCache
from loadtest.members.machine import Broker, Machine, Millis, Pending
from loadtest.members.share_state import (
    ACCEPT,
    ACK_NAMES,
    GAP,
    REJECT,
    RELEASE,
    SESSION_RESET,
    TP,
    TRANSITIONS,
    Decision,
    Session,
    ShareConfig,
    ShareState,
    new_member_id,
)

__all__ = ["ShareConfig", "ShareMember", "ShareState"]



class ShareMember(Machine):
    role = "share"

    def __init__(self, name: str, bootstrap: list[Broker], config: ShareConfig, **kwargs: Any) -> None:
        super().__init__(name, config.group_id, bootstrap, **kwargs)
        self.config = config
        self.member_id = new_member_id()
        self.member_epoch = 0
        self.heartbeat_interval_ms = 5_000
        self.state = ShareState.JOINING
        self.assignment: dict[Any, list[int]] = {}  # topic id -> partitions
        self.coordinator = CoordinatorLookup(self, config.group_id)
        self.metadata = MetadataCache(self)
        self.sessions: dict[Broker, Session] = {}
        self.fatal: ErrorCode | None = None
        self._rng = random.Random(config.seed)
        self._weights = (config.accept, config.release, config.reject)
        self._heartbeat_inflight = False

    def _to(self, target: ShareState) -> None:
        if target not in TRANSITIONS[self.state]:
            raise RuntimeError(f"{self.name}: {self.state.name} -> {target.name}")
        self.state = target

    # -- membership -------------------------------------------------------------------------------

    def start(self, now: Millis) -> None:
        self.coordinator.then(now, self._heartbeat)

    def _heartbeat(self, now: Millis, leaving: bool = False) -> None:
        if self._heartbeat_inflight or self.state is ShareState.STOPPED:
            return
        if self.state is ShareState.LEAVING and not leaving:
            return
        if self.coordinator.broker is None:
            self.coordinator.then(now, lambda t: self._heartbeat(t, leaving))
            return
        body = {
            "group_id": self.config.group_id,
            "member_id": self.member_id,
            "member_epoch": -1 if leaving else self.member_epoch,
            "rack_id": None,
            "subscribed_topic_names": self.config.topics if self.member_epoch == 0 and not leaving else None,
        }
        self._heartbeat_inflight = True
        self.send(now, ApiKey.SHARE_GROUP_HEARTBEAT, 1, body, self.coordinator.broker, CoordinatorLookup.LANE,
                  lambda r, e, t, p: self._on_heartbeat(r, e, t, leaving))

    def _on_heartbeat(self, response: Any, error: ErrorCode, now: Millis, leaving: bool) -> None:
        self._heartbeat_inflight = False
        if leaving:
            self._stop(now)
            return
        if self.state is not ShareState.JOINING and self.state is not ShareState.STABLE:
            return
        if error == ErrorCode.none:
            self.member_epoch = response.member_epoch
            self.heartbeat_interval_ms = int(response.heartbeat_interval.total_seconds() * 1000) or 5_000
            if self.state is ShareState.JOINING:
                self._to(ShareState.STABLE)
            if response.assignment is not None:
                assignment = {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}
                if assignment != self.assignment:
                    self._assign(now, assignment)
            self.after("heartbeat", now + self.heartbeat_interval_ms, self._heartbeat)
        elif error in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch):
            self.observe(now, "fenced", generation=self.member_epoch, error=error_name(error))
            self.member_epoch = 0
            if self.state is ShareState.STABLE:
                self._to(ShareState.JOINING)
            self._assign(now, {})
            self._heartbeat(now)
        elif error in COORDINATOR_MOVED or error in TRANSPORT:
            self.coordinator.lost(now)
            self.after("heartbeat", now + self.retry_backoff_ms, self._heartbeat)
        elif error.retriable:
            self.after("heartbeat", now + self.retry_backoff_ms, self._heartbeat)
        else:
            self.fatal = error
            self.observe(now, "member_stop", detail={"reason": error_name(error)})
            self._stop(now)

    def _assign(self, now: Millis, assignment: dict[Any, list[int]]) -> None:
        self.assignment = assignment
        names = {tid: self.metadata.names.get(tid, str(tid)) for tid in assignment}
        self.observe(now, "assignment", generation=self.member_epoch,
                     detail={"assignment": {names[t]: ps for t, ps in sorted(assignment.items(), key=lambda x: names[x[0]])}})
        unknown = [tid for tid in assignment if tid not in self.metadata.names]
        if unknown:
            self.metadata.refresh(now, ids=unknown, then=self._pump)
        else:
            self._pump(now)

    def leave(self, now: Millis) -> None:
        """Acknowledge what is pending, close every share session, leave the group, stop."""
        if self.state in (ShareState.LEAVING, ShareState.STOPPED):
            return
        self._to(ShareState.LEAVING)
        self.cancel("heartbeat")
        for session in self.sessions.values():
            session.closing = True
            session.processing = False
        self._close_sessions(now)

    def _close_sessions(self, now: Millis) -> None:
        for broker, session in list(self.sessions.items()):
            if session.busy:
                continue  # closed when its request answers
            if session.epoch > 0:
                self._send_acknowledge(now, session, epoch=-1)
            else:
                del self.sessions[broker]
        if not self.sessions:
            if self.member_epoch > 0 and self.coordinator.broker is not None:
                self._heartbeat(now, leaving=True)
            else:
                self._stop(now)

    def _stop(self, now: Millis) -> None:
        if self.state is not ShareState.STOPPED:
            self._to(ShareState.STOPPED)
        self.stopped = True
        self._timers.clear()

    # -- fetching ------------------------------------------------------------------------------------

    def _wanted(self) -> tuple[dict[Broker, set[TP]], list[Any]]:
        """Assigned partitions by the broker leading them, and topic ids whose leaders are unknown."""
        out: dict[Broker, set[TP]] = {}
        missing = []
        for tid, partitions in self.assignment.items():
            name = self.metadata.names.get(tid)
            for p in partitions:
                leader = self.metadata.leaders.get((name, p)) if name is not None else None
                if leader is None:
                    missing.append(tid)
                else:
                    out.setdefault(leader, set()).add((tid, p))
        return out, missing

    def _pump(self, now: Millis) -> None:
        if self.state is not ShareState.STABLE:
            return
        wanted, missing = self._wanted()
        if missing:
            self.metadata.refresh(now, ids=sorted(set(missing), key=str), then=self._pump)
        for broker in set(self.sessions) | set(wanted):
            session = self.sessions.get(broker)
            if session is None:
                session = self.sessions[broker] = Session(broker)
            if session.busy or session.processing or self.has_timer(f"backoff:{broker}"):
                continue
            partitions = wanted.get(broker, set())
            if not partitions and not session.partitions:
                if not session.ready:
                    del self.sessions[broker]
                continue
            if not self.config.piggyback and session.ready and session.epoch > 0:
                self._send_acknowledge(now, session, session.epoch)
            else:
                self._send_fetch(now, session, partitions)

    def _take_acks(self, session: Session) -> tuple[dict[TP, list[dict[str, Any]]], dict[TP, list[Decision]]]:
        """The session's ready decisions as acknowledgement batches (runs of one type)."""
        decisions, session.ready = session.ready, {}
        batches: dict[TP, list[dict[str, Any]]] = {}
        for tp, ds in decisions.items():
            out: list[dict[str, Any]] = []
            for d in sorted(ds, key=lambda d: d.offset):
                last = out[-1] if out else None
                if last and last["last_offset"] == d.offset - 1 and last["acknowledge_types"] == [d.kind]:
                    last["last_offset"] = d.offset
                else:
                    out.append({"first_offset": d.offset, "last_offset": d.offset, "acknowledge_types": [d.kind]})
            batches[tp] = out
        return batches, decisions

    def _send_fetch(self, now: Millis, session: Session, partitions: set[TP]) -> None:
        acks, decisions = self._take_acks(session) if session.epoch > 0 else ({}, {})
        listed = partitions | set(acks)
        forgotten = session.partitions - partitions if session.epoch > 0 else set()
        body = {
            "group_id": self.config.group_id,
            "member_id": self.member_id,
            "share_session_epoch": session.epoch,
            "max_wait": self.config.max_wait_ms,
            "min_bytes": 1,
            "max_bytes": 52_428_800,
            "max_records": self.config.max_records,
            "batch_size": self.config.max_records,
            "topics": _by_topic(listed, lambda tp: {"partition_index": tp[1], "acknowledgement_batches": acks.get(tp, [])}),
            "forgotten_topics_data": _by_topic(forgotten, lambda tp: tp[1]),
        }
        session.busy = True
        self.send(now, ApiKey.SHARE_FETCH, 1, body, session.broker, "share",
                  lambda r, e, t, p: self._on_fetch(r, e, t, p, session, partitions, decisions),
                  timeout_ms=self.request_timeout_ms + self.config.max_wait_ms)

    def _on_fetch(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, session: Session,
                  partitions: set[TP], decisions: dict[TP, list[Decision]]) -> None:
        session.busy = False
        if response is None or response.error_code != ErrorCode.none:
            self._observe_acks(now, decisions, {tp: error for tp in decisions}, pending.sent_at)
            self._reset_session(now, session, error)
            return
        session.epoch += 1
        session.partitions = set(partitions)
        outcome: dict[TP, ErrorCode] = {}
        got = 0
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic_id, p.partition_index)
                outcome[tp] = ErrorCode(int(p.acknowledge_error_code))
                if p.error_code == ErrorCode.none:
                    got += self._received(now, session, tp, p, pending.sent_at)
                elif p.error_code in LEADER_MOVED:
                    name = self.metadata.names.get(topic.topic_id)
                    if name is not None:
                        self.metadata.forget_leader(name, p.partition_index)
        self._observe_acks(now, decisions, outcome, pending.sent_at)
        self._after_request(now, session, got)

    def _send_acknowledge(self, now: Millis, session: Session, epoch: int) -> None:
        acks, decisions = self._take_acks(session)
        body = {
            "group_id": self.config.group_id,
            "member_id": self.member_id,
            "share_session_epoch": epoch,
            "topics": _by_topic(set(acks), lambda tp: {"partition_index": tp[1], "acknowledgement_batches": acks[tp]}),
        }
        session.busy = True
        self.send(now, ApiKey.SHARE_ACKNOWLEDGE, 1, body, session.broker, "share",
                  lambda r, e, t, p: self._on_acknowledge(r, e, t, p, session, decisions, epoch))

    def _on_acknowledge(self, response: Any, error: ErrorCode, now: Millis, pending: Pending, session: Session,
                        decisions: dict[TP, list[Decision]], epoch: int) -> None:
        session.busy = False
        if response is None or response.error_code != ErrorCode.none:
            self._observe_acks(now, decisions, {tp: error for tp in decisions}, pending.sent_at)
            self._reset_session(now, session, error)
            return
        outcome = {(t.topic_id, p.partition_index): ErrorCode(int(p.error_code)) for t in response.responses for p in t.partitions}
        self._observe_acks(now, decisions, outcome, pending.sent_at)
        if epoch == -1:
            self.sessions.pop(session.broker, None)
            self.close_connection(session.broker, "share")
            if self.state is ShareState.LEAVING:
                self._close_sessions(now)
            return
        session.epoch += 1
        self._after_request(now, session, 0)

    def _after_request(self, now: Millis, session: Session, got: int) -> None:
        if session.closing or self.state is ShareState.LEAVING:
            session.closing = True
            session.processing = False
            self._close_sessions(now)
            return
        if got and self.config.processing_ms:
            session.processing = True
            self.after(f"process:{session.broker}", now + self.config.processing_ms,
                       lambda t: self._processed(t, session))
        else:
            self._pump(now)

    def _processed(self, now: Millis, session: Session) -> None:
        session.processing = False
        self._pump(now)

    def _reset_session(self, now: Millis, session: Session, error: ErrorCode) -> None:
        """The session is gone (its connection broke, or the broker no longer knows it): what was
        waiting to be acknowledged cannot be any more; the broker released those records."""
        lost = session.ready
        session.ready = {}
        self._observe_acks(now, lost, {tp: ErrorCode.network_exception for tp in lost}, None)
        self.sessions.pop(session.broker, None)
        self.close_connection(session.broker, "share")
        if self.state is ShareState.LEAVING:
            self._close_sessions(now)
            return
        for tp in session.partitions:
            name = self.metadata.names.get(tp[0])
            if name is not None and error not in SESSION_RESET:
                self.metadata.forget_leader(name, tp[1])
        self.after(f"backoff:{session.broker}", now + self.retry_backoff_ms, self._pump)

    def _received(self, now: Millis, session: Session, tp: TP, p: Any, request_time: Millis) -> int:
        ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
        if not ranges:
            return 0
        present: set[int] = set()
        for _, header in iter_batches(bytes(p.records or b"")):
            present.update(range(header.base_offset, header.last_offset + 1))
        topic = self.metadata.names.get(tp[0], str(tp[0]))
        # The leader epoch that acquired them, as raygroups' gateway reports it with every answer:
        # it tells whether two deliveries came from one leadership (docs/experiments.md).
        leader = getattr(p, "current_leader", None)
        leader_epoch = leader.leader_epoch if leader is not None and leader.leader_epoch >= 0 else None
        decisions = session.ready.setdefault(tp, [])
        count = 0
        for first, last, delivery_count in ranges:
            for offset in range(first, last + 1):
                if offset not in present:  # acquired, but no record there (compacted away): GAP
                    decisions.append(Decision(offset, GAP, delivery_count))
                    continue
                kind = self._rng.choices((ACCEPT, RELEASE, REJECT), self._weights)[0]
                decisions.append(Decision(offset, kind, delivery_count))
                self.observe(now, "delivery", topic=topic, partition=tp[1], offset=offset, generation=self.member_epoch,
                             delivery_count=delivery_count, request_time=request_time, leader_epoch=leader_epoch)
                count += 1
        return count

    def _observe_acks(self, now: Millis, decisions: dict[TP, list[Decision]], outcome: dict[TP, ErrorCode],
                      request_time: Millis | None) -> None:
        for tp, ds in decisions.items():
            error = error_name(outcome.get(tp, ErrorCode.none))
            topic = self.metadata.names.get(tp[0], str(tp[0]))
            for d in ds:
                if d.kind == GAP:
                    continue
                self.observe(now, "ack", topic=topic, partition=tp[1], offset=d.offset, ack_type=ACK_NAMES[d.kind],
                             error=error, request_time=request_time, delivery_count=d.delivery_count)


def _by_topic(tps: set[TP], partition: Any) -> list[dict[str, Any]]:
    grouped: dict[Any, list[int]] = {}
    for t, p in sorted(tps, key=lambda x: (str(x[0]), x[1])):
        grouped.setdefault(t, []).append(p)
    return [{"topic_id": t, "partitions": [partition((t, p)) for p in ps]} for t, ps in grouped.items()]
