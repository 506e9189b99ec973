"""Random joins, syncs, heartbeats, leaves, commits and clock jumps against one group coordinator.

Invariants after every step:
- a group's generation never decreases;
- one leader per generation (a static leader keeps its instance id when its process restarts);
- a leader is a member, and so is every member awaiting a response;
- in Stable, every member has the assignment the leader's SyncGroup stored;
- replaying the durable records written so far rebuilds the same Stable/Empty groups and offsets;
- every parked request is either answered or still held by its member (nothing hangs forever).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kio.schema.errors import ErrorCode

from coordinator.classic.group import ClassicGroup
from coordinator.classic.state import ClassicGroupState as S
from kernel.result import PARKED
from tests.unit.classic.context import PROTOCOLS, Context

GROUPS = ("g1", "g2")
PROTOCOL_SETS = (PROTOCOLS, (("roundrobin", b"rr-meta"),), (("range", b"other-meta"), ("roundrobin", b"rr")))


@dataclass
class Client:
    group_id: str
    instance: str | None
    member_id: str = ""
    generation: int = -1
    members_seen: tuple[str, ...] = ()
    synced_generation: int = -1
    must_rejoin: bool = True
    pending: list = field(default_factory=list)  # Pending join/sync requests not yet read


class GroupCoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = Context(initial_rebalance_delay_ms=500, max_size=4)
        self.clients: list[Client] = []
        self.parked_tokens: set[int] = set()
        self.generations: dict[str, int] = {}
        self.leaders: dict[tuple[str, int], str] = {}
        self.log = []

    # -- clients ----------------------------------------------------------------------------------

    @rule(group=st.sampled_from(GROUPS), static=st.booleans())
    def new_client(self, group: str, static: bool) -> None:
        if len(self.clients) < 8:
            self.clients.append(Client(group, f"i{len(self.clients)}" if static else None))

    def _client(self, index: int) -> Client | None:
        return self.clients[index % len(self.clients)] if self.clients else None

    def _track(self, pending) -> None:
        if pending.response is PARKED:
            self.parked_tokens.add(pending.token)

    def _read_answers(self, client: Client) -> None:
        still = []
        for kind, pending in client.pending:
            if pending.parked:
                still.append((kind, pending))
                continue
            answer = pending.answer
            if answer.error_code != ErrorCode.none:
                client.must_rejoin = True
                if answer.error_code in (ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id):
                    client.member_id, client.generation = "", -1
                continue
            if kind == "join":
                client.member_id, client.generation = answer.member_id, answer.generation_id
                client.members_seen = tuple(m.member_id for m in answer.members)
                client.must_rejoin = False
            else:
                client.synced_generation = client.generation
        client.pending = still

    @rule()
    def every_client_takes_its_next_step(self) -> None:
        """What a real client does next: join, sync as soon as it joined, then heartbeat."""
        for index, client in enumerate(self.clients):
            self._read_answers(client)
            if client.pending:
                continue
            if client.must_rejoin:
                self.join(index, PROTOCOLS, 10_000)
            elif client.synced_generation != client.generation:
                self.sync(index)
            else:
                response = self.ctx.heartbeat(client.member_id, client.generation, client.group_id, instance=client.instance)
                if response.error_code != ErrorCode.none:
                    client.must_rejoin = True
                    if response.error_code in (ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id):
                        client.member_id, client.generation = "", -1

    @rule(index=st.integers(0, 7), protocols=st.sampled_from(PROTOCOL_SETS), session=st.sampled_from((6_000, 10_000)))
    def join(self, index: int, protocols, session: int) -> None:
        client = self._client(index)
        if client is None:
            return
        self._read_answers(client)
        p = self.ctx.join(client.group_id, client.member_id, instance=client.instance, protocols=protocols,
                          session=session, rebalance=8_000)
        if p.response is not PARKED and p.response.error_code == ErrorCode.member_id_required:
            client.member_id = p.response.member_id
            return
        self._track(p)
        client.pending.append(("join", p))

    @rule(index=st.integers(0, 7))
    def sync(self, index: int) -> None:
        client = self._client(index)
        if client is None or not client.member_id:
            return
        self._read_answers(client)
        assignments = [(m, f"{m}@{client.generation}".encode()) for m in client.members_seen]
        p = self.ctx.sync(client.member_id, client.generation, client.group_id, assignments, instance=client.instance)
        self._track(p)
        client.pending.append(("sync", p))

    @rule(index=st.integers(0, 7))
    def heartbeat(self, index: int) -> None:
        client = self._client(index)
        if client is not None and client.member_id:
            self._read_answers(client)
            self.ctx.heartbeat(client.member_id, client.generation, client.group_id, instance=client.instance)

    @rule(index=st.integers(0, 7))
    def leave(self, index: int) -> None:
        client = self._client(index)
        if client is not None and client.member_id:
            self.ctx.leave(client.member_id, group_id=client.group_id)
            client.member_id, client.generation = "", -1

    @rule(index=st.integers(0, 7), offset=st.integers(0, 1000))
    def commit(self, index: int, offset: int) -> None:
        client = self._client(index)
        if client is not None:
            self.ctx.commit({("t", index % 3): offset}, member_id=client.member_id, generation=client.generation,
                            group_id=client.group_id, instance=client.instance if client.member_id else None)

    @rule(ms=st.sampled_from((0, 100, 1_000, 3_000, 7_000, 12_000)))
    def advance(self, ms: int) -> None:
        self.ctx.advance(ms)

    @precondition(lambda self: self.ctx.written)
    @rule()
    def collect_log(self) -> None:
        self.log += self.ctx.take_written()

    # -- invariants -----------------------------------------------------------------------------------

    def _groups(self):
        return [(gid, g) for gid, g in self.ctx.shard.groups.items() if isinstance(g, ClassicGroup)]

    @invariant()
    def generations_only_grow_and_one_leader_per_generation(self) -> None:
        for gid, group in self._groups():
            assert group.generation_id >= self.generations.get(gid, 0)
            self.generations[gid] = group.generation_id
            event(f"state {group.state.value}, generation {'>=3' if group.generation_id >= 3 else group.generation_id}")
            if group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
                assert group.leader_id in group.members
                leader = group.member(group.leader_id)
                identity = leader.group_instance_id or leader.member_id
                seen = self.leaders.setdefault((gid, group.generation_id), identity)
                assert seen == identity, f"{gid} generation {group.generation_id} had leaders {seen} and {identity}"

    @invariant()
    def counters_and_parked_members_are_consistent(self) -> None:
        for _, group in self._groups():
            assert group.num_awaiting_join == sum(m.is_awaiting_join for m in group.members.values())
            assert set(group.static_members.values()) <= set(group.members)
            if group.is_in(S.STABLE):
                assert not any(m.is_awaiting_join for m in group.members.values())
            if group.is_in(S.EMPTY):
                assert not group.members

    @invariant()
    def nothing_parked_is_lost(self) -> None:
        held = {
            token
            for _, group in self._groups()
            for m in group.members.values()
            for token in (m.awaiting_join, m.awaiting_sync)
            if token is not None
        }
        lost = {t for t in self.parked_tokens if t not in self.ctx.answers and t not in held}
        assert not lost, f"parked requests never answered: {lost}"

    @invariant()
    def replaying_the_log_rebuilds_stable_and_empty_groups(self) -> None:
        rebuilt = Context()
        for record in self.log + self.ctx.written:
            rebuilt.shard.replay(record)
        live, again = self.ctx.shard.durable_view(), rebuilt.shard.durable_view()
        assert again["offsets"] == live["offsets"]
        for gid, view in live["groups"].items():
            if view[0] in (S.STABLE.value, S.EMPTY.value):
                assert again["groups"].get(gid) == view, gid


TestGroupCoordinatorMachine = GroupCoordinatorMachine.TestCase
TestGroupCoordinatorMachine.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
