"""A classic group member, the client side of seeds 002/003, light enough for thousands per process.

    UNJOINED --JoinGroup--> JOINING --(leader assigns) SyncGroup--> SYNCING --> STABLE
    STABLE --heartbeat: REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION--> UNJOINED (rejoin, keep member id)
    any   --UNKNOWN_MEMBER_ID--> UNJOINED with no member id;  --coordinator errors--> find it again

JoinGroup v4+ first answers MEMBER_ID_REQUIRED with an id to join with. The leader runs the range
or round-robin assignor over the members' subscriptions. Every request's latency and outcome is
reported to `on_event(kind, latency_ms, error_code)` for benchmarks, locust and the event log.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.client.assignors import ASSIGNORS
from loadtest.client.cluster_client import RETRIABLE_COORDINATOR_ERRORS, ClusterClient
from loadtest.client.connection import Connection, ConnectionClosed
from loadtest.client.events import EventSink, timed
from loadtest.client.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, encode_subscription


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"
    STOPPED = "stopped"


class Fenced(Exception):
    """FENCED_INSTANCE_ID: another process took this group.instance.id; Kafka clients stop."""


@dataclass
class MemberConfig:
    group_id: str
    topics: list[str]
    assignor: str = "range"
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 30_000
    heartbeat_interval_ms: int = 3_000
    group_instance_id: str | None = None
    retry_backoff_ms: int = 100


@dataclass
class ClassicMember:
    cluster: ClusterClient
    config: MemberConfig
    on_event: EventSink | None = None
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    state: MemberState = MemberState.UNJOINED
    assignment: dict[str, list[int]] = field(default_factory=dict)
    rebalances: int = 0
    _conn: Connection | None = None
    _members: dict[str, list[str]] = field(default_factory=dict)  # the leader's view of subscriptions
    _skip_assignment: bool = False

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader

    # -- plumbing -----------------------------------------------------------------------------------

    async def _coordinator(self) -> Connection:
        if self._conn is None or self._conn.closed:
            self._conn = await self.cluster.coordinator_connection(self.config.group_id, self.config.retry_backoff_ms)
        return self._conn

    async def _call(self, kind: str, api_key: int, version: int, body: dict) -> object:
        conn = await self._coordinator()
        try:
            return await timed(self.on_event, kind, conn.call(api_key, version, body))
        except ConnectionClosed:
            self._conn = None
            raise

    async def _lost_coordinator(self) -> None:
        if self._conn is not None:
            await self._conn.close()
        self._conn = None
        await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    def _handle_membership_error(self, error: ErrorCode) -> None:
        if error == ErrorCode.fenced_instance_id:
            self.state = MemberState.STOPPED
            raise Fenced(f"{self.config.group_instance_id} was fenced")
        if error == ErrorCode.unknown_member_id:
            self.member_id, self.generation = "", -1
        self.state = MemberState.UNJOINED

    # -- the rebalance ---------------------------------------------------------------------------------

    async def join(self) -> None:
        """JoinGroup then SyncGroup until STABLE, handling every retriable error on the way."""
        while self.state is not MemberState.STABLE:
            try:
                if await self._join_once() and await self._sync_once():
                    self.state = MemberState.STABLE
                    self.rebalances += 1
            except ConnectionClosed:
                await self._lost_coordinator()

    async def _join_once(self) -> bool:
        self.state = MemberState.JOINING
        body = {
            "group_id": self.config.group_id,
            "session_timeout": self.config.session_timeout_ms,
            "rebalance_timeout": self.config.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": "consumer",
            "protocols": [{"name": self.config.assignor, "metadata": encode_subscription(self.config.topics)}],
        }
        response = await self._call("join", ApiKey.JOIN_GROUP, 9, body)
        error = response.error_code
        if error == ErrorCode.member_id_required:
            self.member_id = response.member_id
            return False
        if error in RETRIABLE_COORDINATOR_ERRORS:
            await self._lost_coordinator()
            return False
        if error == ErrorCode.rebalance_in_progress:
            return False
        if error != ErrorCode.none:
            self._handle_membership_error(error)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            return False
        self.member_id, self.generation, self.leader = response.member_id, response.generation_id, response.leader
        self._members = {m.member_id: decode_subscription(m.metadata) for m in response.members}
        self._skip_assignment = response.skip_assignment
        return True

    async def _sync_once(self) -> bool:
        self.state = MemberState.SYNCING
        assignments = []
        if self.is_leader and not self._skip_assignment:
            topics = sorted({t for ts in self._members.values() for t in ts})
            plan = ASSIGNORS[self.config.assignor](self._members, await self.cluster.partitions_for(topics))
            assignments = [{"member_id": m, "assignment": encode_assignment(a)} for m, a in plan.items()]
        body = {
            "group_id": self.config.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": "consumer",
            "protocol_name": self.config.assignor,
            "assignments": assignments,
        }
        response = await self._call("sync", ApiKey.SYNC_GROUP, 5, body)
        error = response.error_code
        if error in RETRIABLE_COORDINATOR_ERRORS:
            await self._lost_coordinator()
            return False
        if error != ErrorCode.none:
            self._handle_membership_error(error)
            return False
        self.assignment = decode_assignment(response.assignment)
        return True

    # -- steady state ------------------------------------------------------------------------------------

    async def heartbeat(self) -> ErrorCode:
        body = {"group_id": self.config.group_id, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": self.config.group_instance_id}
        try:
            response = await self._call("heartbeat", ApiKey.HEARTBEAT, 4, body)
        except ConnectionClosed:
            await self._lost_coordinator()
            return ErrorCode.network_exception
        error = response.error_code
        if error in RETRIABLE_COORDINATOR_ERRORS:
            await self._lost_coordinator()
        elif error in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation, ErrorCode.unknown_member_id,
                       ErrorCode.fenced_instance_id):
            self._handle_membership_error(error)
        return error

    async def commit(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": ""}
            )
        body = {"group_id": self.config.group_id, "generation_id_or_member_epoch": self.generation,
                "member_id": self.member_id, "group_instance_id": self.config.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        try:
            response = await self._call("commit", ApiKey.OFFSET_COMMIT, 9, body)
        except ConnectionClosed:
            await self._lost_coordinator()
            return {key: ErrorCode.network_exception for key in offsets}
        out = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        errors = set(out.values()) - {ErrorCode.none}
        if errors & set(RETRIABLE_COORDINATOR_ERRORS):
            await self._lost_coordinator()
        elif errors & {ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation, ErrorCode.unknown_member_id}:
            self._handle_membership_error(next(iter(errors)))
        return out

    async def leave(self) -> None:
        if self.member_id and self._conn is not None and not self._conn.closed:
            body = {"group_id": self.config.group_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": self.config.group_instance_id}]}
            try:
                await self._call("leave", ApiKey.LEAVE_GROUP, 5, body)
            except ConnectionClosed:
                pass
        self.state = MemberState.STOPPED
        await self.close()

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def run(self, stop: asyncio.Event) -> None:
        """Join, then heartbeat every interval, rejoining whenever told to, until stop is set."""
        try:
            while not stop.is_set():
                if self.state is not MemberState.STABLE:
                    await self.join()
                    continue
                try:
                    await asyncio.wait_for(stop.wait(), self.config.heartbeat_interval_ms / 1000)
                except asyncio.TimeoutError:
                    await self.heartbeat()
        except Fenced:
            return
